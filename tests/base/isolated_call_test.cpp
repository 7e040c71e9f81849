#include "base/isolated_call.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ckpt {
namespace {

IsolatedOutcome run(const std::function<std::string()>& fn, const IsolationLimits& limits = {}) {
  auto r = run_isolated(fn, limits);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : IsolatedOutcome{};
}

TEST(IsolatedCall, ReturnsTheFunctionsBytesEvenPastThePipeBuffer) {
  std::string big(3 << 20, '\0');  // 3 MiB: many pipe buffers, with NUL bytes in it
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + (i >> 9));
  const IsolatedOutcome out = run([&] { return big; });
  ASSERT_TRUE(out.completed) << out.failure;
  EXPECT_EQ(out.output, big);
  EXPECT_TRUE(run([] { return std::string(); }).completed);
}

TEST(IsolatedCall, TheChildWorksOnACopy) {
  int value = 1;
  const IsolatedOutcome out = run([&] {
    value = 2;
    return std::to_string(value);
  });
  ASSERT_TRUE(out.completed) << out.failure;
  EXPECT_EQ(out.output, "2");
  EXPECT_EQ(value, 1);
}

TEST(IsolatedCall, AnAbortIsAnOutcomeNamingTheSignal) {
  const IsolatedOutcome out = run([]() -> std::string { std::abort(); });
  EXPECT_FALSE(out.completed);
  EXPECT_EQ(out.failure, "killed by SIGABRT");
  EXPECT_TRUE(out.output.empty());
}

TEST(IsolatedCall, AWildWriteIsAnOutcomeNotACrash) {
  const IsolatedOutcome out = run([]() -> std::string {
    volatile uintptr_t wild = 16;
    *reinterpret_cast<volatile int*>(wild) = 1;
    return "unreachable";
  });
  EXPECT_FALSE(out.completed);
  // AddressSanitizer reports the SEGV itself and exits 1.
  if (!built_with_address_sanitizer()) {
    EXPECT_EQ(out.failure, "killed by SIGSEGV");
  }
  EXPECT_FALSE(out.failure.empty());
}

TEST(IsolatedCall, AChildThatNeverReturnsIsKilledAtTheDeadline) {
  IsolationLimits limits;
  limits.wall_seconds = 0.5;
  const IsolatedOutcome out = run(
      []() -> std::string {
        for (;;) ::pause();
      },
      limits);
  EXPECT_FALSE(out.completed);
  EXPECT_EQ(out.failure, "exceeded 0.5 s");
}

TEST(IsolatedCall, AChildThatSpinsHitsItsCpuLimit) {
  IsolationLimits limits;
  limits.cpu_seconds = 1;
  limits.wall_seconds = 60;  // the CPU limit must end it, not the deadline
  const IsolatedOutcome out = run(
      []() -> std::string {
        volatile uint64_t n = 0;
        for (;;) n = n + 1;
      },
      limits);
  EXPECT_FALSE(out.completed);
  EXPECT_EQ(out.failure, "exceeded its CPU limit (1 s)");
}

TEST(IsolatedCall, AnAllocationPastTheMemoryLimitEndsTheChild) {
  if (built_with_address_sanitizer()) GTEST_SKIP() << "RLIMIT_AS is not applied under AddressSanitizer";
  IsolationLimits limits;
  limits.extra_address_space_bytes = 64 << 20;
  // 512 MiB of address space, never touched (new char[] leaves it unwritten), so no RAM is used.
  auto allocate = [] {
    std::unique_ptr<char[]> huge(new char[size_t{512} << 20]);
    volatile char* last = huge.get() + (size_t{512} << 20) - 1;  // one page touched, so it is really used
    *last = 'd';
    return std::string("allocate") + *last;
  };
  const IsolatedOutcome out = run(allocate, limits);
  EXPECT_FALSE(out.completed);
  EXPECT_EQ(out.failure, "ran out of memory (limit 64 MiB above the parent)");
  // The same allocation passes without the limit: the limit, not the machine, stopped it.
  limits.extra_address_space_bytes = 0;
  const IsolatedOutcome unlimited = run(allocate, limits);
  EXPECT_TRUE(unlimited.completed) << unlimited.failure;
  EXPECT_EQ(unlimited.output, "allocated");
}

TEST(IsolatedCall, OutputPastTheLimitIsRefused) {
  IsolationLimits limits;
  limits.max_output_bytes = 1024;
  const IsolatedOutcome out = run([] { return std::string(4096, 'a'); }, limits);
  EXPECT_FALSE(out.completed);
  EXPECT_EQ(out.failure, "wrote more than 1024 bytes");
  EXPECT_TRUE(run([] { return std::string(1024, 'a'); }, limits).completed);
}

TEST(IsolatedCall, AnExceptionEndsTheChild) {
  const IsolatedOutcome out = run([]() -> std::string { throw std::runtime_error("no"); });
  EXPECT_FALSE(out.completed);
  EXPECT_EQ(out.failure, "ended by an exception");
}

TEST(IsolatedCall, ANonZeroExitIsAnOutcome) {
  const IsolatedOutcome out = run([]() -> std::string { ::_exit(3); });
  EXPECT_FALSE(out.completed);
  EXPECT_EQ(out.failure, "exited with status 3");
}

// Children forked by other threads hold copies of each other's pipes; every call must still get
// exactly its own child's bytes, and a hanging sibling must not delay the others to its deadline.
TEST(IsolatedCall, CallsFromSeveralThreadsEachGetTheirOwnOutput) {
  // libasan before LLVM 17 (GCC 12's) takes no fork handlers for its allocator: a child forked while
  // another thread allocates can wait forever on the copied lock (it then ends at its deadline).
  if (built_with_address_sanitizer()) GTEST_SKIP() << "fork from several threads under ASan can deadlock";
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 25; ++i) {
        const std::string want = std::to_string(t) + ":" + std::to_string(i) + std::string(i * 1000, 'z');
        auto r = run_isolated([&] { return want; });
        if (!r.is_ok() || !r->completed || r->output != want) ++wrong[t];
      }
    });
  }
  IsolationLimits slow;
  slow.wall_seconds = 30;
  std::thread hanging([&] {
    auto r = run_isolated(
        []() -> std::string {
          ::sleep(1);
          return "late";
        },
        slow);
    EXPECT_TRUE(r.is_ok() && r->completed && r->output == "late");
  });
  for (auto& th : threads) th.join();
  hanging.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace ckpt
