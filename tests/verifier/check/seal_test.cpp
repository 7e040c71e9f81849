// Seals of checkpoints this tool did not write: torch.save files written by Debian's PyTorch
// (tests/data/pytorch, scripts/make_pytorch_fixtures.py), damaged after sealing.
#include "verifier/check/seal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/file_io.h"
#include "base/hashing_file_tail.h"
#include "base/sha256.h"
#include "formats/tensor_file_open.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/verify_issues_text.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/signature.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

const std::string kPytorchDir = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pytorch/";

void copy_file(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(std::filesystem::path(to).parent_path());
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

void flip_byte(const std::string& path, uint64_t offset) {
  auto bytes = read_file_bytes(path);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] ^= 0x40;
  write_file_bytes(path, bytes);
}

// The fixtures are weights and optimizer state without a scheduler or RNG state: the seal's checks
// are under test here, so the kind's resume-state checks are told the checkpoint is weights only.
VerifyReport verify_weights_only(const std::string& path, const std::string& pubkey = "") {
  VerifyOptions options;
  options.pubkey_path = pubkey;
  options.weights_only = true;
  auto r = verify_path(path, options);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : VerifyReport{};
}

// A Hugging Face Trainer-shaped folder: PyTorch-written tensor files beside plain JSON.
class SealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = dir_root_ / "checkpoint-40";
    copy_file(kPytorchDir + "model_state.pt", dir_ + "/pytorch_model.bin");
    copy_file(kPytorchDir + "adamw_state.pt", dir_ + "/optimizer.pt");
    std::filesystem::create_directories(dir_ + "/extra");
    write_file_bytes(dir_ + "/extra/trainer_state.json", {'{', '"', 's', '"', ':', '4', '0', '}'});
  }
  SealSummary seal(const std::string& path, SealOptions options = {}) {
    auto s = seal_checkpoint(path, options);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    return s.is_ok() ? *s : SealSummary{};
  }
  // The first tensor of a sealed file, as the reader sees it.
  ChunkInfo first_tensor(const std::string& path) {
    auto f = open_tensor_file(path);
    EXPECT_TRUE(f.is_ok()) << f.status().to_string();
    EXPECT_FALSE((*f)->chunks().empty());
    return (*f)->chunks().front();
  }
  TempDir dir_root_;
  std::string dir_;
};

TEST_F(SealTest, SealsEveryFileAndEveryTensorAndVerifiesClean) {
  const SealSummary s = seal(dir_);
  EXPECT_EQ(s.seal_path, dir_ + "/" + kSealFileName);
  EXPECT_EQ(s.files, 3u);
  EXPECT_GT(s.tensors, 2u);
  auto text = read_small_file(s.seal_path, 1 << 20);
  ASSERT_TRUE(text.is_ok());
  auto parsed = parse_seal(*text, s.seal_path);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  ASSERT_EQ(parsed->files.size(), 3u);
  EXPECT_EQ(parsed->files[0].path, "extra/trainer_state.json");
  EXPECT_TRUE(parsed->files[0].tensors.empty());
  EXPECT_EQ(parsed->files[1].path, "optimizer.pt");
  EXPECT_EQ(parsed->files[1].format, "pytorch");
  // The file hash is the plain SHA-256 of the file, as sha256sum prints it.
  auto digest = sha256_hex_of_file(dir_ + "/optimizer.pt");
  ASSERT_TRUE(digest.is_ok());
  EXPECT_EQ(parsed->files[1].sha256, *digest);

  const VerifyReport r = verify_weights_only(dir_);
  EXPECT_TRUE(r.ok()) << issues_text(r.errors);
  EXPECT_TRUE(r.warnings.empty()) << issues_text(r.warnings);
  EXPECT_EQ(r.shards, 3u);
  EXPECT_EQ(r.tensors, s.tensors);
}

