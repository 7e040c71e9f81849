#include "shards/file_chunk_index.h"

#include <algorithm>

namespace ckpt {

namespace {

struct Key {
  const std::string& name;
  DimsView offsets;
};

bool less(const ChunkInfo& a, const Key& b) {
  const int c = a.name.compare(b.name);
  return c < 0 || (c == 0 && a.offsets < b.offsets);
}

}  // namespace

FileChunkIndex::FileChunkIndex(const std::vector<ChunkInfo>& chunks) : chunks_(chunks) {
  order_.resize(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) order_[i] = static_cast<uint32_t>(i);
  auto before = [this](uint32_t a, uint32_t b) {
    const ChunkInfo& x = chunks_[a];
    const ChunkInfo& y = chunks_[b];
    const int c = x.name.compare(y.name);
    if (c != 0) return c < 0;
    if (x.offsets != y.offsets) return x.offsets < y.offsets;
    return a < b;
  };
  // Writers list a shard's chunks in name order already; checking that first skips the sort.
  if (!std::is_sorted(order_.begin(), order_.end(), before)) std::sort(order_.begin(), order_.end(), before);
}

const ChunkInfo* FileChunkIndex::find_at(const std::string& name, DimsView offsets, size_t* index_out) const {
  const Key key{name, offsets};
  auto it = std::lower_bound(order_.begin(), order_.end(), key,
                             [this](uint32_t i, const Key& k) { return less(chunks_[i], k); });
  if (it == order_.end() || chunks_[*it].name != name || chunks_[*it].offsets != offsets) return nullptr;
  *index_out = *it;
  return &chunks_[*it];
}

const ChunkInfo* FileChunkIndex::find(const std::string& name, const ManifestChunk& chunk,
                                      size_t* index_out) const {
  const Key key{name, chunk.offsets};
  auto it = std::lower_bound(order_.begin(), order_.end(), key,
                             [this](uint32_t i, const Key& k) { return less(chunks_[i], k); });
  for (; it != order_.end() && chunks_[*it].name == name && DimsView(chunks_[*it].offsets) == chunk.offsets;
       ++it) {
    if (DimsView(chunks_[*it].shape) == chunk.shape) {
      *index_out = *it;
      return &chunks_[*it];
    }
  }
  return nullptr;
}

}  // namespace ckpt
