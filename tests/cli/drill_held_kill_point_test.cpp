// The kill point held by the file system (verifier/drill/held_kill_point.h, docs/drill.md "The kill
// point"): a program that takes no time per step and saves small checkpoints, drilled on a machine
// kept busy, is killed exactly at its step-4 checkpoint event (nothing logged after it) and, for
// during-save, inside the step-4 save (its first file created, nothing written, nothing announced),
// every time, started once. Without the hold (CKPTCHECK_KILL_GATE=off in the environment) the same
// test fails: the program logs steps 5 and 6 before the drill's SIGKILL lands.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace held_kill_point_test {  // named: cli_tests is a unity build

namespace fs = std::filesystem;

const std::string kFastProgram = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/programs/save_protocols.py";

// One spinning process per CPU, started here and stopped by PID on every exit path: the loaded
// machine on which the unheld kill was seen to land late (issue 66 item 8).
class CpuBurners {
 public:
  CpuBurners() {
    const long cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    for (long i = 0; i < cpus; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        for (volatile unsigned long spin = 0;; spin = spin + 1) {
        }
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~CpuBurners() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  size_t count() const { return pids_.size(); }

 private:
  std::vector<pid_t> pids_;
};

std::vector<nlohmann::json> metrics_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(testing::read_text_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line, nullptr, false));
  return out;
}

nlohmann::json check_of(const nlohmann::json& report, const std::string& name, const std::string& mode) {
  for (const auto& c : report["checks"])
    if (c["name"] == name && c.value("mode", std::string()) == mode) return c;
  return nlohmann::json();
}

TEST(DrillHeldKillPoint, AFastProgramOnABusyMachineIsKilledAtItsCheckpointEventAndInsideItsSave) {
  CpuBurners busy;
  ASSERT_GT(busy.count(), 0u);
  constexpr int kRepetitions = 4;
  int at_event = 0, inside_save = 0;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    testing::TempDir work;
    // --event-sleep 0: nothing between the event and the next step; each step takes microseconds.
    const auto r = testing::run_command(std::string(CKPTCHECK_BIN) +
                                        " drill --child-timeout 60 --save-at 4 --resume-steps 2 --kill both "
                                        "--keep-work-dir --work-dir " +
                                        work.path() + " --json -- /usr/bin/python3 " + kFastProgram +
                                        " --protocol durable --event-sleep 0 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto report = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_TRUE(report.is_object()) << r.output;
    std::string drill_dir;
    for (const auto& e : fs::directory_iterator(work.path())) drill_dir = e.path().string();
    ASSERT_FALSE(drill_dir.empty());

    const auto after = check_of(report, "subject_killed", "after-save");
    ASSERT_TRUE(after.is_object()) << report.dump();
    EXPECT_TRUE(after["numbers"]["held_by_faultfs"].get<bool>()) << after.dump();
    EXPECT_EQ(after["numbers"]["starts"], 1) << after.dump();
    // At the event: the step-4 event is the last thing the subject wrote to its log.
    const auto after_log = metrics_lines(drill_dir + "/after-save/metrics.jsonl");
    ASSERT_FALSE(after_log.empty());
    const bool exact_event =
        after_log.back().value("event", "") == "checkpoint" && after_log.back()["step"] == 4;
    EXPECT_TRUE(exact_event) << "rep " << rep << ": the subject's log ends " << after_log.back().dump();
    at_event += exact_event;

    const auto during = check_of(report, "subject_killed", "during-save");
    ASSERT_TRUE(during.is_object()) << report.dump();
    EXPECT_TRUE(during["numbers"]["held_by_faultfs"].get<bool>()) << during.dump();
    EXPECT_EQ(during["numbers"]["starts"], 1) << during.dump();
    const auto landed = check_of(report, "kill_landed_during_save", "during-save");
    // Inside the save: step 4 logged, its checkpoint not announced, its first file created and empty.
    const auto during_log = metrics_lines(drill_dir + "/during-save/metrics.jsonl");
    ASSERT_FALSE(during_log.empty());
    const std::string tmp = drill_dir + "/during-save/ckpt/step_4.ckpt.tmp";
    const bool exact_save = landed.value("passed", false) && during_log.back().value("step", -1) == 4 &&
                            !during_log.back().contains("event") && fs::exists(tmp) &&
                            fs::file_size(tmp) == 0 &&
                            !fs::exists(drill_dir + "/during-save/ckpt/step_4.ckpt");
    EXPECT_TRUE(exact_save) << "rep " << rep << ": " << landed.dump() << "; log ends "
                            << during_log.back().dump();
    EXPECT_EQ(landed["numbers"]["trigger"], "step_4.ckpt.tmp") << landed.dump();
    inside_save += exact_save;
  }
  EXPECT_EQ(at_event, kRepetitions);
  EXPECT_EQ(inside_save, kRepetitions);
  std::printf("killed at the event %d/%d, inside the save %d/%d, with %zu CPU burners\n", at_event,
              kRepetitions, inside_save, kRepetitions, busy.count());
}

