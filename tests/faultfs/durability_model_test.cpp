// The durability model in process, rule by rule: each test writes through the model, cuts the power
// and looks at the backing directory as a reboot would find it.
#include "faultfs/durability_model.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "faultfs/control_protocol.h"
#include "tests/faultfs/faultfs_test_support.h"

namespace ckpt::faultfs {
namespace {

using testing::exists;
using testing::pattern_bytes;
using testing::read_file;
using testing::ScratchDir;
using testing::write_plain_file;

class DurabilityModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backing_ = scratch_.make("backing");
    state_ = scratch_.make("state");
  }
  void open_model(const std::string& root_name = ".") {
    auto model = DurabilityModel::open(backing_, state_, root_name);
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    model_ = std::move(*model);
  }
  std::string backing(const std::string& rel) const { return backing_ + "/" + rel; }

  HandleId open_handle(const std::string& path, int flags) {
    HandleId h = 0;
    EXPECT_EQ(model_->open_file(path, flags, 0644, &h), 0) << path;
    return h;
  }
  void write_at(HandleId h, const std::string& data, uint64_t offset) {
    size_t done = 0;
    ASSERT_EQ(model_->write(h, data.data(), data.size(), offset, &done), 0);
    ASSERT_EQ(done, data.size());
  }
  // open(O_CREAT|O_TRUNC), write, [fsync], close: the shape of every save.
  void save(const std::string& path, const std::string& data, bool fsync) {
    HandleId h = open_handle(path, O_WRONLY | O_CREAT | O_TRUNC);
    write_at(h, data, 0);
    if (fsync) {
      ASSERT_EQ(model_->fsync(h, false), 0);
    }
    ASSERT_EQ(model_->release(h), 0);
  }
  std::vector<Loss> power_loss() {
    auto losses = model_->power_loss();
    EXPECT_TRUE(losses.is_ok()) << losses.status().to_string();
    model_->recover();
    return losses.is_ok() ? *losses : std::vector<Loss>{};
  }
  static std::string messages(const std::vector<Loss>& losses) {
    std::string all;
    for (const Loss& l : losses) all += l.message + "\n";
    return all;
  }

  ScratchDir scratch_;
  std::string backing_, state_;
  std::unique_ptr<DurabilityModel> model_;
};

TEST_F(DurabilityModelTest, WhatWasThereAtTheStartIsDurable) {
  std::filesystem::create_directories(backing("ckpt"));
  write_plain_file(backing("ckpt/step_4.pt"), "four");
  open_model();
  power_loss();
  EXPECT_EQ(read_file(backing("ckpt/step_4.pt")), "four");
}

TEST_F(DurabilityModelTest, DataBecomesDurableOnlyAtFsync) {
  write_plain_file(backing("latest.pt"), "old contents");
  open_model();
  HandleId h = open_handle("latest.pt", O_RDWR);
  write_at(h, "NEW", 4);
  char buf[32] = {};
  size_t done = 0;
  ASSERT_EQ(model_->read(h, buf, sizeof(buf), 0, &done), 0);
  EXPECT_EQ(std::string(buf, done), "old NEWtents") << "reads see the latest writes";
  ASSERT_EQ(model_->release(h), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("latest.pt")), "old contents");

  h = open_handle("latest.pt", O_RDWR);
  write_at(h, "NEW", 4);
  ASSERT_EQ(model_->fsync(h, /*datasync=*/true), 0);
  ASSERT_EQ(model_->release(h), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("latest.pt")), "old NEWtents");
}

TEST_F(DurabilityModelTest, SizeRevertsToTheLastFsync) {
  write_plain_file(backing("f"), "0123456789");
  open_model();
  ASSERT_EQ(model_->truncate("f", 3), 0);
  HandleId h = open_handle("f", O_RDWR);
  write_at(h, "tail", 20);  // past the end: a hole, then bytes
  ASSERT_EQ(model_->release(h), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("f")), "0123456789");

  ASSERT_EQ(model_->truncate("f", 3), 0);
  h = open_handle("f", O_RDWR);
  ASSERT_EQ(model_->fsync(h, false), 0);
  write_at(h, "xyz", 3);  // after the fsync: lost again
  ASSERT_EQ(model_->release(h), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("f")), "012");
}

