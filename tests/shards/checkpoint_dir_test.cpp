#include "shards/checkpoint_dir.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file_io.h"
#include "shards/manifest.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::TempDir;

void commit_step(const std::string& root, int64_t step) {
  auto tx = CheckpointTransaction::begin(root, step);
  ASSERT_TRUE(tx.is_ok()) << tx.status().to_string();
  ASSERT_TRUE(tx->commit("{}").is_ok());
}

TEST(CheckpointDir, NamesAndParsesStepDirs) {
  EXPECT_EQ(step_dir_name(42), "step_00000042");
  EXPECT_EQ(step_from_dir_name("step_00000042"), 42);
  EXPECT_EQ(step_from_dir_name("step_0000004x"), -1);
  EXPECT_EQ(step_from_dir_name("latest"), -1);
}

TEST(CheckpointDir, LatestFollowsCommitsAndOnlyMovesForward) {
  TempDir root;
  commit_step(root.path(), 4);
  EXPECT_EQ(*resolve_latest_checkpoint(root.path()), root / "step_00000004");
  commit_step(root.path(), 8);
  commit_step(root.path(), 6);
  EXPECT_EQ(*resolve_latest_checkpoint(root.path()), root / "step_00000008");
  EXPECT_EQ(list_checkpoints(root.path()).latest_pointer, "step_00000008");
}

TEST(CheckpointDir, ADirectoryWithoutManifestIsNeverLatest) {
  TempDir root;
  commit_step(root.path(), 4);
  // A later save that died before its manifest: the temp dir, and a step dir someone made by hand.
  auto torn = CheckpointTransaction::begin(root.path(), 8);
  ASSERT_TRUE(torn.is_ok());
  ASSERT_TRUE(make_directory(root / "step_00000009").is_ok());
  ASSERT_TRUE(write_file_atomically(root / "latest", "step_00000009\n").is_ok());
  EXPECT_EQ(*resolve_latest_checkpoint(root.path()), root / "step_00000004");
  const auto listing = list_checkpoints(root.path());
  EXPECT_EQ(listing.committed.size(), 1u);
  EXPECT_EQ(listing.uncommitted.size(), 2u);
  auto explicit_path = resolve_checkpoint_path(root / "step_00000009");
  EXPECT_EQ(explicit_path.status().code(), StatusCode::kCorruption);
}

TEST(CheckpointDir, EmptyRootHasNoLatest) {
  TempDir root;
  EXPECT_EQ(resolve_latest_checkpoint(root.path()).status().code(), StatusCode::kNotFound);
}

TEST(Manifest, RejectsPathsThatLeaveTheDirectory) {
  EXPECT_TRUE(is_safe_relative_path("shard-00000-of-00002.cks"));
  EXPECT_TRUE(is_safe_relative_path("rank0/shard.cks"));
  for (const char* bad : {"/etc/passwd", "../x", "a/../../x", "a//b", "./a", "", "a\\b"}) {
    EXPECT_FALSE(is_safe_relative_path(bad)) << bad;
  }
}

TEST(Manifest, RoundTripsAndRejectsDuplicates) {
  Manifest m;
  m.step = 3;
  m.shards.push_back({"s0.cks", "native", 10, std::string(64, 'a'), 0, "file"});
  m.tensors.push_back(
      {"model.w", "model", DType::kF32, {2}, {{0, {0}, {2}, 64, 8, *digest_from_hex(std::string(64, 'b'))}}});
  auto parsed = parse_manifest(manifest_to_json_text(m), "manifest.json");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->tensors[0].chunks[0].data_offset, 64u);
  m.tensors.push_back(m.tensors[0]);
  auto dup = parse_manifest(manifest_to_json_text(m), "manifest.json");
  EXPECT_NE(dup.status().message().find("listed twice"), std::string::npos);
}

