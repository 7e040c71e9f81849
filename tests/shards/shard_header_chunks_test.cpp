// A version-2 manifest's chunks come from its native shard headers (shards/shard_header_chunks.h):
// read back, they must be exactly the records version 1 lists for the same save, in the same order;
// and a header that is not the one the manifest's digest covers, or that cannot be read, or that
// disagrees with the manifest's tensors, must add no chunk and say which shard and why.
#include "shards/shard_header_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "base/file_io.h"
#include "tests/support/training_state_fixture.h"
#include "verifier/tensors/tensor_source.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;
using Problem = ShardHeaderChunks::Problem;

void expect_same_chunks(const Manifest& got, const Manifest& want) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  size_t chunks = 0;
  for (size_t t = 0; t < want.tensors.size(); ++t) {
    const ManifestTensor& a = got.tensors[t];
    const ManifestTensor& b = want.tensors[t];
    EXPECT_EQ(a.name, b.name);
    ASSERT_EQ(a.chunks.size(), b.chunks.size()) << b.name;
    for (size_t c = 0; c < b.chunks.size(); ++c) {
      EXPECT_EQ(a.chunks[c].shard, b.chunks[c].shard) << b.name << " chunk " << c;
      EXPECT_EQ(a.chunks[c].offsets.to_vector(), b.chunks[c].offsets.to_vector()) << b.name << " chunk " << c;
      EXPECT_EQ(a.chunks[c].shape.to_vector(), b.chunks[c].shape.to_vector()) << b.name << " chunk " << c;
      EXPECT_EQ(a.chunks[c].data_offset, b.chunks[c].data_offset) << b.name << " chunk " << c;
      EXPECT_EQ(a.chunks[c].data_bytes, b.chunks[c].data_bytes) << b.name << " chunk " << c;
      EXPECT_EQ(a.chunks[c].sha256, b.chunks[c].sha256) << b.name << " chunk " << c;
      ++chunks;
    }
  }
  EXPECT_GT(chunks, want.tensors.size()) << "the fixture should split some tensors into chunks";
}

class ShardHeaderChunksTest : public ::testing::Test {
 protected:
  // The same state saved both ways: the shards are the same bytes, only the manifests differ.
  void SetUp() override {
    listed_ = save_training_state(root_.path() + "/listed", full_training_state());
    in_headers_ = save_training_state(root_.path() + "/in_headers", full_training_state(), kFixtureStep, 3,
                                      "native", ChunkRecords::kInShardHeaders);
  }

  // The manifest as parsed, before any header is read.
  Manifest parsed_manifest(const std::string& dir) {
    auto text = read_small_file(dir + "/" + kManifestFileName, kMaxManifestBytes);
    EXPECT_TRUE(text.is_ok());
    auto m = parse_manifest(text.is_ok() ? *text : "", "manifest.json");
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    return m.is_ok() ? *m : Manifest{};
  }

  TempDir root_;
  std::string listed_, in_headers_;
};

TEST_F(ShardHeaderChunksTest, GiveTheRecordsVersionOneListsInItsOrder) {
  const Manifest listed = read_fixture_manifest(listed_);
  EXPECT_EQ(listed.chunk_records, ChunkRecords::kInManifest);
  Manifest m = parsed_manifest(in_headers_);
  ASSERT_EQ(m.chunk_records, ChunkRecords::kInShardHeaders);
  for (const ManifestTensor& t : m.tensors) ASSERT_TRUE(t.chunks.empty()) << t.name;
  for (size_t jobs : {size_t{1}, size_t{4}}) {
    Manifest filled = m;
    const auto read = add_chunks_from_shard_headers(in_headers_, filled, jobs);
    ASSERT_EQ(read.size(), filled.shards.size());
    for (const auto& r : read) {
      EXPECT_EQ(r.problem, Problem::kNone) << r.status.to_string();
    }
    EXPECT_TRUE(first_shard_header_problem(read).is_ok());
    expect_same_chunks(filled, listed);
  }
  // read_manifest_file does the same for every reader (load, inspect, diff, the drill).
  expect_same_chunks(read_fixture_manifest(in_headers_), listed);
  for (size_t s = 0; s < listed.shards.size(); ++s) {
    EXPECT_EQ(read_file_bytes(fixture_shard_path(listed_, s)),
              read_file_bytes(fixture_shard_path(in_headers_, s)));
  }
  // A version-1 manifest is left as it is.
  Manifest v1 = listed;
  const auto untouched = add_chunks_from_shard_headers(listed_, v1);
  EXPECT_EQ(untouched.size(), v1.shards.size());
  expect_same_chunks(v1, listed);
}