TEST_F(SealTest, FlippedTensorByteNamesFileTensorAndRange) {
  seal(dir_);
  const std::string file = dir_ + "/pytorch_model.bin";
  const ChunkInfo t = first_tensor(file);
  flip_byte(file, t.data_offset + 1);
  const VerifyReport r = verify_weights_only(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.has_error(verify_code::kSealFileSha256Mismatch)) << issues_text(r.errors);
  ASSERT_TRUE(r.has_error(verify_code::kSealTensorSha256Mismatch)) << issues_text(r.errors);
  size_t tensor_errors = 0;
  for (const auto& e : r.errors) {
    if (e.code != verify_code::kSealTensorSha256Mismatch) continue;
    ++tensor_errors;
    EXPECT_EQ(e.shard, "pytorch_model.bin");
    EXPECT_EQ(e.tensor, t.name);
    EXPECT_NE(e.message.find(file + " @" + std::to_string(t.data_offset) + ".."), std::string::npos)
        << e.message;
  }
  EXPECT_EQ(tensor_errors, 1u) << issues_text(r.errors);
}

TEST_F(SealTest, LargeFilesAreSealedByPiecesAndAFlipNamesThePieceAndTensor) {
  // Pieces of 1 KiB so the fixture files (a few KiB) have several; the real size is 64 MiB.
  SealOptions options;
  options.piece_bytes = 1024;
  const SealSummary s = seal(dir_, options);
  auto text = read_small_file(s.seal_path, 1 << 20);
  ASSERT_TRUE(text.is_ok());
  auto parsed = parse_seal(*text, s.seal_path);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  const SealedFile& model = parsed->files[2];
  ASSERT_EQ(model.path, "pytorch_model.bin");
  ASSERT_GT(model.bytes, 2048u);
  EXPECT_EQ(model.piece_bytes, 1024u);
  EXPECT_EQ(model.pieces.size(), (model.bytes + 1023) / 1024);
  // Each piece digest is the SHA-256 of its bytes; the whole digest is still sha256sum's.
  const auto bytes = read_file_bytes(dir_ + "/pytorch_model.bin");
  EXPECT_EQ(model.pieces[1], sha256_hex(bytes.data() + 1024, 1024));
  EXPECT_EQ(model.sha256, sha256_hex(bytes.data(), bytes.size()));
  EXPECT_TRUE(parsed->files[0].pieces.empty());  // trainer_state.json: smaller than a piece
  EXPECT_TRUE(verify_weights_only(dir_).ok());

  const ChunkInfo t = first_tensor(dir_ + "/pytorch_model.bin");
  flip_byte(dir_ + "/pytorch_model.bin", t.data_offset + 1);
  const VerifyReport r = verify_weights_only(dir_);
  ASSERT_FALSE(r.ok());
  ASSERT_TRUE(r.has_error(verify_code::kSealTensorSha256Mismatch)) << issues_text(r.errors);
  const uint64_t piece = (t.data_offset + 1) / 1024;
  const std::string range = std::to_string(piece * 1024) + ".." +
                            std::to_string(std::min<uint64_t>((piece + 1) * 1024, model.bytes));
  bool named = false;
  for (const auto& e : r.errors)
    named = named || (e.code == verify_code::kSealFileSha256Mismatch &&
                      e.message.find("1 of " + std::to_string(model.pieces.size()) +
                                     " sealed pieces differ (bytes " + range + ")") != std::string::npos);
  EXPECT_TRUE(named) << issues_text(r.errors);
}

TEST_F(SealTest, APieceListThatDoesNotFitTheFileIsRefused) {
  SealOptions options;
  options.piece_bytes = 1024;
  const SealSummary s = seal(dir_, options);
  auto text = read_small_file(s.seal_path, 1 << 20);
  ASSERT_TRUE(text.is_ok());
  nlohmann::json j = nlohmann::json::parse(*text);
  j["files"][2]["pieces"].erase(j["files"][2]["pieces"].size() - 1);
  auto parsed = parse_seal(j.dump(), "seal.json");
  ASSERT_FALSE(parsed.is_ok());
  EXPECT_NE(parsed.status().message().find("seal.json: files[2]: pieces: expected"), std::string::npos)
      << parsed.status().message();
}

TEST_F(SealTest, ChangeOutsideEveryTensorIsSaidSo) {
  seal(dir_);
  // The zip's first local header name byte: not in any tensor payload.
  flip_byte(dir_ + "/optimizer.pt", 31);
  const VerifyReport r = verify_weights_only(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.has_error(verify_code::kSealTensorSha256Mismatch)) << issues_text(r.errors);
  bool outside = false;
  for (const auto& e : r.errors)
    outside = outside || e.message.find("outside their payloads") != std::string::npos;
  EXPECT_TRUE(outside) << issues_text(r.errors);
}

