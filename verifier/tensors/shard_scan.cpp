#include "verifier/tensors/shard_scan.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string_view>

#include "base/block_buffer.h"
#include "base/byte_coding.h"
#include "base/byte_source.h"
#include "base/sha256.h"
#include "base/sha256_batch.h"
#include "distributed/share_exchange.h"
#include "formats/hdf5_metadata_prefix.h"
#include "formats/native_shard_format.h"

namespace ckpt {

namespace {

void advance(std::atomic<uint64_t>* bytes_done, uint64_t n) {
  if (bytes_done) bytes_done->fetch_add(n, std::memory_order_relaxed);
}

// The offset of the first non-zero byte of [data, data + n), or n.
size_t first_nonzero(const uint8_t* data, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    if (word) break;
  }
  for (; i < n; ++i) {
    if (data[i]) return i;
  }
  return n;
}

// Where the digest of a header-scoped shard ends: native, the preamble and the header its preamble
// sizes; safetensors, the length field and the JSON header it sizes; HDF5, the metadata prefix
// before the first non-empty payload (formats/README.md: every non-payload byte after it is zero,
// which the scan checks like any gap).
Result<uint64_t> header_digest_end(const ByteSource& source, std::string_view format,
                                   const std::vector<ChunkInfo>& chunks) {
  uint8_t len[8];
  if (format == "native") {
    if (source.size() < kNativePreambleBytes) {
      return Status::truncated(source.name() + ": shorter than the " + std::to_string(kNativePreambleBytes) +
                               "-byte preamble");
    }
    CKPT_RETURN_IF_ERROR(source.read_at(16, len, 8));
    const uint64_t header = decode_le64(len);
    if (header > source.size() - kNativePreambleBytes) {
      return Status::truncated(source.name() + " @16: header length " + std::to_string(header) +
                               " runs past the end of the file");
    }
    return kNativePreambleBytes + header;
  }
  if (format == "safetensors") {
    CKPT_RETURN_IF_ERROR(source.read_at(0, len, 8));
    const uint64_t header = decode_le64(len);
    if (header > source.size() - 8) {
      return Status::truncated(source.name() + " @0: header length " + std::to_string(header) +
                               " runs past the end of the file");
    }
    return 8 + header;
  }
  if (format == "hdf5") return hdf5_metadata_prefix_end(chunks, source.size());
  return Status::invalid_argument(source.name() + ": a header digest is defined only for native, " +
                                  "safetensors and hdf5 shards, not " + std::string(format));
}

// Payloads that are plain byte ranges, in file order, none overlapping the next: one pass can
// attribute every byte to at most one chunk.
bool payloads_are_disjoint(const std::vector<ScanChunk>& chunks, const std::vector<size_t>& order,
                           uint64_t file_bytes) {
  uint64_t end = 0;
  for (size_t i : order) {
    const ScanChunk& c = chunks[i];
    if (c.data_offset < end || !range_within(c.data_offset, c.data_bytes, file_bytes)) return false;
    end = c.data_offset + c.data_bytes;
  }
  return true;
}

}  // namespace

bool has_header_digest(std::string_view format) {
  return format == "native" || format == "safetensors" || format == "hdf5";
}

uint64_t scan_unit_bytes(uint64_t total_bytes, size_t threads) {
  const uint64_t per_unit = total_bytes / (kScanUnitsPerWorker * std::max<uint64_t>(1, threads));
  return std::clamp(per_unit, kMinScanUnitBytes, kScanUnitBytes);
}

std::vector<ScanChunk> scan_chunks(const std::vector<ChunkInfo>& chunks) {
  std::vector<ScanChunk> out;
  out.reserve(chunks.size());
  for (const ChunkInfo& c : chunks) out.push_back({c.data_offset, c.data_bytes, c.dtype});
  return out;
}