TEST_F(DurabilityModelTest, OpenWithTruncateOfADurableFileRevertsWithoutFsync) {
  write_plain_file(backing("latest.pt"), "the previous checkpoint");
  open_model();
  save("latest.pt", "half of the next", /*fsync=*/false);
  auto losses = power_loss();
  EXPECT_EQ(read_file(backing("latest.pt")), "the previous checkpoint");
  EXPECT_NE(messages(losses).find("latest.pt: 16 B written after its last fsync — lost"), std::string::npos)
      << messages(losses);
}

TEST_F(DurabilityModelTest, ACreateIsDurableOnlyAtFsyncOfItsDirectory) {
  open_model();
  save("a.pt", "data", /*fsync=*/true);
  power_loss();
  EXPECT_FALSE(exists(backing("a.pt"))) << "the file was fsynced, its directory entry was not";

  save("a.pt", "data", /*fsync=*/true);
  ASSERT_EQ(model_->fsync_dir(""), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("a.pt")), "data");
}

TEST_F(DurabilityModelTest, ADurableEntryWithoutFsyncedDataIsAnEmptyFile) {
  open_model();
  save("a.pt", "data", /*fsync=*/false);
  ASSERT_EQ(model_->fsync_dir(""), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("a.pt")), "");
}

TEST_F(DurabilityModelTest, RenameOverAnExistingFileIsDurableAtItsDirectoryFsync) {
  std::filesystem::create_directories(backing("ckpt"));
  write_plain_file(backing("ckpt/model.pt"), "step 4");
  open_model();
  save("ckpt/.tmp-model.pt", "step 8", /*fsync=*/true);
  ASSERT_EQ(model_->rename("ckpt/.tmp-model.pt", "ckpt/model.pt"), 0);
  EXPECT_EQ(read_file(backing("ckpt/model.pt")), "step 8");
  auto losses = power_loss();
  EXPECT_EQ(read_file(backing("ckpt/model.pt")), "step 4") << "the old file comes back whole";
  EXPECT_FALSE(exists(backing("ckpt/.tmp-model.pt")));
  EXPECT_NE(
      messages(losses).find("rename ckpt/.tmp-model.pt -> ckpt/model.pt not durable: no fsync of ckpt/"),
      std::string::npos)
      << messages(losses);

  save("ckpt/.tmp-model.pt", "step 8", /*fsync=*/true);
  ASSERT_EQ(model_->rename("ckpt/.tmp-model.pt", "ckpt/model.pt"), 0);
  ASSERT_EQ(model_->fsync_dir("ckpt"), 0);
  EXPECT_TRUE(power_loss().empty());
  EXPECT_EQ(read_file(backing("ckpt/model.pt")), "step 8");
  EXPECT_FALSE(exists(backing("ckpt/.tmp-model.pt")));
}

TEST_F(DurabilityModelTest, RenameWithoutFsyncOfTheDataKeepsTheNameButNotTheBytes) {
  open_model();
  save("tmp", "step 8", /*fsync=*/false);
  ASSERT_EQ(model_->rename("tmp", "model.pt"), 0);
  ASSERT_EQ(model_->fsync_dir(""), 0);
  auto losses = power_loss();
  EXPECT_EQ(read_file(backing("model.pt")), "");
  EXPECT_NE(messages(losses).find("model.pt: 6 B written, never fsynced — lost"), std::string::npos)
      << messages(losses);
}

