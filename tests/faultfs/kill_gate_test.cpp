// faultfs/kill_gate.h in process: which request reaches the drill's kill point, and that it is held
// (the caller does not return) until release().
#include "faultfs/kill_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace ckpt::faultfs {
namespace {

// Offers `request` to the gate from a thread of its own (the FUSE thread) and says whether it came
// back before the drill released it.
struct Offered {
  std::atomic<bool> returned{false};
  std::thread thread;
  template <typename F>
  explicit Offered(F request)
      : thread([this, request] {
          request();
          returned = true;
        }) {}
  ~Offered() {
    if (thread.joinable()) thread.join();
  }
};

void write(KillGate& gate, const std::string& path, const std::string& text) {
  gate.after_write(path, text.data(), text.size());
}

TEST(KillGate, AfterSaveHoldsTheWriteThatCompletesTheEventLineUntilReleased) {
  KillGate gate;
  ASSERT_TRUE(gate.arm("after-save metrics.jsonl 4").is_ok());
  write(gate, "/metrics.jsonl", "{\"step\": 4, \"loss\": 1.0}\n");
  write(gate, "/metrics.jsonl", "{\"event\": \"checkpoint\", \"step\": 2, \"path\": \"a\"}\n");
  write(gate, "/other.jsonl", "{\"event\": \"checkpoint\", \"step\": 4, \"path\": \"a\"}\n");
  EXPECT_FALSE(gate.wait_held(0)) << "nothing reached the point yet";
  // The event split over two writes: held at the one that ends the line.
  write(gate, "/metrics.jsonl", "{\"event\": \"checkpoint\", ");
  EXPECT_FALSE(gate.wait_held(0));
  Offered second([&] { write(gate, "/metrics.jsonl", "\"step\": 4, \"path\": \"ckpt/step_4\"}\n"); });
  const auto held = gate.wait_held(5000);
  ASSERT_TRUE(held);
  const auto what = nlohmann::json::parse(*held);
  EXPECT_EQ(what["op"], "write");
  EXPECT_EQ(what["line"], "{\"event\": \"checkpoint\", \"step\": 4, \"path\": \"ckpt/step_4\"}");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time for a gate that forgot to hold
  EXPECT_FALSE(second.returned) << "the request replied before the drill released it";
  gate.release();
  second.thread.join();
  EXPECT_TRUE(second.returned);
  // Disarmed: the same event again passes.
  write(gate, "/metrics.jsonl", "{\"event\": \"checkpoint\", \"step\": 4, \"path\": \"x\"}\n");
  EXPECT_FALSE(gate.wait_held(0));
}

TEST(KillGate, DuringSaveHoldsTheNextSavesFirstChangeNotTheArmingSavesTail) {
  KillGate gate;
  ASSERT_TRUE(gate.arm("during-save metrics.jsonl ckpt 2").is_ok());
  gate.after_change("create", "/ckpt/step_2.tmp");  // the arming save itself
  write(gate, "/ckpt/step_2.tmp", "bytes");
  gate.after_change("rename", "/ckpt/step_2");
  write(gate, "/metrics.jsonl", "{\"event\": \"checkpoint\", \"step\": 2, \"path\": \"ckpt/step_2\"}\n");
  gate.after_change("create", "/ckpt/latest");  // a marker after the save, before the next step
  gate.after_change("create", "/stdout.log");   // outside the checkpoint dir
  EXPECT_FALSE(gate.wait_held(0));
  write(gate, "/metrics.jsonl", "{\"step\": 3, \"loss\": 1.0}\n{\"step\": 4, \"loss\": 0.5}\n");
  gate.after_change("create", "/ckptx/not-it");  // a sibling whose name starts alike
  EXPECT_FALSE(gate.wait_held(0));
  // A save in place: its first change is a truncate of a name that exists.
  Offered first([&] { gate.after_change("truncate", "/ckpt/latest"); });
  const auto held = gate.wait_held(5000);
  ASSERT_TRUE(held);
  EXPECT_EQ(nlohmann::json::parse(*held)["path"], "/ckpt/latest");
  EXPECT_EQ(nlohmann::json::parse(*held)["op"], "truncate");
  EXPECT_FALSE(first.returned);
  gate.release();
  first.thread.join();
  EXPECT_TRUE(first.returned);
}

TEST(KillGate, AHoldEndsWhenTheDaemonIsAskedToStop) {
  KillGate gate;
  std::atomic<bool> stopping{false};
  gate.set_stop_check([&] { return stopping.load(); });
  ASSERT_TRUE(gate.arm("during-save m ckpt 0").is_ok());
  write(gate, "/m", "{\"step\": 1, \"loss\": 1}\n");
  Offered held([&] { gate.after_change("mkdir", "/ckpt/step_1"); });
  ASSERT_TRUE(gate.wait_held(5000));
  stopping = true;  // SIGTERM: the loop must be able to end and unmount
  held.thread.join();
  EXPECT_TRUE(held.returned);
}

// power-loss-mid-save splits during-save over two mounts: `after-step` holds the arming step line on
// the run dir's mount, `first-change` (armed by the drill meanwhile) holds the save's first change on
// the checkpoint dir's mount, whose root is the checkpoint dir.
TEST(KillGate, AfterStepHoldsTheFirstStepLinePastTheEvent) {
  KillGate gate;
  ASSERT_TRUE(gate.arm("after-step metrics.jsonl 2").is_ok());
  write(gate, "/metrics.jsonl", "{\"step\": 1, \"loss\": 1.0}\n{\"step\": 2, \"loss\": 1.0}\n");
  write(gate, "/metrics.jsonl", "{\"step\": 3, \"loss\": 1.0}\n");  // no event of step 2 yet
  gate.after_change("create", "/ckpt/step_2.tmp");                  // changes are not what it holds
  EXPECT_FALSE(gate.wait_held(0));
  write(gate, "/metrics.jsonl", "{\"event\": \"checkpoint\", \"step\": 2, \"path\": \"step_2\"}\n");
  EXPECT_FALSE(gate.wait_held(0)) << "the event itself is not the point";
  Offered step([&] { write(gate, "/metrics.jsonl", "{\"step\": 3, \"loss\": 0.5}\n"); });
  const auto held = gate.wait_held(5000);
  ASSERT_TRUE(held);
  EXPECT_EQ(nlohmann::json::parse(*held)["line"], "{\"step\": 3, \"loss\": 0.5}");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(step.returned);
  gate.release();
  step.thread.join();
  EXPECT_TRUE(step.returned);
}

TEST(KillGate, FirstChangeHoldsTheNextChangeAnywhereUnderItsDirFromTheStart) {
  KillGate gate;
  ASSERT_TRUE(gate.arm("first-change /").is_ok());
  write(gate, "/", "x");  // the root itself is not under the root
  EXPECT_FALSE(gate.wait_held(0));
  Offered first([&] { gate.after_change("create", "/a"); });  // a one-letter name at the root
  const auto held = gate.wait_held(5000);
  ASSERT_TRUE(held);
  EXPECT_EQ(nlohmann::json::parse(*held)["path"], "/a");
  EXPECT_FALSE(first.returned);
  gate.release();
  first.thread.join();
  gate.after_change("create", "/b");  // disarmed by the release
  EXPECT_FALSE(gate.wait_held(0));
}

TEST(KillGate, ABadArmingIsRefused) {
  KillGate gate;
  EXPECT_FALSE(gate.arm("after-save metrics.jsonl").is_ok());
  EXPECT_FALSE(gate.arm("during-save m ckpt two").is_ok());
  EXPECT_FALSE(gate.arm("sometime m 4").is_ok());
  EXPECT_FALSE(gate.arm("after-step m").is_ok());
  EXPECT_FALSE(gate.arm("first-change").is_ok());
}

}  // namespace
}  // namespace ckpt::faultfs