std::vector<ScanUnit> plan_scan_units(const std::vector<ScanChunk>& chunks, const std::vector<size_t>& order,
                                      uint64_t file_bytes, ShardDigest digest, uint64_t unit_bytes,
                                      uint64_t header_end) {
  // Without a shard digest nothing before the first payload is read; a header checked already is
  // not read again.
  const uint64_t begin = digest == ShardDigest::kNone && !order.empty()
                             ? std::min(chunks[order[0]].data_offset, file_bytes)
                         : digest == ShardDigest::kHeaderChecked ? std::min(header_end, file_bytes)
                                                                 : 0;
  if (digest == ShardDigest::kWholeFile || unit_bytes == 0 || order.empty())
    return {ScanUnit{begin, file_bytes, 0, order.size()}};
  std::vector<ScanUnit> units;
  ScanUnit current{begin, 0, 0, 0};
  for (size_t p = 0; p < order.size(); ++p) {
    const uint64_t start = chunks[order[p]].data_offset;
    if (p > current.first && start - current.begin >= unit_bytes) {
      current.end = start;
      current.last = p;
      units.push_back(current);
      current = ScanUnit{start, 0, p, 0};
    }
  }
  current.end = file_bytes;
  current.last = order.size();
  units.push_back(current);
  return units;
}

Result<ShardScanner> ShardScanner::plan(const std::string& path, const TensorFile& file, ShardDigest digest,
                                        uint64_t unit_bytes) {
  return plan_chunks(path, file.format_name(), scan_chunks(file.chunks()), &file, digest, unit_bytes);
}

Result<ShardScanner> ShardScanner::plan(const std::string& path, std::string_view format,
                                        std::vector<ScanChunk> chunks, ShardDigest digest,
                                        uint64_t unit_bytes) {
  return plan_chunks(path, format, std::move(chunks), nullptr, digest, unit_bytes);
}

Result<ShardScanner> ShardScanner::plan_chunks(const std::string& path, std::string_view format,
                                               std::vector<ScanChunk> chunks, const TensorFile* file,
                                               ShardDigest digest, uint64_t unit_bytes) {
  ShardScanner s;
  s.path_ = path;
  s.file_ = file;
  s.digest_ = digest;
  s.chunks_ = std::move(chunks);
  {
    CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
    s.scan_.file_bytes = source->size();
    if (digest == ShardDigest::kHeader || digest == ShardDigest::kHeaderChecked) {
      static const std::vector<ChunkInfo> kNoChunks;  // only HDF5's end needs them, and it has a file
      CKPT_ASSIGN_OR_RETURN(s.header_end_,
                            header_digest_end(*source, format, file ? file->chunks() : kNoChunks));
    }
  }
  s.order_.resize(s.chunks_.size());
  std::iota(s.order_.begin(), s.order_.end(), 0);
  std::stable_sort(s.order_.begin(), s.order_.end(),
                   [&](size_t a, size_t b) { return s.chunks_[a].data_offset < s.chunks_[b].data_offset; });
  // Without a file, the caller vouches that the payloads are plain ranges of it.
  s.one_pass_ = (!file || file->payload_source() != nullptr) &&
                payloads_are_disjoint(s.chunks_, s.order_, s.scan_.file_bytes);
  if (!s.one_pass_ && (digest != ShardDigest::kWholeFile || !file)) {
    return Status::corruption(path + ": payloads overlap; a header-scoped digest cannot cover them");
  }
  if (s.one_pass_) s.file_ = nullptr;  // never read through: the caller may close it
  s.units_ = s.one_pass_
                 ? plan_scan_units(s.chunks_, s.order_, s.scan_.file_bytes, digest, unit_bytes, s.header_end_)
                 : std::vector<ScanUnit>{ScanUnit{0, s.scan_.file_bytes, 0, s.chunks_.size()}};
  s.unit_status_.assign(s.units_.size(), Status::ok());
  s.unit_stray_.assign(s.units_.size(), -1);
  s.scan_.chunk_sha256.resize(s.chunks_.size());
  s.scan_.chunk_nonfinite.resize(s.chunks_.size());
  return s;
}

void ShardScanner::scan_unit(size_t unit, std::atomic<uint64_t>* bytes_done, size_t block_bytes) {
  size_t taken = 0;
  scan_units_two_at_a_time(
      [&]() -> std::optional<ScanTask> {
        if (taken++) return std::nullopt;
        return ScanTask{this, unit};
      },
      bytes_done, block_bytes);
}