TEST_F(DurabilityModelTest, AnUnlinkIsUndoneWithoutFsyncOfItsDirectory) {
  write_plain_file(backing("step_4.pt"), "four");
  open_model();
  ASSERT_EQ(model_->unlink("step_4.pt"), 0);
  EXPECT_FALSE(exists(backing("step_4.pt")));
  auto losses = power_loss();
  EXPECT_EQ(read_file(backing("step_4.pt")), "four");
  EXPECT_NE(messages(losses).find("unlink step_4.pt not durable: no fsync of ./ — the file comes back"),
            std::string::npos)
      << messages(losses);

  ASSERT_EQ(model_->unlink("step_4.pt"), 0);
  ASSERT_EQ(model_->fsync_dir(""), 0);
  power_loss();
  EXPECT_FALSE(exists(backing("step_4.pt")));
}

TEST_F(DurabilityModelTest, AnUnlinkedFileComesBackWithItsDurableContentNotItsLatest) {
  write_plain_file(backing("f"), "durable");
  open_model();
  HandleId h = open_handle("f", O_RDWR);
  write_at(h, "VOLATILE", 0);
  ASSERT_EQ(model_->release(h), 0);
  ASSERT_EQ(model_->unlink("f"), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("f")), "durable");
}

TEST_F(DurabilityModelTest, NestedDirectoriesNeedEveryLevelFsynced) {
  open_model();
  ASSERT_EQ(model_->mkdir("run", 0755), 0);
  ASSERT_EQ(model_->mkdir("run/ckpt", 0755), 0);
  save("run/ckpt/a.pt", "a", /*fsync=*/true);
  ASSERT_EQ(model_->fsync_dir("run/ckpt"), 0);
  ASSERT_EQ(model_->fsync_dir(""), 0);  // run/ is durable, but its entry ckpt/ is not
  power_loss();
  EXPECT_TRUE(exists(backing("run")));
  EXPECT_FALSE(exists(backing("run/ckpt")));

  ASSERT_EQ(model_->mkdir("run/ckpt", 0755), 0);
  save("run/ckpt/a.pt", "a", /*fsync=*/true);
  ASSERT_EQ(model_->fsync_dir("run/ckpt"), 0);
  ASSERT_EQ(model_->fsync_dir("run"), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("run/ckpt/a.pt")), "a");
}

TEST_F(DurabilityModelTest, ARmdirIsUndoneWithoutFsyncOfItsParent) {
  std::filesystem::create_directories(backing("old/inner"));
  write_plain_file(backing("old/inner/f"), "kept");
  open_model();
  ASSERT_EQ(model_->unlink("old/inner/f"), 0);
  ASSERT_EQ(model_->rmdir("old/inner"), 0);
  ASSERT_EQ(model_->fsync_dir("old"), 0);  // inner's removal durable; inner's own entries were never fsynced
  power_loss();
  EXPECT_FALSE(exists(backing("old/inner")));

  ASSERT_EQ(model_->rmdir("old"), 0);
  power_loss();
  EXPECT_TRUE(exists(backing("old")));
}

TEST_F(DurabilityModelTest, ARenameBetweenDirectoriesIsTwoEntries) {
  std::filesystem::create_directories(backing("a"));
  std::filesystem::create_directories(backing("b"));
  write_plain_file(backing("a/f"), "f");
  open_model();
  ASSERT_EQ(model_->rename("a/f", "b/f"), 0);
  ASSERT_EQ(model_->fsync_dir("b"), 0);
  power_loss();
  EXPECT_EQ(read_file(backing("a/f")), "f") << "the source directory was not fsynced";
  EXPECT_EQ(read_file(backing("b/f")), "f");

  ASSERT_EQ(model_->rename("b/f", "a/g"), 0);
  ASSERT_EQ(model_->fsync_dir("b"), 0);
  power_loss();
  EXPECT_FALSE(exists(backing("b/f")));
  EXPECT_FALSE(exists(backing("a/g"))) << "only the removal from b/ was made durable";
  EXPECT_EQ(read_file(backing("a/f")), "f");
}

