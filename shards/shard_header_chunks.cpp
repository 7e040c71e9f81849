#include "shards/shard_header_chunks.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/byte_source.h"
#include "base/huge_pages.h"
#include "base/parallel_jobs.h"
#include "base/sha256.h"
#include "formats/native_shard.h"
#include "shards/checkpoint_reader.h"

namespace ckpt {

namespace {

using Problem = ShardHeaderChunks::Problem;

// A header chunk on its way to its tensor, in a slice of one buffer made by the calling thread.
struct PlacedChunk {
  size_t tensor;
  ManifestChunk chunk;
};

// Where one shard's records go: its slice of the shared buffer, then (a header longer than its
// estimate) a list of its own.
struct ShardRecords {
  PlacedChunk* slice = nullptr;
  size_t capacity = 0;
  size_t count = 0;
  std::vector<PlacedChunk> overflow;

  // The slice is raw memory: a record is made in it as it is added, and no page of it is touched
  // (and cleared by the kernel) before.
  void add(PlacedChunk&& p) {
    if (count < capacity) {
      new (slice + count++) PlacedChunk(std::move(p));
    } else {
      overflow.push_back(std::move(p));
    }
  }
  void clear() {
    for (size_t k = 0; k < count; ++k) slice[k].~PlacedChunk();
    count = 0;
    overflow.clear();
  }

  ShardRecords() = default;
  ShardRecords(const ShardRecords&) = delete;
  ShardRecords& operator=(const ShardRecords&) = delete;
  ~ShardRecords() { clear(); }
};

struct ShardRead {
  ShardHeaderChunks outcome;
  ShardRecords records;
};

// What the pass's threads keep from one header to the next (NativeHeaderScratch says why): taken
// for a shard, given back after, let go with the pass.
class ScratchPool {
 public:
  std::unique_ptr<NativeHeaderScratch> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<NativeHeaderScratch>();
    std::unique_ptr<NativeHeaderScratch> scratch = std::move(free_.back());
    free_.pop_back();
    return scratch;
  }
  void give_back(std::unique_ptr<NativeHeaderScratch> scratch) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(scratch));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<NativeHeaderScratch>> free_;
};

void read_shard(const std::string& dir, const Manifest& manifest, size_t index,
                const std::unordered_map<std::string_view, size_t>& tensor_of, NativeHeaderScratch& scratch,
                ShardRead& out) {
  auto fail = [&](Problem problem, Status status) {
    out.outcome.problem = problem;
    out.outcome.status = std::move(status);
    out.records.clear();
  };
  const ManifestShard& shard = manifest.shards[index];
  auto path = resolve_shard_path(dir, shard.path);
  if (!path.is_ok()) return fail(Problem::kPath, path.status());
  auto source = FileByteSource::open(*path);
  if (!source.is_ok()) return fail(Problem::kUnreadable, source.status());
  Status disagreement;
  // A writer's header lists a shard's chunks in the manifest's tensor order, skipping the tensors
  // other shards hold whole: the few tensors after the last one found are tried before the name
  // index (a third of a 20,000-entry header skips one).
  constexpr size_t kLookAhead = 4;
  size_t next = 0;
  auto near_next = [&](std::string_view name) {
    for (size_t t = next; t < std::min(next + kLookAhead, manifest.tensors.size()); ++t) {
      if (manifest.tensors[t].name == name) return t;
    }
    return manifest.tensors.size();
  };
  NativeEntryVisitor visit;
  visit.entry = [&](const NativeChunkFields& c) {
    size_t tensor = near_next(c.name);
    if (tensor == manifest.tensors.size()) {
      const auto found = tensor_of.find(c.name);
      if (found == tensor_of.end()) {
        // The manifest's digest commits to this header, which holds a tensor the manifest does not
        // list: the two were not written together.
        if (disagreement.is_ok()) {
          disagreement =
              Status::corruption(*path + ": header holds chunk " +
                                 chunk_label(std::string(c.name), c.global_shape, c.offsets, c.shape) +
                                 " of a tensor the manifest does not list");
        }
        return;
      }
      tensor = found->second;
    }
    next = tensor + 1;
    const ManifestTensor& t = manifest.tensors[tensor];
    if (c.dtype != t.dtype || !(c.global_shape == DimsView(t.shape))) {
      if (disagreement.is_ok()) {
        disagreement = Status::corruption(
            *path + ": chunk " + chunk_label(std::string(c.name), c.global_shape, c.offsets, c.shape) +
            " is " + dtype_name(c.dtype) + " of " + shape_to_string(c.global_shape) +
            ", the manifest's tensor is " + dtype_name(t.dtype) + " of " + shape_to_string(t.shape));
      }
      return;
    }
    // The reader checked every entry: its digest is 64 lowercase hex digits.
    const std::optional<Sha256Digest> sha = digest_from_hex(c.sha256);
    if (!sha) {
      if (disagreement.is_ok())
        disagreement = Status::corruption(*path + ": chunk " + std::string(c.name) + ": no sha256");
      return;
    }
    out.records.add({tensor, {index, Dims(c.offsets), Dims(c.shape), c.data_offset, c.data_bytes, *sha}});
  };
  // Only the header the manifest's digest covers is walked: another shard's (a stale copy) or a
  // garbled one gives no record, and costs no parse.
  bool committed = true;
  visit.header_read = [&](const Sha256Digest& digest) {
    committed = digest_is_hex(digest, shard.sha256);
    if (committed) return Status::ok();
    return Status::corruption(*path + ": header sha256 mismatch: the manifest records " + shard.sha256 +
                              ", the header hashes to " + digest_hex(digest) +
                              " (its chunk records are not the ones committed)");
  };
  visit.restart = [&] {
    out.records.clear();
    disagreement = Status::ok();
    next = 0;
  };
  const Status read = read_native_shard_entries(std::move(*source), scratch, visit, &out.outcome.metadata);
  if (!committed) return fail(Problem::kDigestMismatch, read);
  if (!read.is_ok()) {
    const bool torn = read.code() == StatusCode::kTruncated;
    return fail(torn ? Problem::kTruncated : Problem::kUnreadable, read);
  }
  if (!disagreement.is_ok()) return fail(Problem::kDisagrees, disagreement);
}