// A storage-fault drill of the fast program (--json, its work dir kept): the report, and the drill's
// own dir under `work`, where each fault's subject left its log.
struct FastFaultDrill {
  nlohmann::json report;
  std::string drill_dir;
  nlohmann::json check(const std::string& fault) const {  // a fault's check has no kill mode
    for (const auto& c : report["checks"])
      if (c["name"] == "fault_" + fault) return c;
    return nlohmann::json();
  }
};

FastFaultDrill run_fast_fault_drill(const std::string& faults, const testing::TempDir& work,
                                    const std::string& protocol = "durable", int expected_exit = 0) {
  const auto r = testing::run_command(
      std::string(CKPTCHECK_BIN) + " drill --child-timeout 60 --save-at 4 --resume-steps 2 --faults " +
      faults + " --keep-work-dir --work-dir " + work.path() + " --json -- /usr/bin/python3 " + kFastProgram +
      " --protocol " + protocol + " --event-sleep 0 2>/dev/null");
  EXPECT_EQ(r.exit_code, expected_exit) << r.output;
  FastFaultDrill out;
  // stdout's one JSON object; a failed drill's CAUSE and FAIL lines (stderr, merged here) follow it.
  const size_t begin = r.output.find('{'), end = r.output.rfind("\n}");
  out.report = begin == std::string::npos || end == std::string::npos
                   ? nlohmann::json()
                   : nlohmann::json::parse(r.output.substr(begin, end + 2 - begin), nullptr, false);
  EXPECT_TRUE(out.report.is_object()) << r.output;
  for (const auto& e : fs::directory_iterator(work.path())) out.drill_dir = e.path().string();
  return out;
}

// The storage faults that kill at the checkpoint event (power-loss, read-error) hold it too: the
// subject's run dir on a mount of its own, beside the fault's mount of its checkpoint dir. The same
// fast program on the same busy machine is killed (and loses power) exactly at its step-4 event; the
// unheld watch let it log steps 5 and 6 and save step 6 first.
TEST(DrillHeldKillPoint, PowerLossAndReadErrorHoldTheirCheckpointEventToo) {
  CpuBurners busy;
  ASSERT_GT(busy.count(), 0u);
  constexpr int kRepetitions = 2;
  int exact = 0;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    testing::TempDir work;
    const FastFaultDrill drill = run_fast_fault_drill("power-loss,read-error", work);
    ASSERT_FALSE(drill.drill_dir.empty());
    for (const std::string fault : {"power-loss", "read-error"}) {
      const nlohmann::json c = drill.check(fault);
      ASSERT_TRUE(c.is_object()) << drill.report.dump();
      EXPECT_TRUE(c["passed"].get<bool>()) << c.dump();
      EXPECT_TRUE(c["numbers"]["held_by_faultfs"].get<bool>()) << c.dump();
      const auto log = metrics_lines(drill.drill_dir + "/faults/" + fault + "/subject/metrics.jsonl");
      ASSERT_FALSE(log.empty());
      const bool at_event = log.back().value("event", "") == "checkpoint" && log.back()["step"] == 4;
      EXPECT_TRUE(at_event) << fault << " rep " << rep << ": the subject's log ends " << log.back().dump();
      exact += at_event;
    }
  }
  EXPECT_EQ(exact, 2 * kRepetitions);
}

// power-loss-mid-save holds its point over two mounts (the run dir's holds the step line past the
// step-2 event while the drill arms the checkpoint dir's mount for the save's first change): the same
// fast program, whose step-4 save takes a few milliseconds, loses power at that save's first request
// every time. Unheld, the watch's kill came after the save had written its file.
TEST(DrillHeldKillPoint, PowerLossMidSaveLandsInsideAFastSave) {
  CpuBurners busy;
  ASSERT_GT(busy.count(), 0u);
  constexpr int kRepetitions = 2;
  int inside = 0;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    testing::TempDir work;
    const FastFaultDrill drill = run_fast_fault_drill("power-loss-mid-save", work);
    const nlohmann::json c = drill.check("power-loss-mid-save");
    ASSERT_TRUE(c.is_object()) << drill.report.dump();
    EXPECT_TRUE(c["numbers"]["held_by_faultfs"].get<bool>()) << c.dump();
    const bool survived = c["numbers"]["outcome"] == "survived" && c["passed"].get<bool>();
    EXPECT_TRUE(survived) << "rep " << rep << ": " << c.dump();
    EXPECT_EQ(c["numbers"]["trigger"], "step_4.ckpt.tmp") << c.dump();
    // The power failed right at the save's first request: the journal lost its first file's name
    // and nothing written into it (unheld, the kill came after the save's 16 KiB were written).
    const nlohmann::json want_losses = {
        "ckpt/step_4.ckpt.tmp: created, but its directory entry never became durable: no fsync of ckpt/ "
        "— the file vanishes"};
    const bool first_request = c["numbers"]["losses"] == want_losses;
    EXPECT_TRUE(first_request) << "rep " << rep << ": " << c["numbers"]["losses"].dump();
    // Killed inside the save: step 4 logged last, nothing announced after step 2.
    const auto log = metrics_lines(drill.drill_dir + "/faults/power-loss-mid-save/subject/metrics.jsonl");
    ASSERT_FALSE(log.empty());
    const bool in_save = log.back().value("step", -1) == 4 && !log.back().contains("event");
    EXPECT_TRUE(in_save) << "rep " << rep << ": the subject's log ends " << log.back().dump();
    inside += survived && in_save && first_request;
  }
  EXPECT_EQ(inside, kRepetitions);
}