Result<ShardScan> ShardScanner::finish() {
  for (const Status& s : unit_status_) CKPT_RETURN_IF_ERROR(s);
  for (int64_t stray : unit_stray_) {
    if (stray >= 0) {
      scan_.stray_byte_offset = stray;  // units are in file order: the first one found is the lowest
      break;
    }
  }
  return std::move(scan_);
}

// Positions [first, last) of order_ are the unit's chunks; the unit that starts at 0 (or the whole
// file) holds the shard's digest.
nlohmann::json ShardScanner::unit_result(size_t unit) const {
  const ScanUnit& u = units_[unit];
  nlohmann::json chunks = nlohmann::json::array();
  for (size_t p = u.first; p < u.last; ++p) {
    const size_t i = order_[p];
    chunks.push_back(
        {digest_hex(scan_.chunk_sha256[i]), scan_.chunk_nonfinite[i].nan, scan_.chunk_nonfinite[i].inf});
  }
  const Status& status = unit_status_[unit];
  return {{"code", static_cast<int>(status.code())},
          {"message", status.message()},
          {"stray", unit_stray_[unit]},
          {"digest", u.begin == 0 ? scan_.file_sha256 : std::string()},
          {"chunks", std::move(chunks)}};
}

Status ShardScanner::take_unit_result(size_t unit, const nlohmann::json& result) {
  if (unit >= units_.size())
    return Status::corruption(path_ + ": unit " + std::to_string(unit) + " not planned");
  const ScanUnit& u = units_[unit];
  try {
    const nlohmann::json& chunks = result.at("chunks");
    if (!chunks.is_array() || chunks.size() != u.last - u.first)
      return Status::corruption(path_ + ": unit " + std::to_string(unit) +
                                " result has the wrong chunk count");
    for (size_t p = u.first; p < u.last; ++p) {
      const nlohmann::json& c = chunks[p - u.first];
      const size_t i = order_[p];
      const std::optional<Sha256Digest> digest = digest_from_hex(c.at(0).get<std::string>());
      if (!digest)
        return Status::corruption(path_ + ": unit " + std::to_string(unit) +
                                  " result has a malformed digest");
      scan_.chunk_sha256[i] = *digest;
      scan_.chunk_nonfinite[i] = NonfiniteCount{c.at(1).get<uint64_t>(), c.at(2).get<uint64_t>()};
    }
    if (u.begin == 0) scan_.file_sha256 = result.at("digest").get<std::string>();
    unit_stray_[unit] = result.at("stray").get<int64_t>();
    unit_status_[unit] =
        status_from_code(result.at("code").get<int>(), result.at("message").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    return Status::corruption(path_ + ": unit " + std::to_string(unit) + " result is malformed: " + e.what());
  }
  return Status::ok();
}

// One unit's scan in progress, a block at a time: read() reads the next block, counts its NaNs,
// checks its gaps and queues its hashing in a batch; after the batch ran, settle() records the
// chunks that ended in it. Pulling blocks (instead of ByteSource::scan's callback) lets one thread
// step two units together and hash their blocks side by side.
class ShardScanner::UnitStream {
 public:
  UnitStream(ShardScanner& scanner, const ScanTask& task, size_t block_bytes,
             std::atomic<uint64_t>* bytes_done)
      : s_(scanner),
        unit_(scanner.units_[task.unit]),
        index_(task.unit),
        alone_(task.alone),
        buffer_(std::max<size_t>(1, block_bytes)),
        bytes_done_(bytes_done),
        at_(unit_.begin),
        next_(unit_.first) {}

  Status open() {
    CKPT_ASSIGN_OR_RETURN(source_, FileByteSource::open(s_.path_));
    if (source_->size() != s_.scan_.file_bytes) {
      return Status::truncated(s_.path_ + ": file changed size while being verified (" +
                               std::to_string(s_.scan_.file_bytes) + " -> " +
                               std::to_string(source_->size()) + " bytes)");
    }
    return Status::ok();
  }

  bool at_end() const { return at_ == unit_.end; }
  bool alone() const { return alone_; }

  Status read(Sha256Batch& batch) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer_.size(), unit_.end - at_));
    CKPT_RETURN_IF_ERROR(source_->read_at(at_, buffer_.data(), n));
    classify(batch, at_, buffer_.data(), n);
    at_ += n;
    advance(bytes_done_, n);
    return Status::ok();
  }

  // Once the batch holding the last read block ran: the digests of the chunks that ended in it.
  void settle() {
    for (auto& [index, hash] : ended_) s_.scan_.chunk_sha256[index] = hash->finish();
    ended_.clear();
  }

  // After the last block was read and settled.
  Status finish() {
    // Only zero-byte chunks at the very end can remain (payloads were checked to lie in the file).
    while (next_ < unit_.last) {
      const ScanChunk& c = s_.chunks_[s_.order_[next_]];
      if (c.data_bytes != 0) {
        return Status::truncated(s_.path_ + ": the payload at @" + std::to_string(c.data_offset) +
                                 " lies past the end of the file");
      }
      end_chunk(s_.order_[next_]);
    }
    settle();
    if (whole_file()) {
      s_.scan_.file_sha256 = file_hash_.finish_hex();
    } else if (s_.digest_ == ShardDigest::kHeader && unit_.begin == 0) {
      if (unit_.end < s_.header_end_)
        return Status::truncated(s_.path_ + ": header runs past the first unit");
      s_.scan_.file_sha256 = header_hash_.finish_hex();
    }
    return Status::ok();
  }

  // The unit's result, read by ShardScanner::finish.
  void conclude(Status status) { s_.unit_status_[index_] = std::move(status); }

 private:
  bool whole_file() const { return s_.digest_ == ShardDigest::kWholeFile; }

  void start_chunk(const ScanChunk& c) {
    chunk_hash_ = std::make_unique<Sha256>();
    nonfinite_ = std::make_unique<NonfiniteCounter>(c.dtype);
  }

  void end_chunk(size_t index) {
    if (!chunk_hash_) start_chunk(s_.chunks_[index]);
    s_.scan_.chunk_nonfinite[index] = nonfinite_->count();
    ended_.emplace_back(index, std::move(chunk_hash_));  // its bytes may still be queued
    nonfinite_.reset();
    ++next_;
  }

  // Every byte of a block is header, payload or gap, in file order.
  void classify(Sha256Batch& batch, uint64_t pos, const uint8_t* data, size_t n) {
    if (whole_file()) batch.add(file_hash_, data, n);
    const uint64_t block_end = pos + n;
    for (uint64_t at = pos; at < block_end;) {
      if (!whole_file() && at < s_.header_end_) {
        const uint64_t hi = std::min(s_.header_end_, block_end);
        if (s_.digest_ == ShardDigest::kHeader)
          batch.add(header_hash_, data + (at - pos), static_cast<size_t>(hi - at));
        at = hi;
        continue;
      }
      if (next_ < unit_.last && s_.chunks_[s_.order_[next_]].data_offset <= at) {
        const size_t index = s_.order_[next_];
        const ScanChunk& c = s_.chunks_[index];
        const uint64_t hi = std::min(c.data_offset + c.data_bytes, block_end);
        if (!chunk_hash_) start_chunk(c);
        if (hi > at) {
          batch.add(*chunk_hash_, data + (at - pos), static_cast<size_t>(hi - at));
          nonfinite_->feed(data + (at - pos), static_cast<size_t>(hi - at));
          if (index < s_.into_.size() && s_.into_[index])
            std::memcpy(s_.into_[index] + (at - c.data_offset), data + (at - pos),
                        static_cast<size_t>(hi - at));
        }
        if (hi == c.data_offset + c.data_bytes) end_chunk(index);
        at = hi;
        continue;
      }
      const uint64_t gap_end = next_ < unit_.last
                                   ? std::min<uint64_t>(s_.chunks_[s_.order_[next_]].data_offset, block_end)
                                   : block_end;
      int64_t& stray = s_.unit_stray_[index_];
      if (!whole_file() && stray < 0) {
        const size_t nz = first_nonzero(data + (at - pos), static_cast<size_t>(gap_end - at));
        if (nz < gap_end - at) stray = static_cast<int64_t>(at + nz);
      }
      at = gap_end;
    }
  }

  ShardScanner& s_;
  const ScanUnit& unit_;
  size_t index_;
  bool alone_;
  BlockBuffer buffer_;
  std::atomic<uint64_t>* bytes_done_;
  std::unique_ptr<FileByteSource> source_;
  uint64_t at_;         // the next byte to read
  size_t next_;         // position in order_ of the next chunk not yet finished
  Sha256 file_hash_;    // whole file: this unit is the whole file
  Sha256 header_hash_;  // header scope: the unit that starts at 0 holds the header
  // The chunk payload streaming past.
  std::unique_ptr<Sha256> chunk_hash_;
  std::unique_ptr<NonfiniteCounter> nonfinite_;
  std::vector<std::pair<size_t, std::unique_ptr<Sha256>>> ended_;  // chunk index, its hasher
};

