#include "shards/laid_out_native_shard.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "base/byte_source.h"
#include "shards/checkpoint_reader.h"

namespace ckpt {

namespace {

// The file's chunk table is built from the records the first time something asks for it (a
// message, a caller that does not know the manifest); payload reads need only each chunk's range.
class LaidOutNativeShard final : public TensorFile {
 public:
  LaidOutNativeShard(std::unique_ptr<ByteSource> source, std::vector<ManifestChunkRef> chunks,
                     nlohmann::json metadata)
      : source_(std::move(source)), records_(std::move(chunks)), metadata_(std::move(metadata)) {}

  const std::string& path() const override { return source_->name(); }
  const char* format_name() const override { return "native"; }
  const std::vector<ChunkInfo>& chunks() const override {
    std::call_once(built_, [this] {
      chunks_.reserve(records_.size());
      for (const ManifestChunkRef& r : records_) chunks_.push_back(chunk_info_of(*r.tensor, *r.chunk));
    });
    return chunks_;
  }
  const nlohmann::json& metadata() const override { return metadata_; }
  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override {
    if (index >= records_.size())
      return Status::invalid_argument(path() + ": no chunk " + std::to_string(index));
    const ManifestChunk& c = *records_[index].chunk;
    if (!range_within(offset, length, c.data_bytes))
      return Status::invalid_argument(
          path() + ": read past the end of " +
          chunk_label(records_[index].tensor->name, records_[index].tensor->shape, c.offsets, c.shape));
    return source_->read_at(c.data_offset + offset, out, length);
  }
  const ByteSource* payload_source() const override { return source_.get(); }
  const std::vector<ManifestChunkRef>& records() const { return records_; }