// inspect, diff and the drill read through TensorSource, which opens a version-2 checkpoint's
// shards from the records read off their headers (not reading them twice): the same tensors, the
// same chunks in the same places, the same bytes as version 1 of the same save.
TEST_F(ShardHeaderChunksTest, ReadThroughATensorSourceAsVersionOneIs) {
  auto listed = TensorSource::open(listed_);
  auto in_headers = TensorSource::open(in_headers_);
  ASSERT_TRUE(listed.is_ok()) << listed.status().to_string();
  ASSERT_TRUE(in_headers.is_ok()) << in_headers.status().to_string();
  ASSERT_EQ(listed->tensors().size(), in_headers->tensors().size());
  for (const SourceTensor& want : listed->tensors()) {
    const SourceTensor* got = in_headers->find(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    ASSERT_EQ(got->chunks.size(), want.chunks.size()) << want.name;
    for (size_t c = 0; c < want.chunks.size(); ++c) {
      const ChunkPlace a = in_headers->place(got->chunks[c]), b = listed->place(want.chunks[c]);
      EXPECT_EQ(a.data_offset, b.data_offset) << want.name << " chunk " << c;
      EXPECT_EQ(a.offsets.to_vector(), b.offsets.to_vector()) << want.name << " chunk " << c;
    }
    auto a = in_headers->read_tensor(*got);
    auto b = listed->read_tensor(want);
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << want.name;
    EXPECT_EQ(a->bytes, b->bytes) << want.name;
  }
  for (size_t f = 0; f < listed->files().size(); ++f)
    EXPECT_EQ(in_headers->files()[f]->metadata(), listed->files()[f]->metadata());
}

// A shard from another save is a well-formed shard whose header is not the committed one: its
// records are not taken, and the error names the file and both digests.
TEST_F(ShardHeaderChunksTest, ReferToAHeaderOtherThanTheCommittedOneByName) {
  auto state = full_training_state();
  state[0].bytes[0] ^= 0x01;  // another value: another payload digest in the header
  const std::string other = save_training_state(root_.path() + "/other", state, kFixtureStep, 3, "native",
                                                ChunkRecords::kInShardHeaders);
  const Manifest m0 = read_fixture_manifest(in_headers_);
  size_t shard = SIZE_MAX;
  for (const auto& c : m0.find_tensor(state[0].name)->chunks) shard = std::min(shard, c.shard);
  ASSERT_NE(shard, SIZE_MAX);
  fs::copy_file(fixture_shard_path(other, shard), fixture_shard_path(in_headers_, shard),
                fs::copy_options::overwrite_existing);
  Manifest m = parsed_manifest(in_headers_);
  const auto read = add_chunks_from_shard_headers(in_headers_, m);
  for (size_t s = 0; s < read.size(); ++s) {
    if (s != shard) {
      EXPECT_EQ(read[s].problem, Problem::kNone) << s;
      continue;
    }
    EXPECT_EQ(read[s].problem, Problem::kDigestMismatch);
    const std::string& message = read[s].status.message();
    EXPECT_NE(message.find(m.shards[s].path + ": header sha256 mismatch: the manifest records " +
                           m.shards[s].sha256 + ", the header hashes to "),
              std::string::npos)
        << message;
  }
  for (const auto& t : m.tensors) {
    for (const auto& c : t.chunks) EXPECT_NE(c.shard, shard) << t.name;
  }
  const auto refused = read_manifest_file(in_headers_);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().message(), read[shard].status.message());
}