// disk-full holds its arming point too (the step line past the step-2 event), so the disk is full
// before the fast program's step-4 save: its durable save fails visibly and no step-4 checkpoint is
// announced. Unheld, ENOSPC was armed after the program had saved every step and ended, and the
// drill reported "the step-4 save hit ENOSPC" for a save that never did (found by a review).
TEST(DrillHeldKillPoint, DiskFullIsArmedBeforeAFastProgramsSave) {
  CpuBurners busy;
  ASSERT_GT(busy.count(), 0u);
  testing::TempDir work;
  const FastFaultDrill drill = run_fast_fault_drill("disk-full", work);
  const nlohmann::json c = drill.check("disk-full");
  ASSERT_TRUE(c.is_object()) << drill.report.dump();
  EXPECT_TRUE(c["passed"].get<bool>()) << c.dump();
  EXPECT_TRUE(c["numbers"]["held_by_faultfs"].get<bool>()) << c.dump();
  for (const auto& line : metrics_lines(drill.drill_dir + "/faults/disk-full/subject/metrics.jsonl"))
    EXPECT_FALSE(line.value("event", "") == "checkpoint" && line.value("step", 0) >= 4) << line.dump();
}

// Where only a fault fails, the cause is that fault, not a resume-state warning that failed nothing
// (this program keeps no optimizer, and its kill drill passes).
TEST(DrillHeldKillPoint, TheCauseOfAFailedFaultIsTheFault) {
  testing::TempDir work;
  const FastFaultDrill drill = run_fast_fault_drill("power-loss", work, "final", 1);
  EXPECT_EQ(drill.report.value("headline", "").rfind("power-loss: lost", 0), 0u) << drill.report.dump();
}

// A program whose metrics log is buffered (written at exit) cannot be killed at its checkpoint: the
// one write held is its last, carrying every line. The drill says so (exit 2, naming the flush the
// contract asks for), where it reported a kill "at the checkpoint event of step 4" and passed.
TEST(DrillHeldKillPoint, ABufferedLogIsNamedNotTakenForAKillAtTheEvent) {
  testing::TempDir work;
  const auto r =
      testing::run_command(std::string(CKPTCHECK_BIN) +
                           " drill --child-timeout 60 --save-at 4 --resume-steps 2 --kill after-save "
                           "--work-dir " +
                           work.path() + " -- /usr/bin/python3 " + kFastProgram +
                           " --protocol durable --event-sleep 0 --buffered-log");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("flush the metrics file after each line"), std::string::npos) << r.output;
}

// A fault that cannot apply (drop-file of a checkpoint that is one file) tested nothing: skipped in
// every view, never a passed check (it was JUnit's plain <testcase/>).
TEST(DrillHeldKillPoint, AFaultThatCannotApplyIsSkippedNotPassed) {
  testing::TempDir work;
  const FastFaultDrill drill = run_fast_fault_drill("drop-file", work);
  const nlohmann::json c = drill.check("drop-file");
  ASSERT_TRUE(c.is_object()) << drill.report.dump();
  EXPECT_FALSE(c.value("passed", true)) << c.dump();
  EXPECT_TRUE(c.value("skipped", false)) << c.dump();
}

// A drill that errors before it plans (an unknown fault) shows the N it was asked for, and "?" for the
// K it would have chosen, never 0.
TEST(DrillHeldKillPoint, AnErroredDrillShowsWhatItWasAskedNotZeros) {
  const auto r = testing::run_command(std::string(CKPTCHECK_BIN) + " drill --save-at 4 --faults bogus -- " +
                                      "/usr/bin/python3 " + kFastProgram);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown fault 'bogus'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("drill error: N=4 K=? "), std::string::npos) << r.output;
}

}  // namespace held_kill_point_test
}  // namespace ckpt