TEST_F(DurabilityModelTest, SymlinksAndHardLinksAreEntriesLikeAnyOther) {
  write_plain_file(backing("step_8.pt"), "8");
  open_model();
  ASSERT_EQ(model_->symlink("step_8.pt", "latest"), 0);
  ASSERT_EQ(model_->link("step_8.pt", "copy"), 0);
  power_loss();
  EXPECT_FALSE(exists(backing("latest")));
  EXPECT_FALSE(exists(backing("copy")));
  ASSERT_EQ(model_->symlink("step_8.pt", "latest"), 0);
  ASSERT_EQ(model_->link("step_8.pt", "copy"), 0);
  ASSERT_EQ(model_->sync(), 0);
  power_loss();
  EXPECT_EQ(std::filesystem::read_symlink(backing("latest")).string(), "step_8.pt");
  EXPECT_EQ(read_file(backing("copy")), "8");
}

TEST_F(DurabilityModelTest, SyncMakesEverythingDurable) {
  open_model();
  ASSERT_EQ(model_->mkdir("d", 0755), 0);
  save("d/f", "synced by sync()", /*fsync=*/false);
  ASSERT_EQ(model_->sync(), 0);
  EXPECT_TRUE(power_loss().empty());
  EXPECT_EQ(read_file(backing("d/f")), "synced by sync()");
  for (const JournalEntry& e : model_->journal())
    EXPECT_TRUE(e.durable_seq != 0 || e.op == "power-loss") << e.op;
}

TEST_F(DurabilityModelTest, AnOverwriteInTheMiddleOfALargeFileShadowsOnlyThatRange) {
  const std::string original = pattern_bytes(32 << 20, 'a');
  write_plain_file(backing("big.pt"), original);
  open_model();
  HandleId h = open_handle("big.pt", O_RDWR);
  write_at(h, std::string(1 << 20, 'X'), 8 << 20);
  // The shadow is a sparse file holding only the megabyte that changed (memory holds none of it).
  bool found = false;
  for (const auto& entry : std::filesystem::directory_iterator(state_ + "/shadow")) {
    struct stat st {};
    ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
    EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, 2u << 20) << "shadow allocates more than the range";
    found = true;
  }
  EXPECT_TRUE(found);
  ASSERT_EQ(model_->release(h), 0);
  power_loss();
  EXPECT_TRUE(read_file(backing("big.pt")) == original) << "the overwritten megabyte came back";
}

TEST_F(DurabilityModelTest, TwoThreadsWritingTwoFiles) {
  open_model();
  const std::string a = pattern_bytes(4 << 20, 'a'), b = pattern_bytes(4 << 20, 'b');
  HandleId ha = open_handle("a.pt", O_WRONLY | O_CREAT);
  HandleId hb = open_handle("b.pt", O_WRONLY | O_CREAT);
  ASSERT_EQ(model_->fsync_dir(""), 0);
  auto writer = [&](HandleId h, const std::string& data, bool fsync) {
    for (size_t off = 0; off < data.size(); off += 65536) {
      size_t done = 0;
      EXPECT_EQ(model_->write(h, data.data() + off, 65536, off, &done), 0);
    }
    if (fsync) {
      EXPECT_EQ(model_->fsync(h, false), 0);
    }
  };
  std::thread ta(writer, ha, a, true), tb(writer, hb, b, false);
  ta.join();
  tb.join();
  EXPECT_EQ(read_file(backing("b.pt")), b);
  int write_entries = 0;
  for (const JournalEntry& e : model_->journal()) write_entries += e.op == "write";
  EXPECT_EQ(write_entries, 2) << "interleaved writes to two files are one entry per file";
  ASSERT_EQ(model_->release(ha), 0);
  ASSERT_EQ(model_->release(hb), 0);
  auto losses = power_loss();
  EXPECT_TRUE(read_file(backing("a.pt")) == a);
  EXPECT_EQ(read_file(backing("b.pt")), "");
  EXPECT_NE(messages(losses).find("b.pt: 4.00 MiB written, never fsynced — lost"), std::string::npos)
      << messages(losses);
}