TEST_F(SealTest, TruncatedMissingAndAddedFilesAreNamed) {
  seal(dir_);
  const std::string model = dir_ + "/pytorch_model.bin";
  std::filesystem::resize_file(model, std::filesystem::file_size(model) - 100);
  std::filesystem::remove(dir_ + "/extra/trainer_state.json");
  write_file_bytes(dir_ + "/rng_state.pth", {1, 2, 3});
  const VerifyReport r = verify_weights_only(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.has_error(verify_code::kSealFileSizeMismatch)) << issues_text(r.errors);
  EXPECT_TRUE(r.has_error(verify_code::kSealFileMissing)) << issues_text(r.errors);
  EXPECT_TRUE(r.has_warning(verify_code::kSealUnlistedFile)) << issues_text(r.warnings);
  for (const auto& e : r.errors) {
    if (e.code == verify_code::kSealFileSizeMismatch) {
      EXPECT_NE(e.message.find("(truncated)"), std::string::npos);
    }
    if (e.code == verify_code::kSealFileMissing) {
      EXPECT_EQ(e.shard, "extra/trainer_state.json");
    }
  }
}

TEST_F(SealTest, EditedSealFailsItsDigest) {
  const SealSummary s = seal(dir_);
  auto text = read_small_file(s.seal_path, 1 << 20);
  ASSERT_TRUE(text.is_ok());
  // Someone "fixes" a hash in the seal to match a damaged file: the seal's own digest catches it.
  std::string edited = *text;
  const size_t at = edited.find("\"sha256\": \"");
  ASSERT_NE(at, std::string::npos);
  char& c = edited[at + 11];
  c = c == 'a' ? 'b' : 'a';
  ASSERT_TRUE(write_file_atomically(s.seal_path, edited).is_ok());
  const VerifyReport r = verify_weights_only(dir_);
  EXPECT_TRUE(r.has_error(verify_code::kSealDigestMismatch)) << issues_text(r.errors);
}

TEST_F(SealTest, ExistingSealIsNeverReplaced) {
  const SealSummary s = seal(dir_);
  auto before = read_small_file(s.seal_path, 1 << 20);
  auto again = seal_checkpoint(dir_, {});
  ASSERT_FALSE(again.is_ok());
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("never replaced"), std::string::npos);
  EXPECT_EQ(*read_small_file(s.seal_path, 1 << 20), *before);
}

TEST_F(SealTest, SingleFileSealLivesBesideIt) {
  const std::string file = dir_ + "/optimizer.pt";
  const SealSummary s = seal(file);
  EXPECT_EQ(s.seal_path, file + kSealFileSuffix);
  EXPECT_EQ(s.files, 1u);
  EXPECT_TRUE(verify_weights_only(file).ok());
  const ChunkInfo t = first_tensor(file);
  flip_byte(file, t.data_offset + t.data_bytes - 1);
  const VerifyReport r = verify_weights_only(file);
  EXPECT_TRUE(r.has_error(verify_code::kSealTensorSha256Mismatch)) << issues_text(r.errors);
}

TEST_F(SealTest, SymlinkLeavingTheDirectoryIsRefused) {
  write_file_bytes(dir_root_ / "outside.bin", {1, 2, 3, 4});
  std::filesystem::create_symlink(dir_root_ / "outside.bin", dir_ + "/escape.bin");
  auto s = seal_checkpoint(dir_, {});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("outside the checkpoint directory"), std::string::npos)
      << s.status().to_string();
  EXPECT_FALSE(path_exists(dir_ + "/" + kSealFileName));
}

TEST_F(SealTest, SignedSealVerifiesAndAForgedOneFails) {
  TempDir keys;
  ASSERT_TRUE(write_ed25519_key_pair(keys / "private.pem", keys / "public.pem").is_ok());
  const SealSummary s = seal(dir_);
  ASSERT_TRUE(sign_file(s.seal_path, keys / "private.pem").is_ok());
  EXPECT_TRUE(verify_weights_only(dir_, keys / "public.pem").ok());
  // Rewriting data and seal together passes the digest, but not the signature.
  std::filesystem::remove(s.seal_path);
  write_file_bytes(dir_ + "/extra/trainer_state.json", {'{', '}'});
  seal(dir_);
  const VerifyReport r = verify_weights_only(dir_, keys / "public.pem");
  EXPECT_TRUE(r.has_error(verify_code::kSignatureInvalid)) << issues_text(r.errors);
}

