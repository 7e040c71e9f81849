// `ckptcheck drill --faults power-loss,power-loss-mid-save,disk-full,read-error`: the storage faults,
// through ckptcheck-faultfs (docs/faultfs.md) mounted over the subject's checkpoint dir. Each save
// protocol is tests/data/programs/save_protocols.py (torch-free: it starts in milliseconds) on the
// drill contract; the unsafe ones fail naming the call they lack, the safe one passes. This machine
// has /dev/fuse: these tests run, they do not skip.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

const std::string kSaveProtocols =
    std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/programs/save_protocols.py";
const std::string kTorchProgram =
    std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/programs/torch_file_program.py";
const std::string kContractMistakes =
    std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/programs/contract_mistakes.py";

testing::CommandResult storage_drill(const std::string& faults, const std::string& program_args,
                                     const std::string& exe = CKPTCHECK_BIN) {
  return testing::run_command(exe + " drill --child-timeout 60 --save-at 4 --resume-steps 2 --faults " +
                              faults + " --json -- /usr/bin/python3 " + kSaveProtocols + " " + program_args +
                              " 2>&1");
}

nlohmann::json report_of(const testing::CommandResult& r) {
  const size_t start = r.output.find("{\n");
  if (start == std::string::npos) return nlohmann::json();
  const size_t end = r.output.rfind("\n}");
  return nlohmann::json::parse(r.output.substr(start, end + 2 - start), nullptr, false);
}

struct Verdict {
  std::string outcome, detail, missing;
  bool passed = false;
};

