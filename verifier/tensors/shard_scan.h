// One sequential pass over a shard file that computes everything `verify` needs from its data:
// the shard's digest (whole file, or header), each chunk's payload SHA-256 and each floating chunk's
// NaN/Inf counts.
//
// Why one pass: the file is streamed in kScanBlockBytes blocks (pread into the unit's buffer) and every
// block feeds the file (or header) hasher and the hasher of the chunk whose payload it holds, so the
// data is read once (`sha256sum` plus a per-chunk check would read it twice). Blocks are small enough
// to stay in L2 between the kernel's copy, SHA-256 and the NaN count, so only the copy touches DRAM.
//
// Why units: with a header digest (native and our safetensors shards) no hash spans the whole file,
// so a shard is cut at payload starts into units (scan_unit_bytes) that workers scan
// independently; a shard much larger than the others then keeps every core busy. A single payload
// is never split (its SHA-256 is sequential). A whole-file digest is one unit.
// Memory is one block per unit being scanned, whatever the checkpoint's size.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/byte_source.h"
#include "base/sha256.h"
#include "base/status.h"
#include "formats/tensor_file.h"
#include "verifier/tensors/nonfinite_count.h"

namespace ckpt {

constexpr size_t kScanBlockBytes = kStreamBlockBytes;
constexpr uint64_t kScanUnitBytes = 64ull << 20;    // the largest unit a plan aims for
constexpr uint64_t kMinScanUnitBytes = 1ull << 20;  // a unit's fixed cost (an open, a few reads): ~20 us
constexpr uint64_t kScanUnitsPerWorker = 32;

// The unit length for a checkpoint of `total_bytes` scanned by `threads` workers: about
// kScanUnitsPerWorker units per worker, so that the last ones to finish (units run largest first)
// are short and no core idles long at the end; within [kMinScanUnitBytes, kScanUnitBytes].
uint64_t scan_unit_bytes(uint64_t total_bytes, size_t threads);

// What the shard's manifest digest covers (ManifestShard::sha256_of), or kNone: no shard digest,
// the payloads alone are read (a reader that checks chunks, TensorSource: the header of a native
// shard is 17% of its bytes at 320,000 chunks of ~1 KB). kHeaderChecked: a header-digest shard
// whose header the caller has read and checked against the digest already (a version-2 manifest's,
// shards/shard_header_chunks.h): the scan starts where the header ends, computes no shard digest,
// and still finds any byte after the header that no payload holds and is not zero.
enum class ShardDigest { kWholeFile, kHeader, kNone, kHeaderChecked };
// Whether a shard of `format` has a digest of its header alone (kHeader): native, safetensors and
// HDF5, whose headers header_digest_end can delimit.
bool has_header_digest(std::string_view format);

struct ShardScan {
  // The shard's digest in the requested scope: the whole file, or the format's header (native:
  // preamble + header; safetensors: length field + JSON header).
  std::string file_sha256;
  // kHeader only: the first byte outside the header and every payload that is not zero padding,
  // or -1. Such a byte is covered by no hash, so the verifier must reject it.
  int64_t stray_byte_offset = -1;
  uint64_t file_bytes = 0;
  std::vector<Sha256Digest> chunk_sha256;       // by index in file.chunks()
  std::vector<NonfiniteCount> chunk_nonfinite;  // by index in file.chunks()
};

// What the scan needs of a chunk: where its payload lies and what it counts NaN/Inf as. A planned
// shard keeps these (24 bytes a chunk) while it waits for its units, not the header's records
// (~450 bytes a chunk with their strings): at 320k chunks those were ~140 MB of verify's peak.
struct ScanChunk {
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
  DType dtype = DType::kF32;
};
std::vector<ScanChunk> scan_chunks(const std::vector<ChunkInfo>& chunks);

// A byte range of a shard scanned by one worker: [begin, end) of the file, holding the payloads
// of the chunks at positions [first, last) of the plan's offset order, whole.
struct ScanUnit {
  uint64_t begin = 0;
  uint64_t end = 0;
  size_t first = 0;
  size_t last = 0;
};

// Cuts [0, file_bytes) into units at payload starts, each at least `unit_bytes` long (but the
// last), for a header-digest scan; `order` lists chunk indices by data_offset. A whole-file digest
// or unit_bytes == 0 gives one unit. Without a digest (kNone) the first unit starts at the first
// payload; with the header checked already (kHeaderChecked), at `header_end`. Pure: the work split,
// testable without files.
std::vector<ScanUnit> plan_scan_units(const std::vector<ScanChunk>& chunks, const std::vector<size_t>& order,
                                      uint64_t file_bytes, ShardDigest digest, uint64_t unit_bytes,
                                      uint64_t header_end = 0);

struct ScanTask;

// The scan of one shard, split into units that may run on different threads (each unit writes only
// its own chunks' results), then finished once all units ran.
class ShardScanner {
 public:
  // Reads the header length (kHeader) and plans the units. The scanner keeps the chunks' ScanChunk,
  // not the file: each unit opens its own descriptor, so thousands of planned shards do not hold
  // thousands of open files.
  static Result<ShardScanner> plan(const std::string& path, const TensorFile& file, ShardDigest digest,
                                   uint64_t unit_bytes = kScanUnitBytes);
  // The same from the chunks' payload ranges, for a caller that holds them without the file's
  // records (verify, once a native header was shown to be the manifest's: scan_chunks of the file
  // would be these): they must be plain, disjoint byte ranges of the file, read in one pass.
  // `format` is one whose header end its preamble gives (native, safetensors) for a kHeader scan.
  static Result<ShardScanner> plan(const std::string& path, std::string_view format,
                                   std::vector<ScanChunk> chunks, ShardDigest digest,
                                   uint64_t unit_bytes = kScanUnitBytes);