TEST_F(SealTest, IntegrityJsonIsWrittenInMegatronsShapeAndChecked) {
  SealOptions options;
  options.write_integrity = true;
  const SealSummary s = seal(dir_, options);
  ASSERT_EQ(s.integrity_path, dir_ + "/" + kIntegrityFileName);
  auto text = read_small_file(s.integrity_path, 1 << 20);
  ASSERT_TRUE(text.is_ok());
  const auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j["algorithm"], "sha256");
  EXPECT_EQ(j["files"]["optimizer.pt"], *sha256_hex_of_file(dir_ + "/optimizer.pt"));
  EXPECT_EQ(j["files"].size(), 3u);
  // Only integrity.json (as Megatron-Core writes it), no seal: still checked.
  std::filesystem::remove(s.seal_path);
  EXPECT_TRUE(verify_weights_only(dir_).ok());
  flip_byte(dir_ + "/extra/trainer_state.json", 2);
  const VerifyReport r = verify_weights_only(dir_);
  ASSERT_TRUE(r.has_error(verify_code::kIntegritySha256Mismatch)) << issues_text(r.errors);
  EXPECT_EQ(r.errors[0].shard, "extra/trainer_state.json");
}

// ckptcheck.torch.save's path: the seal takes the digests the tail took as the file was written,
// and gives the same seal as reading the file back, but only for the very file hashed: once the
// file is changed after the tail finished, the seal hashes what is there now.
TEST(SealOfWrittenFiles, DigestsTakenAsTheFileWasWrittenGiveTheReadBackSealAndNeverAStaleOne) {
  TempDir root;
  const auto bytes = read_file_bytes(kPytorchDir + "adamw_state.pt");
  auto write = [&](const std::string& path) {
    auto tail = HashingFileTail::create_exclusive(path, 1024);  // several pieces
    EXPECT_TRUE(tail.is_ok());
    write_file_bytes(path, bytes);  // by name, as torch.save writes
    std::vector<WrittenRange> ranges;
    auto listed = open_tensor_file(path);
    EXPECT_TRUE(listed.is_ok());
    for (const ChunkInfo& c : (*listed)->chunks()) ranges.push_back({c.data_offset, c.data_bytes, ""});
    auto digests = (*tail)->finish(ranges);
    EXPECT_TRUE(digests.is_ok()) << digests.status().to_string();
    return *digests;
  };
  SealOptions by_pieces;
  by_pieces.piece_bytes = 1024;
  std::filesystem::create_directories(root / "read-back");
  copy_file(kPytorchDir + "adamw_state.pt", root / "read-back/adamw_state.pt");
  ASSERT_TRUE(seal_checkpoint(root / "read-back/adamw_state.pt", by_pieces).is_ok());
  const auto read_back = read_file_bytes(root / "read-back/adamw_state.pt.ckptcheck.seal.json");

  std::filesystem::create_directories(root / "written");
  SealOptions with_digests = by_pieces;
  with_digests.written = {write(root / "written/adamw_state.pt")};
  with_digests.written[0].pieces.assign(with_digests.written[0].pieces.size(), std::string(64, '0'));
  with_digests.written[0].sha256 = std::string(64, '1');  // so a seal that used them shows it
  ASSERT_TRUE(seal_checkpoint(root / "written/adamw_state.pt", with_digests).is_ok());
  EXPECT_NE(read_file_bytes(root / "written/adamw_state.pt.ckptcheck.seal.json"), read_back);

  // The same file, changed after the writer finished (same size, a later modification time).
  std::filesystem::create_directories(root / "changed");
  SealOptions stale = by_pieces;
  stale.written = {write(root / "changed/adamw_state.pt")};
  flip_byte(root / "changed/adamw_state.pt", bytes.size() / 2);
  flip_byte(root / "changed/adamw_state.pt", bytes.size() / 2);  // back: the bytes equal the written ones
  std::filesystem::last_write_time(
      root / "changed/adamw_state.pt",
      std::filesystem::last_write_time(root / "changed/adamw_state.pt") + std::chrono::seconds(1));
  stale.written[0].sha256 = std::string(64, '1');
  ASSERT_TRUE(seal_checkpoint(root / "changed/adamw_state.pt", stale).is_ok());
  EXPECT_EQ(read_file_bytes(root / "changed/adamw_state.pt.ckptcheck.seal.json"), read_back);

  // Untouched, with true digests: byte for byte the read-back seal.
  std::filesystem::create_directories(root / "true");
  SealOptions true_digests = by_pieces;
  true_digests.written = {write(root / "true/adamw_state.pt")};
  ASSERT_TRUE(seal_checkpoint(root / "true/adamw_state.pt", true_digests).is_ok());
  EXPECT_EQ(read_file_bytes(root / "true/adamw_state.pt.ckptcheck.seal.json"), read_back);
}

