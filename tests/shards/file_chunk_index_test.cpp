// FileChunkIndex answers what the scan of find_file_chunk answers (the first chunk in file order),
// on chunk lists in and out of name order, with repeated names, offsets and whole chunks.
#include "shards/file_chunk_index.h"

#include <gtest/gtest.h>

#include <random>

#include "shards/checkpoint_reader.h"

namespace ckpt {
namespace {

ChunkInfo chunk(const std::string& name, std::vector<int64_t> offsets, std::vector<int64_t> shape) {
  ChunkInfo c;
  c.name = name;
  c.offsets = std::move(offsets);
  c.shape = std::move(shape);
  return c;
}

class ListFile : public TensorFile {
 public:
  explicit ListFile(std::vector<ChunkInfo> chunks) : chunks_(std::move(chunks)) {}
  const std::string& path() const override { return path_; }
  const char* format_name() const override { return "list"; }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  Status read_chunk(size_t, uint64_t, void*, size_t) const override { return Status::ok(); }

 private:
  std::string path_ = "list";
  std::vector<ChunkInfo> chunks_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

TEST(FileChunkIndex, FindsTheFirstChunkAScanFinds) {
  std::mt19937 rng(44);
  for (int round = 0; round < 20; ++round) {
    std::vector<ChunkInfo> chunks;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      chunks.push_back(chunk("t" + std::to_string(rng() % 7), {static_cast<int64_t>(rng() % 3), 0},
                             {static_cast<int64_t>(1 + rng() % 2), 4}));
    }
    if (round % 2 == 0) {
      std::sort(chunks.begin(), chunks.end(),
                [](const ChunkInfo& a, const ChunkInfo& b) { return a.name < b.name; });
    }
    const ListFile file(chunks);
    const FileChunkIndex index(file.chunks());
    for (int q = 0; q < 100; ++q) {
      ManifestChunk mc;
      const std::string name = "t" + std::to_string(rng() % 8);
      mc.offsets = {static_cast<int64_t>(rng() % 4), 0};
      mc.shape = {static_cast<int64_t>(1 + rng() % 2), 4};
      size_t scanned = SIZE_MAX, indexed = SIZE_MAX;
      const ChunkInfo* by_scan = find_file_chunk(file, name, mc, &scanned);
      const ChunkInfo* by_index = index.find(name, mc, &indexed);
      ASSERT_EQ(by_scan, by_index) << name;
      if (by_scan) {
        EXPECT_EQ(scanned, indexed);
      }
      // By name and offsets alone: the first chunk at those offsets, whatever its shape.
      size_t at = SIZE_MAX;
      const ChunkInfo* first_at = index.find_at(name, mc.offsets, &at);
      size_t expected = SIZE_MAX;
      for (size_t i = 0; i < chunks.size() && expected == SIZE_MAX; ++i)
        if (chunks[i].name == name && chunks[i].offsets == mc.offsets) expected = i;
      EXPECT_EQ(first_at ? at : SIZE_MAX, expected);
    }
  }
}

}  // namespace
}  // namespace ckpt
