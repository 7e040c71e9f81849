#include "shards/mapped_checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "base/mapped_file.h"
#include "base/parallel_jobs.h"
#include "base/sha256.h"
#include "base/sha256_batch.h"
#include "shards/file_chunk_index.h"

namespace ckpt {

namespace {

// A manifest chunk matched with its entry in the shard file's own header.
struct ResolvedChunk {
  const ManifestChunk* manifest = nullptr;
  const ChunkInfo* file = nullptr;
  const std::string* shard_name = nullptr;
  const uint8_t* mapped = nullptr;  // the payload in the shard's whole-file mapping (or a read copy)
  const FileByteSource* mapped_from = nullptr;  // null when `mapped` is a copy read with pread
};

// One unit of parallel work: hash a chunk where its bytes are and, if the tensor is assembled,
// copy it into place.
struct ChunkJob {
  ResolvedChunk chunk;
  const ManifestTensor* tensor = nullptr;
  const uint8_t* source = nullptr;  // where the bytes are hashed (what the view will read)
  uint8_t* destination = nullptr;   // assembled tensors only: the tensor's buffer
  bool scatter = false;             // an N-d chunk, copied run by run after hashing
};

// OK when a chunk's bytes hash to what the manifest says, else the error naming shard, offset and chunk.
Status check_chunk_hash(const ChunkJob& job, const Sha256Digest& actual) {
  const ChunkInfo& fc = *job.chunk.file;
  const ManifestChunk& mc = *job.chunk.manifest;
  if (actual == mc.sha256) return Status::ok();
  return Status::corruption(*job.chunk.shard_name + " @" + std::to_string(fc.data_offset) +
                            ": sha256 mismatch for " + fc.label() + ": expected " + digest_hex(mc.sha256) +
                            " got " + digest_hex(actual));
}

// A chunk copied (into its tensor's buffer, or a scratch piece for a view) and hashed a piece at a
// time, as one of the two streams a load worker hashes side by side (run_two_streams_at_a_time).
// Each piece is hashed from the copy while it is in L2: SHA-256 fed from DRAM runs a third slower
// than memcpy + SHA-256 from cache on the bench machine.
class HashedChunkCopy {
 public:
  static constexpr uint64_t kPieceBytes = 256 << 10;
  HashedChunkCopy(const ChunkJob& job, bool alone, Status& result)
      : job_(job),
        alone_(alone),
        result_(result),
        size_(job.chunk.file->data_bytes),
        scratch_(job.destination ? 0 : static_cast<size_t>(std::min(kPieceBytes, size_))) {}

  // Every read of a shard's mapping is guarded: a shard truncated by another process while mapped
  // is an I/O error naming it (base/mapped_file.h), not a SIGBUS that kills the load.
  Status read(Sha256Batch& batch) {
    const size_t n = static_cast<size_t>(std::min(kPieceBytes, size_ - done_));
    uint8_t* copy = job_.destination ? job_.destination + done_ : scratch_.data();
    CKPT_RETURN_IF_ERROR(guarded_copy(copy, job_.source + done_, n, *job_.chunk.shard_name));
    batch.add(sha_, copy, n);
    done_ += n;
    return Status::ok();
  }
  bool at_end() const { return done_ == size_; }
  bool alone() const { return alone_; }
  void settle() {}
  Status finish() { return check_chunk_hash(job_, sha_.finish()); }
  void conclude(Status status) { result_ = std::move(status); }

 private:
  const ChunkJob& job_;
  bool alone_;
  Status& result_;
  uint64_t size_;
  uint64_t done_ = 0;
  std::vector<uint8_t> scratch_;
  Sha256 sha_;
};

bool is_row_range(const ManifestChunk& c, const std::vector<int64_t>& global_shape) {
  if (c.shape.empty()) return false;
  for (size_t d = 1; d < c.shape.size(); ++d) {
    if (c.offsets[d] != 0 || c.shape[d] != global_shape[d]) return false;
  }
  return true;
}

uint64_t row_bytes(const ManifestTensor& t) {
  uint64_t bytes = dtype_size(t.dtype);
  for (size_t d = 1; d < t.shape.size(); ++d) bytes *= static_cast<uint64_t>(t.shape[d]);
  return bytes;
}

class CheckpointMapper {
 public:
  CheckpointMapper(const std::string& dir, const Manifest& manifest, const LoadOptions& options)
      : dir_(dir), manifest_(manifest), options_(options) {
    // Asked once a tensor, when first needed: every shard a selection touches is opened with the
    // selection, and each opening goes through all the tensors (verify's 6,677 resume scalars of
    // 26,682 tensors in 16 shards asked it 430,000 times).
    if (options_.select) {
      selected_.assign(manifest_.tensors.size(), kNotAsked);
      select_ = [this](const ManifestTensor& t) { return is_selected(t); };
    }
  }