TEST(SealDcp, EachStorageItemOfADcpCheckpointIsSealedAndAFlipIsNamedByItem) {
  // Written by Debian's PyTorch 1.13 save_state_dict (scripts/make_pytorch_fixtures.py).
  TempDir root;
  const std::string dir = root / "dcp";
  std::filesystem::copy(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/torch113", dir);
  auto s = seal_checkpoint(dir, {});
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_TRUE(s->unread.empty()) << s->unread.front();  // .metadata is DCP's own, not an unread file
  auto text = read_small_file(s->seal_path, 1 << 20);
  ASSERT_TRUE(text.is_ok());
  auto seal = parse_seal(*text, s->seal_path);
  ASSERT_TRUE(seal.is_ok()) << seal.status().to_string();
  const SealedTensor* weight = nullptr;
  std::string weight_file;
  for (const auto& f : seal->files) {
    if (f.path == ".metadata") continue;
    EXPECT_EQ(f.format, "dcp") << f.path;
    EXPECT_FALSE(f.tensors.empty()) << f.path;
    for (const auto& t : f.tensors) {
      if (t.name.rfind("model.weight at ", 0) == 0) {
        weight = &t;
        weight_file = f.path;
      }
    }
  }
  ASSERT_NE(weight, nullptr) << *text;
  EXPECT_EQ(weight->dtype, "F32");
  EXPECT_TRUE(verify_weights_only(dir).ok());
  flip_byte(dir + "/" + weight_file, weight->offset + weight->bytes / 2);
  const VerifyReport r = verify_weights_only(dir);
  bool named = false;
  for (const auto& e : r.errors)
    named = named || (e.code == verify_code::kSealTensorSha256Mismatch && e.tensor == weight->name);
  EXPECT_TRUE(named) << issues_text(r.errors);
}

TEST(Seal, HostileSealTextIsRefusedNotFollowed) {
  const std::string base = R"({"format": "ckptcheck.seal", "version": 1, "algorithm": "sha256", "files": )";
  const std::string sha(64, 'a');
  EXPECT_FALSE(parse_seal(base + R"([{"path": "../etc/passwd", "bytes": 1, "sha256": ")" + sha +
                              R"(", "tensors": []}]})",
                          "s")
                   .is_ok());
  EXPECT_FALSE(
      parse_seal(base + R"([{"path": "a", "bytes": 1, "sha256": "xyz", "tensors": []}]})", "s").is_ok());
  auto outside = parse_seal(
      base + R"([{"path": "a", "bytes": 10, "sha256": ")" + sha +
          R"(", "tensors": [{"name": "w", "dtype": "F32", "shape": [4], "offset": 8, "bytes": 16, "sha256": ")" +
          sha + R"("}]}]})",
      "s");
  ASSERT_FALSE(outside.is_ok());
  EXPECT_NE(outside.status().message().find("outside its 10-byte file"), std::string::npos)
      << outside.status().to_string();
  EXPECT_FALSE(parse_seal(base + R"([{"path": "a", "bytes": 1, "sha256": ")" + sha +
                              R"(", "tensors": []}, {"path": "a", "bytes": 1, "sha256": ")" + sha +
                              R"(", "tensors": []}]})",
                          "s")
                   .is_ok());
}

}  // namespace
}  // namespace ckpt