// Missing, torn and garbled shards, a tensor the manifest does not list, and a tensor whose dtype
// the manifest states otherwise: each is named, and only that shard adds nothing.
TEST_F(ShardHeaderChunksTest, SayWhatKeptEachShardsRecordsOut) {
  const std::string path0 = fixture_shard_path(in_headers_, 0);
  const std::string path1 = fixture_shard_path(in_headers_, 1);
  {
    fs::remove(path0);
    auto bytes = read_file_bytes(path1);
    bytes.resize(40);  // inside the preamble
    write_file_bytes(path1, bytes);
    Manifest m = parsed_manifest(in_headers_);
    const auto read = add_chunks_from_shard_headers(in_headers_, m);
    EXPECT_EQ(read[0].problem, Problem::kPath);
    EXPECT_EQ(read[0].status.code(), StatusCode::kNotFound);
    EXPECT_EQ(read[1].problem, Problem::kTruncated) << read[1].status.to_string();
    EXPECT_EQ(read[2].problem, Problem::kNone);
    EXPECT_NE(read[1].status.message().find(path1), std::string::npos) << read[1].status.message();
  }
  const std::string dir = save_training_state(root_.path() + "/again", full_training_state(),
                                              kFixtureStep + 1, 3, "native", ChunkRecords::kInShardHeaders);
  {
    const std::string path = fixture_shard_path(dir, 2);
    auto bytes = read_file_bytes(path);
    bytes[70] ^= 0x01;  // a header byte: its own digest no longer matches
    write_file_bytes(path, bytes);
    Manifest m = parsed_manifest(dir);
    const auto read = add_chunks_from_shard_headers(dir, m);
    EXPECT_EQ(read[2].problem, Problem::kUnreadable);
    EXPECT_NE(read[2].status.message().find("header sha256 mismatch"), std::string::npos)
        << read[2].status.message();
  }
  const std::string edited =
      save_training_state(root_.path() + "/edited", full_training_state(), kFixtureStep + 2, 3, "native",
                          ChunkRecords::kInShardHeaders);
  Manifest m = parsed_manifest(edited);
  ASSERT_GE(m.tensors.size(), 2u);
  const std::string dropped = m.tensors.front().name;
  m.tensors.erase(m.tensors.begin());
  m.tensors.front().dtype = m.tensors.front().dtype == DType::kF32 ? DType::kF64 : DType::kF32;
  const std::string retyped = m.tensors.front().name;
  const auto read = add_chunks_from_shard_headers(edited, m);
  // Each shard names its first disagreement: a chunk of the tensor the manifest no longer lists
  // (the header's first entries are the first tensor's), else one of the retyped tensor.
  size_t unlisted = 0, retyped_seen = 0;
  for (const auto& r : read) {
    if (r.problem == Problem::kNone) continue;
    EXPECT_EQ(r.problem, Problem::kDisagrees) << r.status.to_string();
    const std::string& message = r.status.message();
    if (message.find(" of a tensor the manifest does not list") != std::string::npos) {
      EXPECT_NE(message.find("header holds chunk " + dropped), std::string::npos) << message;
      ++unlisted;
    } else {
      EXPECT_NE(message.find(retyped), std::string::npos) << message;
      EXPECT_NE(message.find("the manifest's tensor is"), std::string::npos) << message;
      ++retyped_seen;
    }
  }
  EXPECT_GT(unlisted, 0u);
  EXPECT_GT(unlisted + retyped_seen, 1u);
  for (const auto& t : m.tensors) {
    for (const auto& c : t.chunks) EXPECT_EQ(read[c.shard].problem, Problem::kNone) << t.name;
  }
}

// The committed fixture of each manifest version (tests/data/native, written by `ckptcheck train`
// and `convert --manifest-version 2`) reads back with every chunk: what every build wrote before
// version 2, and version 2 itself, stay readable.
TEST(ManifestVersions, EachCommittedVersionReadsWithItsChunks) {
  const std::string data = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/native/";
  const Manifest v1 = read_fixture_manifest(data + "manifest_v1");
  const Manifest v2 = read_fixture_manifest(data + "manifest_v2");
  EXPECT_EQ(v1.chunk_records, ChunkRecords::kInManifest);
  EXPECT_EQ(v2.chunk_records, ChunkRecords::kInShardHeaders);
  // The same tensors (convert lists them in its own order), each with its chunks.
  auto names = [](const Manifest& m) {
    std::vector<std::string> out;
    for (const auto& t : m.tensors) {
      EXPECT_FALSE(t.chunks.empty()) << t.name;
      out.push_back(t.name);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(names(v1), names(v2));
  EXPECT_GT(v1.tensors.size(), 100u);
  EXPECT_EQ(v1.step, v2.step);
  EXPECT_EQ(v1.config, v2.config);
}

}  // namespace
}  // namespace ckpt