Status ShardScanner::scan_in_two_passes(std::atomic<uint64_t>* bytes_done, size_t block_bytes) {
  CKPT_ASSIGN_OR_RETURN(scan_.file_sha256, sha256_hex_of_file(path_, &scan_.file_bytes));
  advance(bytes_done, scan_.file_bytes);
  std::vector<uint8_t> block;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    block.resize(static_cast<size_t>(std::min<uint64_t>(chunks_[i].data_bytes, block_bytes)));
    Sha256 hash;
    NonfiniteCounter nonfinite(chunks_[i].dtype);
    for (uint64_t done = 0; done < chunks_[i].data_bytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunks_[i].data_bytes - done, block.size()));
      CKPT_RETURN_IF_ERROR(file_->read_chunk(i, done, block.data(), n));
      hash.update(block.data(), n);
      nonfinite.feed(block.data(), n);
      done += n;
    }
    scan_.chunk_sha256[i] = hash.finish();
    scan_.chunk_nonfinite[i] = nonfinite.count();
  }
  return Status::ok();
}

void scan_units_two_at_a_time(const std::function<std::optional<ScanTask>()>& next,
                              std::atomic<uint64_t>* bytes_done, size_t block_bytes) {
  using Stream = ShardScanner::UnitStream;
  run_two_streams_at_a_time<Stream>([&]() -> std::unique_ptr<Stream> {
    for (std::optional<ScanTask> task; (task = next());) {
      ShardScanner& scanner = *task->scanner;
      if (!scanner.one_pass_) {  // read through the TensorFile: no blocks to interleave
        scanner.unit_status_[task->unit] = scanner.scan_in_two_passes(bytes_done, block_bytes);
        continue;
      }
      auto stream = std::make_unique<Stream>(scanner, *task, block_bytes, bytes_done);
      Status opened = stream->open();
      if (opened.is_ok()) return stream;
      stream->conclude(std::move(opened));
    }
    return nullptr;
  });
}

void scan_units_in_parallel(const std::vector<ScanTask>& tasks, size_t threads,
                            std::atomic<uint64_t>* bytes_done, const std::function<void()>& report) {
  run_tasks_on_hashing_workers(
      tasks, threads, [](const ScanTask& task) { return task.scanner->unit_size(task.unit); },
      [&](const std::function<std::optional<ScanTask>()>& next) {
        scan_units_two_at_a_time(next, bytes_done);
      },
      report);
}

Result<ShardScan> scan_shard(const std::string& path, const TensorFile& file,
                             std::atomic<uint64_t>* bytes_done, size_t block_bytes, ShardDigest digest) {
  CKPT_ASSIGN_OR_RETURN(ShardScanner scanner, ShardScanner::plan(path, file, digest));
  for (size_t u = 0; u < scanner.unit_count(); ++u) scanner.scan_unit(u, bytes_done, block_bytes);
  return scanner.finish();
}

}  // namespace ckpt