std::map<std::string, Verdict> verdicts(const nlohmann::json& report) {
  std::map<std::string, Verdict> out;
  if (!report.is_object()) return out;
  for (const auto& f : report["faults"])
    out[f["fault"]] = {f["outcome"], f["detail"], f["would_catch"], f["passed"].get<bool>()};
  return out;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Each protocol under a power loss at the step-4 checkpoint event and a disk that fills halfway
// through the step-4 save, with keep-last-1 retention (the protocols with their own names are
// drilled without retention by the read-error test below).
TEST(DrillStorageFaults, PowerLossAndDiskFullJudgeEachSaveProtocol) {
  struct Case {
    const char* args;
    bool power_loss_passes;
    const char* power_loss_says;  // in the detail
    const char* missing;          // the call that would have kept it
    bool disk_full_passes;
    const char* disk_full_says;
  };
  const Case cases[] = {
      {"--protocol final --keep-last 1", false, "ckpt/step_4.ckpt: 16.32 KiB written, never fsynced — lost",
       "fsync of ckpt/step_4.ckpt", true, "step_2.ckpt whole"},
      {"--protocol rename --keep-last 1", false, "never fsynced — lost", "fsync of ckpt/step_4.ckpt", true,
       "step_2.ckpt whole"},
      {"--protocol fsync-rename --keep-last 1", false,
       "rename ckpt/step_4.ckpt.tmp -> ckpt/step_4.ckpt not durable: no fsync of ckpt/", "fsync of ckpt/",
       true, "step_2.ckpt whole"},
      {"--protocol durable --keep-last 1", true, "survived the power loss whole", "", true,
       "step_2.ckpt whole"},
      // fsynced in place, but the file's first creation never had its directory fsynced
      {"--protocol in-place", false,
       "ckpt/latest.ckpt: created, but its directory entry never became durable", "fsync of ckpt/", false,
       "latest.ckpt, the checkpoint before, was destroyed"},
  };
  for (const Case& c : cases) {
    const auto r = storage_drill("power-loss,disk-full", c.args);
    const bool all_pass = c.power_loss_passes && c.disk_full_passes;
    EXPECT_EQ(r.exit_code, all_pass ? 0 : 1) << c.args << ": " << r.output;
    const auto report = report_of(r);
    const auto v = verdicts(report);
    ASSERT_EQ(v.count("power-loss"), 1u) << c.args << ": " << r.output;
    ASSERT_EQ(v.count("disk-full"), 1u) << c.args << ": " << r.output;
    const Verdict& pl = v.at("power-loss");
    EXPECT_EQ(pl.passed, c.power_loss_passes) << c.args << ": " << pl.detail;
    EXPECT_EQ(pl.outcome, c.power_loss_passes ? "survived" : "lost") << c.args << ": " << pl.detail;
    EXPECT_TRUE(has(pl.detail, c.power_loss_says)) << c.args << ": " << pl.detail;
    EXPECT_TRUE(has(pl.missing, c.missing)) << c.args << ": " << pl.missing;
    const Verdict& df = v.at("disk-full");
    EXPECT_EQ(df.passed, c.disk_full_passes) << c.args << ": " << df.detail;
    EXPECT_TRUE(has(df.detail, c.disk_full_says)) << c.args << ": " << df.detail;
    if (c.disk_full_passes) EXPECT_TRUE(has(df.detail, "the relaunch resumed from step 2")) << df.detail;
    // The failure lines (the terminal's, JUnit's) say it too, with the missing call.
    // keep-last 1 had deleted step_2 before step_4 was durable: nothing is left to resume from.
    if (!c.power_loss_passes && has(c.args, "--keep-last 1"))
      EXPECT_TRUE(has(pl.detail,
                      "no checkpoint survives (step_2.ckpt deleted by the program before "
                      "step_4.ckpt was durable)"))
          << c.args << ": " << pl.detail;
    if (!c.power_loss_passes) {
      const std::string failures = report["failures"].dump();
      EXPECT_TRUE(has(failures, "fault power-loss: lost: ") && has(failures, "would have been kept by: ") &&
                  has(failures, c.missing))
          << failures;
    }
  }
}

// A save that swallows ENOSPC and announces the checkpoint anyway is named.
TEST(DrillStorageFaults, AnAnnouncedIncompleteSaveFails) {
  const auto r = storage_drill("disk-full", "--protocol final --swallow-save-errors");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto v = verdicts(report_of(r));
  ASSERT_EQ(v.count("disk-full"), 1u) << r.output;
  EXPECT_EQ(v.at("disk-full").outcome, "announced-incomplete") << v.at("disk-full").detail;
  EXPECT_TRUE(has(v.at("disk-full").detail, "announced step_4.ckpt anyway")) << v.at("disk-full").detail;
}

// The power fails at the first file of the step-4 save: the step-2 checkpoint must have been durable.
TEST(DrillStorageFaults, PowerLossMidSave) {
  const auto safe = storage_drill("power-loss-mid-save", "--protocol durable --keep-last 1 --save-sleep 0.3");
  EXPECT_EQ(safe.exit_code, 0) << safe.output;
  auto v = verdicts(report_of(safe));
  ASSERT_EQ(v.count("power-loss-mid-save"), 1u) << safe.output;
  EXPECT_EQ(v.at("power-loss-mid-save").outcome, "survived") << v.at("power-loss-mid-save").detail;
  EXPECT_TRUE(has(v.at("power-loss-mid-save").detail, "the relaunch resumed from step 2"))
      << v.at("power-loss-mid-save").detail;

  const auto unsafe = storage_drill("power-loss-mid-save", "--protocol rename --save-sleep 0.3");
  EXPECT_EQ(unsafe.exit_code, 1) << unsafe.output;
  v = verdicts(report_of(unsafe));
  ASSERT_EQ(v.count("power-loss-mid-save"), 1u) << unsafe.output;
  EXPECT_EQ(v.at("power-loss-mid-save").outcome, "lost") << v.at("power-loss-mid-save").detail;
  EXPECT_TRUE(
      has(v.at("power-loss-mid-save").detail, "step_2.ckpt, the checkpoint announced before the step-4 save"))
      << v.at("power-loss-mid-save").detail;
}

// A save in place creates no name: the power fails at its first write (the O_TRUNC open of
// latest.ckpt, inotify's IN_MODIFY), and the file, whose creation was never made durable by an fsync
// of its directory, is lost whole. Before the write trigger this drill exited 2.
TEST(DrillStorageFaults, PowerLossMidSaveOfASaveInPlaceFiresAtItsFirstWrite) {
  const auto r = storage_drill("power-loss-mid-save", "--protocol in-place --save-sleep 0.3");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto report = report_of(r);
  const auto v = verdicts(report);
  ASSERT_EQ(v.count("power-loss-mid-save"), 1u) << r.output;
  const Verdict& pl = v.at("power-loss-mid-save");
  EXPECT_EQ(pl.outcome, "lost") << pl.detail;
  EXPECT_TRUE(has(pl.detail, "latest.ckpt, the checkpoint announced before the step-4 save")) << pl.detail;
  EXPECT_TRUE(has(pl.detail, "ckpt/latest.ckpt: created, but its directory entry never became durable"))
      << pl.detail;
  EXPECT_TRUE(has(pl.missing, "fsync of ckpt/")) << pl.missing;
  bool fired_at_the_write = false;
  for (const auto& c : report["checks"])
    if (c["name"] == "fault_power-loss-mid-save")
      fired_at_the_write = c["numbers"]["trigger"] == "latest.ckpt";
  EXPECT_TRUE(fired_at_the_write) << report["checks"].dump();
}

// EIO on every file of the step-4 checkpoint when the relaunch reads it.
TEST(DrillStorageFaults, ReadErrorRefusedOrFallenBackPassesAFreshStartFails) {
  const struct {
    const char* on_read_error;
    int exit_code;
    const char* outcome;
  } cases[] = {{"exit", 0, "refused"}, {"fallback", 0, "fell-back"}, {"fresh", 1, "fresh-start"}};
  for (const auto& c : cases) {
    const auto r = storage_drill("read-error", std::string("--on-read-error ") + c.on_read_error);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.on_read_error << ": " << r.output;
    const auto v = verdicts(report_of(r));
    ASSERT_EQ(v.count("read-error"), 1u) << r.output;
    EXPECT_EQ(v.at("read-error").outcome, c.outcome) << v.at("read-error").detail;
    EXPECT_TRUE(has(v.at("read-error").detail, "reads of step_4.ckpt (1 file) answered EIO"))
        << v.at("read-error").detail;
  }
}

// The same protocols without retention (keep-last 0) under a power loss and a full disk: the verdict
// and the missing call do not depend on it, what is left does (step_2 was on disk and was lost with
// the rest; with keep-last 1, above, the program had deleted it). Under power-loss-mid-save retention
// changes nothing (at the step-4 save keep-last 1 has deleted no checkpoint yet): PowerLossMidSave
// drills one protocol with it and one without.
TEST(DrillStorageFaults, PowerLossAndDiskFullWithoutRetention) {
  struct Case {
    const char* protocol;
    bool power_loss_passes;
    const char* missing;
  };
  const Case cases[] = {{"final", false, "fsync of ckpt/step_4.ckpt"},
                        {"rename", false, "fsync of ckpt/step_4.ckpt"},
                        {"fsync-rename", false, "fsync of ckpt/"},
                        {"durable", true, ""}};
  for (const Case& c : cases) {
    const std::string args = std::string("--protocol ") + c.protocol + " --keep-last 0";
    const auto r = storage_drill("power-loss,disk-full", args);
    EXPECT_EQ(r.exit_code, c.power_loss_passes ? 0 : 1) << args << ": " << r.output;
    const auto v = verdicts(report_of(r));
    ASSERT_EQ(v.count("power-loss"), 1u) << args << ": " << r.output;
    ASSERT_EQ(v.count("disk-full"), 1u) << args << ": " << r.output;
    const Verdict& pl = v.at("power-loss");
    EXPECT_EQ(pl.passed, c.power_loss_passes) << args << ": " << pl.detail;
    EXPECT_TRUE(has(pl.missing, c.missing)) << args << ": " << pl.missing;
    if (c.power_loss_passes)
      EXPECT_TRUE(has(pl.detail, "the relaunch resumed from step 4 and matched"))
          << args << ": " << pl.detail;
    else
      EXPECT_TRUE(has(pl.detail, "no checkpoint survives (step_2.ckpt lost too)"))
          << args << ": " << pl.detail;
    // A new name per save: a full disk leaves the one before whole, with or without retention.
    EXPECT_TRUE(v.at("disk-full").passed) << args << ": " << v.at("disk-full").detail;
    EXPECT_TRUE(has(v.at("disk-full").detail, "step_2.ckpt whole; the relaunch resumed from step 2"))
        << args << ": " << v.at("disk-full").detail;
  }
}

// ckptcheck.torch.save and ckptcheck.torch.load, the safe path we document for PyTorch users
// (tests/data/programs/torch_file_program.py, Debian's python3-torch), pass every storage fault: the
// announced file survives a power loss whole with its seal, the one before survives a power loss
// inside the next save (--save-sleep: torch.save waits inside the save's temp dir), a full disk fails
// the save before its announcement and leaves the one before whole, and a file that cannot be read
// is refused by the load, before a step.
TEST(DrillStorageFaults, CkptcheckTorchSavePassesEveryStorageFault) {
  const std::string python_dir = (fs::path(CKPTCHECK_BIN).parent_path() / "python").string();
  const auto r =
      testing::run_command("PYTHONPATH=" + python_dir + " " + CKPTCHECK_BIN +
                           " drill --child-timeout 120 --save-at 4 --resume-steps 2 --faults "
                           "power-loss,power-loss-mid-save,disk-full,read-error --json -- /usr/bin/python3 " +
                           kTorchProgram + " --save-sleep 0.2 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto v = verdicts(report_of(r));
  ASSERT_EQ(v.size(), 4u) << r.output;
  const struct {
    const char* fault;
    const char* outcome;
    const char* says;
  } expected[] = {
      {"power-loss", "survived", "step_4.pt, announced at step 4, survived the power loss whole"},
      {"power-loss-mid-save", "survived", "the relaunch resumed from step 2 and matched the reference"},
      {"disk-full", "survived", "the relaunch resumed from step 2 and matched the reference"},
      {"read-error", "refused", "Input/output error"},
  };
  for (const auto& e : expected) {
    const Verdict& f = v.at(e.fault);
    EXPECT_TRUE(f.passed) << e.fault << ": " << f.detail;
    EXPECT_EQ(f.outcome, e.outcome) << e.fault << ": " << f.detail;
    EXPECT_TRUE(has(f.detail, e.says)) << e.fault << ": " << f.detail;
  }
}

// The built-in workload's writer (write_checkpoint: shards and manifest in a temp dir, fsynced,
// renamed, the parent fsynced) keeps its announced checkpoint through a power loss, and a full disk
// fails its save visibly and leaves the checkpoint before whole.
TEST(DrillStorageFaults, TheBuiltInWriterSurvivesAPowerLossAndAFullDisk) {
  const auto r = testing::run_command(
      "CKPTCHECK_NO_PROGRESS=1 " + std::string(CKPTCHECK_BIN) + " drill --config " + testing::kPilotConfig +
      " --save-at 4 --resume-steps 2 --faults power-loss,disk-full --json 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto v = verdicts(report_of(r));
  ASSERT_EQ(v.count("power-loss"), 1u) << r.output;
  ASSERT_EQ(v.count("disk-full"), 1u) << r.output;
  EXPECT_EQ(v.at("power-loss").outcome, "survived") << v.at("power-loss").detail;
  EXPECT_TRUE(has(v.at("power-loss").detail, "the relaunch resumed from step 4 and matched"))
      << v.at("power-loss").detail;
  EXPECT_EQ(v.at("disk-full").outcome, "survived") << v.at("disk-full").detail;
  EXPECT_TRUE(has(v.at("disk-full").detail, "the relaunch resumed from step 2 and matched"))
      << v.at("disk-full").detail;
}

// `--relaunch-dir same` (docs/drill.md): after a kill the relaunch finds the subject's own
// checkpoint dir as the kill left it, torn save included. A program that cannot save over its own
// leftovers (os.makedirs(step_4.tmp) without exist_ok) passes with the default, fresh, and fails with
// same, as a restarted job would; one that removes them passes both.
TEST(DrillStorageFaults, RelaunchDirSameFindsTheTornSaveOfTheKill) {
  auto drill = [](const std::string& relaunch_dir, const std::string& mistake) {
    return testing::run_command(std::string(CKPTCHECK_BIN) +
                                " drill --save-at 4 --resume-steps 2 --kill during-save --relaunch-dir " +
                                relaunch_dir + " --json -- /usr/bin/python3 " + kContractMistakes +
                                " --save-sleep 0.3 --mistake " + mistake + " 2>&1");
  };
  const auto fresh = drill("fresh", "keep-leftovers");
  EXPECT_EQ(fresh.exit_code, 0) << fresh.output;
  const auto same = drill("same", "keep-leftovers");
  EXPECT_EQ(same.exit_code, 1) << same.output;
  const auto report = report_of(same);
  ASSERT_TRUE(report.is_object()) << same.output;
  const std::string failures = report["failures"].dump();
  EXPECT_TRUE(has(failures, "FileExistsError") && has(failures, "step_4.tmp")) << failures;
  const auto safe = drill("same", "none");
  EXPECT_EQ(safe.exit_code, 0) << safe.output;
  const auto safe_report = report_of(safe);
  ASSERT_TRUE(safe_report.is_object()) << safe.output;
  EXPECT_EQ(safe_report["modes"][0]["resumed_from_step"], 2) << safe.output;
}

// The example we ship (examples/pytorch/train.py, on Debian's python3-torch) survives a power loss at
// its checkpoint event: it fsyncs the file, renames it and fsyncs the directory. Before it did, this
// failed: "step_4.pt: ... written, never fsynced — lost" (docs/drill.md).
TEST(DrillStorageFaults, TheShippedExampleSurvivesAPowerLoss) {
  const auto r =
      testing::run_command(std::string(CKPTCHECK_BIN) +
                           " drill --child-timeout 120 --save-at 4 --resume-steps 2 --faults power-loss "
                           "--json -- /usr/bin/python3 " +
                           testing::kExampleTrainScript + " --single-file 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto v = verdicts(report_of(r));
  ASSERT_EQ(v.count("power-loss"), 1u) << r.output;
  EXPECT_EQ(v.at("power-loss").outcome, "survived") << v.at("power-loss").detail;
}

// Without ckptcheck-faultfs beside ckptcheck (or /dev/fuse) the drill exits 2 saying what it needs,
// before it runs anything.
TEST(DrillStorageFaults, WithoutTheFaultFileSystemTheDrillSaysWhatItNeeds) {
  testing::TempDir dir;
  const std::string exe = dir / "ckptcheck";
  std::error_code ec;
  std::filesystem::create_hard_link(CKPTCHECK_BIN, exe, ec);
  if (ec) std::filesystem::copy_file(CKPTCHECK_BIN, exe, ec);
  ASSERT_FALSE(ec) << ec.message();
  const auto r = storage_drill("power-loss", "--protocol durable", exe);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "ckptcheck-faultfs")) << r.output;
  EXPECT_TRUE(has(r.output, "/dev/fuse")) << r.output;
}

}  // namespace
}  // namespace ckpt