  Result<MappedCheckpoint> run() {
    for (const ManifestTensor& t : manifest_.tensors) {
      if (!is_selected(t)) continue;
      CKPT_RETURN_IF_ERROR(add_tensor(t));
    }
    CKPT_RETURN_IF_ERROR(read_copies());
    CKPT_RETURN_IF_ERROR(run_jobs());
    // The whole-file mappings back the whole-chunk views: they live as long as the result.
    for (auto& entry : mappings_) out_.keep(std::move(entry.second));
    return std::move(out_);
  }

 private:
  static constexpr int8_t kNotAsked = -1;

  bool is_selected(const ManifestTensor& t) {
    if (!options_.select) return true;
    const auto index = static_cast<size_t>(&t - manifest_.tensors.data());
    if (index >= selected_.size()) return options_.select(t);  // not one of the manifest's own
    if (selected_[index] == kNotAsked) selected_[index] = options_.select(t) ? 1 : 0;
    return selected_[index] == 1;
  }

  Result<const TensorFile*> shard(size_t index) {
    auto& file = files_[index];
    if (!file) {
      const bool matched = index < options_.headers_matched.size() && options_.headers_matched[index];
      CKPT_ASSIGN_OR_RETURN(
          file, open_manifest_shard(dir_, manifest_, index,
                                    matched ? ShardOpening::kForLoadHeaderMatched : ShardOpening::kForLoad,
                                    select_));
    }
    return file.get();
  }

  // The file a shard's payloads are mapped from: its format stores payloads as plain file ranges
  // (all of ours do) and the caller allows mapping. Null: payloads are read with pread.
  const FileByteSource* mapped_source(const TensorFile& file) const {
    return options_.map_files ? dynamic_cast<const FileByteSource*>(file.payload_source()) : nullptr;
  }

  // The payload's bytes: inside the shard's mapping, or a copy this object keeps, read with the
  // others by read_copies before any job runs.
  Result<const uint8_t*> payload(size_t index, const TensorFile& file, size_t chunk_index,
                                 const ChunkInfo& c) {
    const FileByteSource* source = mapped_source(file);
    if (!source) {
      auto kept = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(c.data_bytes));
      out_.keep(kept);
      copies_.push_back({&file, chunk_index, kept->data(), kept->size()});
      return kept->data();
    }
    auto& mapping = mappings_[index];
    if (!mapping) {
      CKPT_ASSIGN_OR_RETURN(mapping, MappedFile::map(*source));
    }
    if (c.data_offset > mapping->size() || c.data_bytes > mapping->size() - c.data_offset) {
      return Status::truncated(file.path() + ": payload of " + c.label() + " ends past the mapped " +
                               std::to_string(mapping->size()) + " bytes");
    }
    return mapping->data() + c.data_offset;
  }

  Result<std::vector<ResolvedChunk>> resolve(const ManifestTensor& t) {
    std::vector<ResolvedChunk> resolved;
    for (const ManifestChunk& mc : t.chunks) {
      CKPT_ASSIGN_OR_RETURN(const TensorFile* file, shard(mc.shard));
      const std::string& shard_name = manifest_.shards[mc.shard].path;
      size_t index = 0;
      auto& by_key = indexes_[mc.shard];
      if (!by_key) by_key = std::make_unique<FileChunkIndex>(file->chunks());
      const ChunkInfo* fc = by_key->find(t.name, mc, &index);
      if (!fc) {
        return Status::corruption(shard_name + ": has no chunk of " + t.name + " at offsets " +
                                  shape_to_string(mc.offsets));
      }
      if (fc->dtype != t.dtype || fc->global_shape != t.shape) {
        return Status::corruption(shard_name + ": chunk " + fc->label() + " is " + dtype_name(fc->dtype) +
                                  shape_to_string(fc->global_shape) + ", manifest says " +
                                  dtype_name(t.dtype) + shape_to_string(t.shape));
      }
      CKPT_ASSIGN_OR_RETURN(const uint8_t* mapped, payload(mc.shard, *file, index, *fc));
      resolved.push_back({&mc, fc, &shard_name, mapped, mapped_source(*file)});
    }
    return resolved;
  }

