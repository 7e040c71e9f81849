// The process-tree RSS sampler against processes that hold a known number of touched bytes.
#include "verifier/process/rss_sampler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "verifier/process/child_process.h"

namespace ckpt {
namespace {

constexpr uint64_t kHeld = 96ull << 20;

// `sh` (tiny) whose child python holds kHeld touched bytes for `seconds`: the bytes are a
// grandchild's, so only a sampler that walks the tree sees them.
ChildProcess spawn_holder(double seconds) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c",
            "/usr/bin/python3 -c 'import time; b = b\"\\x01\" * " + std::to_string(kHeld) + "; time.sleep(" +
                std::to_string(seconds) + ")'; true"};
  auto child = ChildProcess::spawn(o);
  EXPECT_TRUE(child.is_ok()) << child.status().to_string();
  return std::move(child).value();
}

TEST(RssSampler, SeesTheBytesAGrandchildHolds) {
  ChildProcess holder = spawn_holder(1.5);
  RssSampler sampler(holder.pid(), std::chrono::milliseconds(20));
  const ChildExit e = holder.wait(60);
  const RssPeak peak = sampler.stop();
  EXPECT_TRUE(e.ok()) << e.describe();
  EXPECT_GE(peak.peak_bytes, kHeld);
  EXPECT_LT(peak.peak_bytes, kHeld + (1ull << 30));  // not a unit error (pages, KiB)
  EXPECT_GE(peak.max_processes, 2);                  // sh and python
  EXPECT_GT(peak.samples, 1);
  EXPECT_DOUBLE_EQ(peak.interval_seconds, 0.02);
}

TEST(RssSampler, OwnTreeAndAGoneProcess) {
  int processes = 0;
  const uint64_t self = process_tree_rss_bytes(getpid(), &processes);
  EXPECT_GT(self, 1u << 20);
  EXPECT_GE(processes, 1);
  ChildProcess gone = spawn_holder(0);
  const pid_t pid = gone.pid();
  gone.wait(60);
  EXPECT_EQ(process_tree_rss_bytes(pid, &processes), 0u);
  EXPECT_EQ(processes, 0);
  RssSampler nothing(999999999, std::chrono::milliseconds(5));
  const RssPeak peak = nothing.stop();
  EXPECT_EQ(peak.samples, 0);
  EXPECT_EQ(peak.peak_bytes, 0u);
}

}  // namespace
}  // namespace ckpt