  // Each chunk's payload is also copied to into[i] (i: its index in the planned chunks; null or
  // past the end: not copied) as it streams past, so a reader fills its tensors in the same pass
  // that hashes them. Each destination must hold the chunk's data_bytes until every unit ran.
  void copy_payloads_to(std::vector<uint8_t*> into) { into_ = std::move(into); }

  size_t unit_count() const { return units_.size(); }
  // Whether the scan reads through the TensorFile (payloads that are not plain disjoint ranges):
  // then the file passed to plan() must stay open until finish().
  bool needs_file() const { return !one_pass_; }
  uint64_t unit_size(size_t unit) const { return units_[unit].end - units_[unit].begin; }
  uint64_t unit_begin(size_t unit) const { return units_[unit].begin; }
  const std::string& path() const { return path_; }
  const ScanChunk& chunk(size_t index) const { return chunks_[index]; }  // by index in file.chunks()
  // Scans one unit; distinct units may run concurrently. `bytes_done` (may be null) grows as bytes
  // are read, for progress.
  void scan_unit(size_t unit, std::atomic<uint64_t>* bytes_done, size_t block_bytes = kScanBlockBytes);
  // The result, once every unit was scanned: the first unit's error, if any.
  Result<ShardScan> finish();

  // verify --distributed: what scanning `unit` found (its status, stray byte, the digest it holds,
  // its chunks' SHA-256 and NaN/Inf counts), as JSON for the other tasks; and such a result taken
  // in as if this scanner had scanned the unit itself, so finish() is the same on every task.
  nlohmann::json unit_result(size_t unit) const;
  Status take_unit_result(size_t unit, const nlohmann::json& result);

 private:
  class UnitStream;
  friend void scan_units_two_at_a_time(const std::function<std::optional<ScanTask>()>& next,
                                       std::atomic<uint64_t>* bytes_done, size_t block_bytes);

  ShardScanner() = default;
  static Result<ShardScanner> plan_chunks(const std::string& path, std::string_view format,
                                          std::vector<ScanChunk> chunks, const TensorFile* file,
                                          ShardDigest digest, uint64_t unit_bytes);
  Status scan_in_two_passes(std::atomic<uint64_t>* bytes_done, size_t block_bytes);

  std::string path_;
  const TensorFile* file_ = nullptr;  // two-pass fallback only; the caller keeps it open until finish
  std::vector<ScanChunk> chunks_;     // by index in file.chunks()
  std::vector<size_t> order_;         // chunk indices by data_offset
  std::vector<uint8_t*> into_;        // copy_payloads_to
  ShardDigest digest_ = ShardDigest::kWholeFile;
  bool one_pass_ = true;  // payloads are plain, non-overlapping byte ranges of the file
  uint64_t header_end_ = 0;
  std::vector<ScanUnit> units_;
  std::vector<Status> unit_status_;
  std::vector<int64_t> unit_stray_;
  ShardScan scan_;
};

// One unit of one planned shard.
struct ScanTask {
  ShardScanner* scanner;
  size_t unit;
  bool alone = false;  // scanned with no second unit beside it (hashes_alone)
};

// Scans the units `next` hands out (nullopt: none left) on the calling thread, two at a time: a
// block of each is read, then both blocks are hashed together (Sha256Batch), which on a CPU with
// SHA extensions runs ~1.5x faster than one stream. What each of verify's workers runs; distinct
// workers may scan distinct units of one scanner.
void scan_units_two_at_a_time(const std::function<std::optional<ScanTask>()>& next,
                              std::atomic<uint64_t>* bytes_done, size_t block_bytes = kScanBlockBytes);

// Scans `tasks` (units of planned scanners) on `threads` workers (0: one per core): each worker
// scans two units at a time (scan_units_two_at_a_time), the largest first, each marked alone where
// run_hashing_workers says so. `bytes_done` (may be null) and `report` (may be empty) as there, for
// progress. How verify scans its share and inspect and diff hash whole files.
void scan_units_in_parallel(const std::vector<ScanTask>& tasks, size_t threads,
                            std::atomic<uint64_t>* bytes_done, const std::function<void()>& report);

// Scans `path`, whose chunks `file` describes, unit after unit on the calling thread. Payloads
// stored as plain non-overlapping byte ranges (native, safetensors, ...) take the single pass;
// others fall back to a file pass plus a read_chunk pass per chunk. `bytes_done` (may be null) is
// advanced as bytes are hashed, for progress.
Result<ShardScan> scan_shard(const std::string& path, const TensorFile& file,
                             std::atomic<uint64_t>* bytes_done, size_t block_bytes = kScanBlockBytes,
                             ShardDigest digest = ShardDigest::kWholeFile);

}  // namespace ckpt