TEST_F(DurabilityModelTest, EnospcFromAByteCountOn) {
  open_model();
  HandleId h = open_handle("f", O_WRONLY | O_CREAT);
  model_->enospc_after(100);
  size_t done = 0;
  std::string sixty(60, 'x');
  ASSERT_EQ(model_->write(h, sixty.data(), 60, 0, &done), 0);
  EXPECT_EQ(done, 60u);
  ASSERT_EQ(model_->write(h, sixty.data(), 60, 60, &done), 0);
  EXPECT_EQ(done, 40u) << "the write that crosses the budget is cut short";
  EXPECT_EQ(model_->write(h, sixty.data(), 60, 100, &done), ENOSPC);
  EXPECT_EQ(model_->fallocate(h, 0, 0, 4096), ENOSPC);
  model_->clear_faults();
  ASSERT_EQ(model_->write(h, sixty.data(), 60, 100, &done), 0);
  EXPECT_EQ(done, 60u);
  ASSERT_EQ(model_->release(h), 0);
}

TEST_F(DurabilityModelTest, EioOnReadsOfChosenFiles) {
  write_plain_file(backing("bad.pt"), "bad");
  write_plain_file(backing("good.pt"), "good");
  open_model();
  model_->eio_on_read("/bad.pt");
  char buf[8];
  size_t done = 0;
  HandleId bad = open_handle("bad.pt", O_RDONLY), good = open_handle("good.pt", O_RDONLY);
  EXPECT_EQ(model_->read(bad, buf, sizeof(buf), 0, &done), EIO);
  EXPECT_EQ(model_->read(good, buf, sizeof(buf), 0, &done), 0);
  EXPECT_EQ(done, 4u);
  model_->clear_faults();
  EXPECT_EQ(model_->read(bad, buf, sizeof(buf), 0, &done), 0);
  model_->release(bad);
  model_->release(good);
}

TEST_F(DurabilityModelTest, ThePowerLossIsAKillSwitchUntilRecover) {
  open_model();
  HandleId h = open_handle("f", O_WRONLY | O_CREAT);
  ASSERT_TRUE(model_->power_loss().is_ok());
  size_t done = 0;
  EXPECT_EQ(model_->write(h, "x", 1, 0, &done), EIO);
  HandleId other = 0;
  EXPECT_EQ(model_->open_file("g", O_WRONLY | O_CREAT, 0644, &other), EIO);
  struct stat st {};
  EXPECT_EQ(model_->stat("", &st), EIO);
  model_->recover();
  EXPECT_EQ(model_->write(h, "x", 1, 0, &done), EIO) << "a handle from before the power loss stays dead";
  EXPECT_EQ(model_->release(h), 0);
  EXPECT_EQ(model_->open_file("g", O_WRONLY | O_CREAT, 0644, &other), 0);
  EXPECT_EQ(model_->release(other), 0);
}