  // Row ranges covering rows [0, rows) exactly once, in order, from page-aligned file ranges.
  Result<std::shared_ptr<const MappedFile>> stitch(const ManifestTensor& t,
                                                   std::vector<ResolvedChunk>& chunks) {
    if (chunks.size() < 2) return std::shared_ptr<const MappedFile>();
    for (const ResolvedChunk& c : chunks) {
      if (!c.mapped_from || !is_row_range(*c.manifest, t.shape)) return std::shared_ptr<const MappedFile>();
    }
    std::sort(chunks.begin(), chunks.end(), [](const ResolvedChunk& a, const ResolvedChunk& b) {
      return a.manifest->offsets[0] < b.manifest->offsets[0];
    });
    std::vector<MappedFile::FileRange> ranges;
    int64_t next_row = 0;
    for (const ResolvedChunk& c : chunks) {
      if (c.manifest->offsets[0] != next_row) return std::shared_ptr<const MappedFile>();
      next_row += c.manifest->shape[0];
      ranges.push_back({c.mapped_from, c.file->data_offset, c.file->data_bytes});
    }
    if (next_row != t.shape[0] || !MappedFile::can_stitch(ranges)) return std::shared_ptr<const MappedFile>();
    return MappedFile::stitch(ranges);
  }

  Status add_tensor(const ManifestTensor& t) {
    auto nbytes = checked_nbytes(t.shape, t.dtype);
    if (!nbytes) return Status::corruption(t.name + ": shape " + shape_to_string(t.shape) + " overflows");
    CKPT_ASSIGN_OR_RETURN(std::vector<ResolvedChunk> chunks, resolve(t));
    uint64_t covered = 0;
    for (const ResolvedChunk& c : chunks) covered += c.file->data_bytes;
    if (covered != *nbytes) {
      return Status::corruption(t.name + ": chunks cover " + std::to_string(covered) + " of " +
                                std::to_string(*nbytes) + " bytes");
    }
    TensorView view{t.name, t.component, t.dtype, t.shape, nullptr, *nbytes};
    const bool whole = chunks.size() == 1 && chunks[0].manifest->shape == t.shape &&
                       reinterpret_cast<uintptr_t>(chunks[0].mapped) % dtype_size(t.dtype) == 0;
    if (whole) {
      view.data = chunks[0].mapped;
      jobs_.push_back({chunks[0], &t, chunks[0].mapped, nullptr, false});
      out_.add(std::move(view), chunks[0].mapped_from != nullptr);
      return Status::ok();
    }
    CKPT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> stitched, stitch(t, chunks));
    if (stitched) {
      view.data = stitched->data();
      const uint64_t row = row_bytes(t);
      for (const ResolvedChunk& c : chunks) {
        jobs_.push_back(
            {c, &t, stitched->data() + static_cast<uint64_t>(c.manifest->offsets[0]) * row, nullptr, false});
      }
      out_.keep(std::move(stitched));
      out_.add(std::move(view), true);
      return Status::ok();
    }
    // Assembled: zero-filled first, so a hostile manifest's gaps read as zeros, never old heap.
    // calloc, not new[](): a large block comes fresh from mmap already zeroed, so the chunks' copy
    // is the only pass that writes it (one copy at memory speed, not a memset and then a copy).
    void* raw = std::calloc(static_cast<size_t>(*nbytes ? *nbytes : 1), 1);
    if (!raw) return Status::io_error(t.name + ": cannot allocate " + std::to_string(*nbytes) + " bytes");
    std::shared_ptr<uint8_t> buffer(static_cast<uint8_t*>(raw), [](uint8_t* p) { std::free(p); });
    view.data = buffer.get();
    const uint64_t row = row_bytes(t);
    for (const ResolvedChunk& c : chunks) {
      if (is_row_range(*c.manifest, t.shape)) {
        jobs_.push_back(
            {c, &t, c.mapped, buffer.get() + static_cast<uint64_t>(c.manifest->offsets[0]) * row, false});
      } else {
        jobs_.push_back({c, &t, c.mapped, buffer.get(), true});
      }
    }
    out_.keep(std::move(buffer));
    out_.add(std::move(view), false);
    return Status::ok();
  }