// The header length a native shard's preamble gives, where it can be read (any problem is
// read_shard's to name).
std::optional<uint64_t> native_header_length(const std::string& dir, const ManifestShard& shard) {
  // Resolved first, as read_shard does: never opened unless a regular file inside the directory (a
  // named pipe would block the open).
  auto path = resolve_shard_path(dir, shard.path);
  if (!path.is_ok()) return std::nullopt;
  auto source = FileByteSource::open(*path);
  if (!source.is_ok()) return std::nullopt;
  auto length = native_shard_header_length(**source);
  return length.is_ok() ? std::optional<uint64_t>(*length) : std::nullopt;
}

// A writer's chunk entry is 250-300 bytes for the names a model has: a slice of a shard's header
// length / this holds every record of such a header, with ~10% to spare. Shorter entries (names of
// a few letters) overflow to the shard's own list: slower, as correct.
constexpr uint64_t kMinEntryBytes = 240;

}  // namespace

std::vector<ShardHeaderChunks> add_chunks_from_shard_headers(const std::string& checkpoint_dir,
                                                             Manifest& manifest, size_t jobs) {
  const size_t count = manifest.shards.size();
  std::vector<ShardHeaderChunks> outcomes(count);
  // Filled once: the records' places are handed out (in_header_order), so no list may grow later.
  const bool filled = std::any_of(manifest.tensors.begin(), manifest.tensors.end(),
                                  [](const ManifestTensor& t) { return !t.chunks.empty(); });
  if (manifest.chunk_records != ChunkRecords::kInShardHeaders || filled) return outcomes;
  std::unordered_map<std::string_view, size_t> tensor_of;
  tensor_of.reserve(manifest.tensors.size());
  for (size_t t = 0; t < manifest.tensors.size(); ++t) tensor_of.emplace(manifest.tensors[t].name, t);
  // Every shard's records in one buffer made here, in huge pages: made in the worker threads'
  // heaps, they were fresh 4 KiB pages, a fault each (~14 us on the bench VM), ~45 MB of them at
  // 320,000 chunks. Sized by the headers' lengths; a longer header's extra records go to a list.
  std::vector<size_t> estimate(count, 0);
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    if (const std::optional<uint64_t> bytes = native_header_length(checkpoint_dir, manifest.shards[i])) {
      estimate[i] = static_cast<size_t>(*bytes / kMinEntryBytes);
      total += estimate[i];
    }
  }
  const std::unique_ptr<void, decltype(&std::free)> buffer(
      std::malloc(std::max<size_t>(1, total) * sizeof(PlacedChunk)), &std::free);
  std::vector<ShardRead> reads(count);
  if (buffer) {  // else every shard's records go to its own list
    advise_huge_pages(buffer.get(), total * sizeof(PlacedChunk));
    for (size_t i = 0, at = 0; i < count; at += estimate[i], ++i) {
      reads[i].records.slice = static_cast<PlacedChunk*>(buffer.get()) + at;
      reads[i].records.capacity = estimate[i];
    }
  }
  ScratchPool scratch;
  run_parallel(count, resolve_jobs(jobs, count), [&](size_t i) {
    std::unique_ptr<NativeHeaderScratch> mine = scratch.take();
    read_shard(checkpoint_dir, manifest, i, tensor_of, *mine, reads[i]);
    scratch.give_back(std::move(mine));
  });
  // In shard order, each shard's in header order: the order a version-1 manifest lists them in.
  std::vector<size_t> per_tensor(manifest.tensors.size(), 0);
  for (const ShardRead& r : reads) {
    for (size_t k = 0; k < r.records.count; ++k) ++per_tensor[r.records.slice[k].tensor];
    for (const PlacedChunk& p : r.records.overflow) ++per_tensor[p.tensor];
  }
  for (size_t t = 0; t < manifest.tensors.size(); ++t) manifest.tensors[t].chunks.reserve(per_tensor[t]);
  for (size_t i = 0; i < count; ++i) {
    ShardRecords& records = reads[i].records;
    // Each tensor's list was reserved whole above: no record moves once added, so the refs hold.
    std::vector<ManifestChunkRef>& in_header_order = reads[i].outcome.in_header_order;
    in_header_order.reserve(records.count + records.overflow.size());
    auto add = [&](PlacedChunk& p) {
      ManifestTensor& t = manifest.tensors[p.tensor];
      t.chunks.push_back(std::move(p.chunk));
      in_header_order.push_back({&t, &t.chunks.back()});
    };
    for (size_t k = 0; k < records.count; ++k) add(records.slice[k]);
    for (PlacedChunk& p : records.overflow) add(p);
    records.clear();
    std::vector<PlacedChunk>().swap(records.overflow);
    outcomes[i] = std::move(reads[i].outcome);
  }
  return outcomes;
}

Status first_shard_header_problem(const std::vector<ShardHeaderChunks>& read) {
  for (const ShardHeaderChunks& r : read) {
    if (r.problem != ShardHeaderChunks::Problem::kNone) return r.status;
  }
  return Status::ok();
}

}  // namespace ckpt