// A chunk's digest is held as its 32 bytes, so the manifest may spell it one way only: the way its
// writer does. Any other spelling is refused when the manifest is read, naming the chunk and what
// it found, not taken for other bytes.
TEST(Manifest, AChunkDigestOtherThan64LowercaseHexDigitsIsRefused) {
  Manifest m;
  m.shards.push_back({"s0.cks", "native", 10, std::string(64, 'a'), 0, "file"});
  m.tensors.push_back(
      {"model.w", "model", DType::kF32, {2}, {{0, {0}, {2}, 64, 8, *digest_from_hex(std::string(64, 'b'))}}});
  const std::string text = manifest_to_json_text(m);
  ASSERT_TRUE(parse_manifest(text, "manifest.json").is_ok());
  const std::string hex = std::string(64, 'b');
  ASSERT_NE(text.find(hex), std::string::npos);
  for (const std::string& other : {std::string(64, 'B'), std::string(63, 'b'), std::string(65, 'b'),
                                   std::string(63, 'b') + "g", std::string()}) {
    std::string edited = text;
    edited.replace(edited.find(hex), hex.size(), other);
    const auto parsed = parse_manifest(edited, "manifest.json");
    ASSERT_FALSE(parsed.is_ok()) << other;
    EXPECT_EQ(parsed.status().code(), StatusCode::kCorruption) << other;
    EXPECT_EQ(parsed.status().message(), "manifest.json tensor 0 (model.w) chunk 0: sha256 '" + other +
                                             "' is not 64 lowercase hex digits")
        << other;
  }
  // What was found is shown, up to a line's worth of it.
  std::string edited = text;
  edited.replace(edited.find(hex), hex.size(), std::string(100000, 'b'));
  EXPECT_EQ(parse_manifest(edited, "manifest.json").status().message(),
            "manifest.json tensor 0 (model.w) chunk 0: sha256 '" + std::string(64, 'b') +
                "...' (100000 characters) is not 64 lowercase hex digits");
}

TEST(Manifest, RejectsOutOfRangeShardIndexAndUnsafePath) {
  Manifest m;
  m.shards.push_back({"s0.cks", "native", 10, std::string(64, 'a'), 0, "file"});
  m.tensors.push_back(
      {"model.w", "model", DType::kF32, {2}, {{3, {0}, {2}, 64, 8, *digest_from_hex(std::string(64, 'b'))}}});
  EXPECT_NE(parse_manifest(manifest_to_json_text(m), "m").status().message().find("shard index 3"),
            std::string::npos);
  m.tensors.clear();
  m.shards[0].path = "../../etc/passwd";
  EXPECT_NE(parse_manifest(manifest_to_json_text(m), "m").status().message().find("leaves the checkpoint"),
            std::string::npos);
}

TEST(RootWriterLock, SecondWriterIsRefusedNamingTheHolder) {
  TempDir root;
  auto first = RootWriterLock::acquire(root.path());
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  auto second = RootWriterLock::acquire(root.path());
  ASSERT_FALSE(second.is_ok());
  EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(second.status().message().find("pid " + std::to_string(::getpid())), std::string::npos)
      << second.status().to_string();
}

TEST(RootWriterLock, ReleasedByTheDestructor) {
  TempDir root;
  {
    auto held = RootWriterLock::acquire(root.path());
    ASSERT_TRUE(held.is_ok());
  }
  EXPECT_TRUE(RootWriterLock::acquire(root.path()).is_ok());
}

// A holder that is SIGKILLed leaves the lock file behind but not the lock.
TEST(RootWriterLock, LockOfAKilledProcessDoesNotBlock) {
  TempDir root;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto held = RootWriterLock::acquire(root.path());
    const char ok = held.is_ok() ? 'y' : 'n';
    if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  auto blocked = RootWriterLock::acquire(root.path());
  EXPECT_FALSE(blocked.is_ok());
  if (!blocked.is_ok()) {
    EXPECT_NE(blocked.status().message().find("pid " + std::to_string(child)), std::string::npos)
        << blocked.status().to_string();
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_TRUE(path_exists(root / kWriterLockFileName));
  auto after = RootWriterLock::acquire(root.path());
  EXPECT_TRUE(after.is_ok()) << after.status().to_string();
}

}  // namespace
}  // namespace ckpt