  // Every job but a hashed plain copy (HashedChunkCopy). Reads of a shard's mapping are guarded,
  // as there.
  Status run_job(const ChunkJob& job) const {
    const uint64_t size = job.chunk.file->data_bytes;
    const std::string& shard_name = *job.chunk.shard_name;
    if (job.scatter) {
      // Staged in a copy first: scatter_chunk owns vectors, which a jump out of a SIGBUS would skip.
      std::vector<uint8_t> staged;
      const uint8_t* from = job.source;
      if (job.chunk.mapped_from) {
        staged.resize(static_cast<size_t>(size));
        CKPT_RETURN_IF_ERROR(guarded_copy(staged.data(), job.source, staged.size(), shard_name));
        from = staged.data();
      }
      if (options_.verify_hashes) CKPT_RETURN_IF_ERROR(check_chunk_hash(job, sha256_digest(from, size)));
      scatter_chunk(job.tensor->shape, dtype_size(job.tensor->dtype), job.chunk.manifest->offsets,
                    job.chunk.manifest->shape, from, job.destination);
      return Status::ok();
    }
    if (job.destination)
      return guarded_copy(job.destination, job.source, static_cast<size_t>(size), shard_name);
    if (job.chunk.mapped_from) {  // a zero-copy view: resident and mapped on return
      const uint8_t* source = job.source;
      return guarded_access(source, shard_name, [source, size] { MappedFile::populate(source, size); });
    }
    return Status::ok();
  }

  // The payloads read with pread, on every core: verify reads its 6,677 resume scalars of a
  // 320,000-chunk checkpoint this way, a few bytes each, and one after another they were a third
  // of its resume check. The first failure in the order they were asked for is the one reported.
  Status read_copies() {
    std::vector<Status> results(copies_.size(), Status::ok());
    run_parallel(copies_.size(), resolve_jobs(options_.jobs, copies_.size()), [&](size_t i) {
      const PendingCopy& c = copies_[i];
      results[i] = c.file->read_chunk(c.chunk_index, 0, c.out, c.bytes);
    });
    copies_.clear();
    for (const Status& s : results) CKPT_RETURN_IF_ERROR(s);
    return Status::ok();
  }

  // With hashes checked, each worker copies and hashes two chunks at once (their pieces hash side
  // by side) and takes the next job whenever one ends; largest first, the largest alone if it
  // would otherwise set the end (run_hashing_workers).
  Status run_jobs() {
    std::vector<Status> results(jobs_.size(), Status::ok());
    std::vector<uint64_t> sizes;
    for (const ChunkJob& job : jobs_) sizes.push_back(job.chunk.file->data_bytes);
    run_hashing_workers(
        sizes, options_.jobs,
        [&](const NextQueuedJob& next) {
          run_two_streams_at_a_time<HashedChunkCopy>([&]() -> std::unique_ptr<HashedChunkCopy> {
            for (std::optional<QueuedJob> queued; (queued = next());) {
              const ChunkJob& job = jobs_[queued->index];
              if (options_.verify_hashes && !job.scatter)
                return std::make_unique<HashedChunkCopy>(job, queued->alone, results[queued->index]);
              results[queued->index] = run_job(job);
            }
            return nullptr;
          });
        },
        {});
    for (const Status& s : results) CKPT_RETURN_IF_ERROR(s);
    return Status::ok();
  }

  const std::string& dir_;
  const Manifest& manifest_;
  const LoadOptions& options_;
  std::map<size_t, std::unique_ptr<TensorFile>> files_;
  std::map<size_t, std::unique_ptr<FileChunkIndex>> indexes_;  // per opened shard, built on first use
  std::map<size_t, std::shared_ptr<const MappedFile>> mappings_;
  std::vector<ChunkJob> jobs_;
  MappedCheckpoint out_;
  // A payload to be read whole into memory the result keeps (payload(), read_copies()).
  struct PendingCopy {
    const TensorFile* file;
    size_t chunk_index;
    uint8_t* out;
    size_t bytes;
  };
  std::vector<PendingCopy> copies_;
  std::vector<int8_t> selected_;  // options_.select of each tensor by index, once asked
  TensorSelect select_;           // is_selected, for the shards' openings
};

}  // namespace

Result<MappedCheckpoint> map_checkpoint_tensors(const std::string& checkpoint_dir, const Manifest& manifest,
                                                const LoadOptions& options) {
  return CheckpointMapper(checkpoint_dir, manifest, options).run();
}

}  // namespace ckpt