TEST_F(DurabilityModelTest, FallocateThatMovesDataIsRefusedAndAPunchedHoleReverts) {
  write_plain_file(backing("f"), std::string(8192, 'd'));
  open_model();
  HandleId h = open_handle("f", O_RDWR);
  EXPECT_EQ(model_->fallocate(h, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), EOPNOTSUPP);
  ASSERT_EQ(model_->fallocate(h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  ASSERT_EQ(model_->release(h), 0);
  EXPECT_EQ(read_file(backing("f"))->substr(0, 4), std::string(4, '\0'));
  power_loss();
  EXPECT_EQ(read_file(backing("f")), std::string(8192, 'd'));
}

TEST_F(DurabilityModelTest, TheLossesNameTheMissingCall) {
  std::filesystem::create_directories(backing("ckpt"));
  open_model();
  save("ckpt/step_8.pt", std::string(1258291, 's'), /*fsync=*/false);
  save("ckpt/.tmp-step_9", "nine", /*fsync=*/true);
  ASSERT_EQ(model_->rename("ckpt/.tmp-step_9", "ckpt/step_9"), 0);
  auto losses = power_loss();
  std::string all = messages(losses);
  EXPECT_NE(all.find("ckpt/step_8.pt: 1.20 MiB written, never fsynced — lost"), std::string::npos) << all;
  EXPECT_NE(
      all.find("ckpt/step_8.pt: created, but its directory entry never became durable: no fsync of ckpt/"),
      std::string::npos)
      << all;
  EXPECT_NE(all.find("rename ckpt/.tmp-step_9 -> ckpt/step_9 not durable: no fsync of ckpt/"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find(".tmp-step_9: created"), std::string::npos)
      << "the temp name's create is told by its rename, not twice";
  bool fsync_named = false;
  for (const Loss& l : losses) fsync_named |= l.missing_call == "fsync of ckpt/step_8.pt";
  EXPECT_TRUE(fsync_named);

  auto journal = nlohmann::json::parse(model_->journal_json());
  bool write_lost = false;
  for (const auto& e : journal["entries"])
    if (e["op"] == "write" && e["path"] == "ckpt/step_8.pt")
      write_lost = e["lost"].get<bool>() && e["durable_seq"].is_null() && e["bytes"] == 1258291;
  EXPECT_TRUE(write_lost) << journal.dump(1);
}

TEST_F(DurabilityModelTest, TheJournalCoalescesWritesAndRecordsWhenTheyBecameDurable) {
  open_model();
  HandleId h = open_handle("f", O_WRONLY | O_CREAT);
  for (int i = 0; i < 100; ++i) write_at(h, "0123456789", static_cast<uint64_t>(i) * 10);
  ASSERT_EQ(model_->fsync(h, false), 0);
  ASSERT_EQ(model_->release(h), 0);
  auto entries = model_->journal();
  ASSERT_EQ(entries.size(), 3u);  // create, write, fsync
  EXPECT_EQ(entries[1].op, "write");
  EXPECT_EQ(entries[1].bytes, 1000u);
  EXPECT_EQ(entries[1].durable_seq, entries[2].seq);
  EXPECT_EQ(entries[0].durable_seq, 0u) << "the create waits on fsync of the directory";
  ASSERT_EQ(entries[0].waiting_on.size(), 1u);
  EXPECT_EQ(entries[0].waiting_on[0], "fsync of ./");
}

TEST_F(DurabilityModelTest, TheStateDirectoryMustBeOutsideTheBackingDirectory) {
  auto inside = DurabilityModel::open(backing_, backing_ + "/state");
  EXPECT_FALSE(inside.is_ok());
}

TEST_F(DurabilityModelTest, ControlCommands) {
  write_plain_file(backing("f"), "f");
  open_model();
  EXPECT_EQ(execute_control_command(*model_, "ping"), "ok");
  EXPECT_EQ(execute_control_command(*model_, "enospc-after 12"), "ok");
  EXPECT_EQ(execute_control_command(*model_, "enospc-after twelve").rfind("error ", 0), 0u);
  EXPECT_EQ(execute_control_command(*model_, "eio-read f"), "ok");
  EXPECT_EQ(execute_control_command(*model_, "clear"), "ok");
  EXPECT_EQ(execute_control_command(*model_, "crash").rfind("error unknown command", 0), 0u);
  std::string reply = execute_control_command(*model_, "power-loss");
  ASSERT_EQ(reply.rfind("ok ", 0), 0u) << reply;
  EXPECT_TRUE(nlohmann::json::parse(reply.substr(3))["losses"].is_array());
  EXPECT_TRUE(model_->frozen());
  EXPECT_EQ(execute_control_command(*model_, "recover"), "ok");
  EXPECT_FALSE(model_->frozen());
  reply = execute_control_command(*model_, "journal");
  ASSERT_EQ(reply.rfind("ok ", 0), 0u);
  EXPECT_TRUE(nlohmann::json::parse(reply.substr(3))["entries"].is_array());
}

}  // namespace
}  // namespace ckpt::faultfs