 private:
  std::unique_ptr<ByteSource> source_;
  const std::vector<ManifestChunkRef> records_;
  nlohmann::json metadata_;
  mutable std::once_flag built_;
  mutable std::vector<ChunkInfo> chunks_;
};

bool same_place(const ManifestChunk& a, const ManifestChunk& b) {
  return a.offsets == b.offsets && a.shape == b.shape;
}

// Whether two chunks of one tensor in `chunks` share offsets and shape. A tensor's chunks in one
// shard sit side by side (manifest order), and are usually one.
bool has_twin(const std::vector<ManifestChunkRef>& chunks) {
  for (size_t begin = 0; begin < chunks.size();) {
    size_t end = begin + 1;
    while (end < chunks.size() && chunks[end].tensor == chunks[begin].tensor) ++end;
    if (end - begin > 1) {
      std::vector<const ManifestChunk*> run;
      for (size_t i = begin; i < end; ++i) run.push_back(chunks[i].chunk);
      std::sort(run.begin(), run.end(), [](const ManifestChunk* a, const ManifestChunk* b) {
        return a->offsets != b->offsets ? a->offsets < b->offsets : a->shape < b->shape;
      });
      for (size_t i = 1; i < run.size(); ++i) {
        if (same_place(*run[i - 1], *run[i])) return true;
      }
    }
    begin = end;
  }
  return false;
}

// The shard's file, where it is a regular file inside the checkpoint (the format's reader names
// any other).
std::unique_ptr<ByteSource> open_shard_source(const std::string& checkpoint_dir, const ManifestShard& shard) {
  auto path = resolve_shard_path(checkpoint_dir, shard.path);
  if (!path.is_ok()) return nullptr;
  auto source = FileByteSource::open(*path);
  return source.is_ok() ? std::move(*source) : nullptr;
}

LaidOutShard laid_out_shard(std::unique_ptr<ByteSource> source, std::vector<ManifestChunkRef> in_header_order,
                            nlohmann::json metadata, std::vector<size_t> index_of) {
  LaidOutShard out;
  out.index_of = std::move(index_of);
  auto file = std::make_unique<LaidOutNativeShard>(std::move(source), std::move(in_header_order),
                                                   std::move(metadata));
  out.records = &file->records();
  out.file = std::move(file);
  return out;
}

}  // namespace

ChunkInfo chunk_info_of(const ManifestTensor& tensor, const ManifestChunk& chunk) {
  return {tensor.name,       tensor.component,          tensor.dtype,
          tensor.shape,      chunk.offsets.to_vector(), chunk.shape.to_vector(),
          chunk.data_offset, chunk.data_bytes,          digest_hex(chunk.sha256)};
}

NativeChunkFields native_chunk_fields(const ManifestTensor& tensor, const ManifestChunk& chunk,
                                      Sha256HexText& hex) {
  digest_hex_into(chunk.sha256, hex.data());
  return {tensor.name,       tensor.component, tensor.dtype,
          tensor.shape,      chunk.offsets,    chunk.shape,
          chunk.data_offset, chunk.data_bytes, std::string_view(hex.data(), hex.size())};
}

std::optional<NativeHeaderLayout> native_header_layout(const ByteSource& source, size_t count,
                                                       const std::function<ManifestChunkRef(size_t)>& chunk) {
  // The writer's header order is payload order; it places a shard's chunks in manifest order, so
  // they are usually in it already.
  std::vector<uint64_t> payload_at(count);
  for (size_t k = 0; k < count; ++k) payload_at[k] = chunk(k).chunk->data_offset;
  NativeHeaderLayout out;
  out.order.resize(count);
  for (size_t k = 0; k < count; ++k) out.order[k] = k;
  auto by_offset = [&](size_t a, size_t b) { return payload_at[a] < payload_at[b]; };
  if (!std::is_sorted(out.order.begin(), out.order.end(), by_offset))
    std::stable_sort(out.order.begin(), out.order.end(), by_offset);
  Sha256HexText hex;  // chunk k's digest spelt out, which its fields point at until chunk k + 1
  auto metadata = native_header_metadata_if_laid_out(source, count, [&](size_t k) {
    const ManifestChunkRef r = chunk(out.order[k]);
    return native_chunk_fields(*r.tensor, *r.chunk, hex);
  });
  if (!metadata) return std::nullopt;
  out.metadata = std::move(*metadata);
  return out;
}

std::vector<std::vector<ManifestChunkRef>> manifest_chunks_by_shard(const Manifest& manifest) {
  std::vector<std::vector<ManifestChunkRef>> out(manifest.shards.size());
  for (const ManifestTensor& t : manifest.tensors) {
    for (const ManifestChunk& c : t.chunks) {
      if (c.shard < out.size()) out[c.shard].push_back({&t, &c});
    }
  }
  return out;
}

std::optional<LaidOutShard> open_laid_out_native_shard(const std::string& checkpoint_dir,
                                                       const ManifestShard& shard,
                                                       const std::vector<ManifestChunkRef>& chunks) {
  if (shard.format != "native" || has_twin(chunks)) return std::nullopt;
  std::unique_ptr<ByteSource> source = open_shard_source(checkpoint_dir, shard);
  if (!source) return std::nullopt;
  auto layout = native_header_layout(*source, chunks.size(), [&](size_t k) { return chunks[k]; });
  if (!layout) return std::nullopt;
  std::vector<ManifestChunkRef> in_header_order(chunks.size());
  for (size_t k = 0; k < chunks.size(); ++k) in_header_order[k] = chunks[layout->order[k]];
  std::vector<size_t> index_of(chunks.size());
  for (size_t k = 0; k < chunks.size(); ++k) index_of[layout->order[k]] = k;
  return laid_out_shard(std::move(source), std::move(in_header_order), std::move(layout->metadata),
                        std::move(index_of));
}

std::optional<LaidOutShard> open_native_shard_from_records(const std::string& checkpoint_dir,
                                                           const ManifestShard& shard,
                                                           const std::vector<ManifestChunkRef>& chunks,
                                                           std::vector<ManifestChunkRef> in_header_order,
                                                           nlohmann::json metadata) {
  if (shard.format != "native" || chunks.size() != in_header_order.size() || has_twin(chunks))
    return std::nullopt;
  std::unique_ptr<ByteSource> source = open_shard_source(checkpoint_dir, shard);
  if (!source) return std::nullopt;
  std::unordered_map<const ManifestChunk*, size_t> position;
  position.reserve(in_header_order.size());
  for (size_t k = 0; k < in_header_order.size(); ++k) position.emplace(in_header_order[k].chunk, k);
  std::vector<size_t> index_of(chunks.size());
  for (size_t k = 0; k < chunks.size(); ++k) {
    const auto found = position.find(chunks[k].chunk);
    if (found == position.end()) return std::nullopt;
    index_of[k] = found->second;
  }
  return laid_out_shard(std::move(source), std::move(in_header_order), std::move(metadata),
                        std::move(index_of));
}

}  // namespace ckpt
