#include "verifier/check/checkpoint_verifier.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "base/byte_source.h"
#include "base/file_io.h"
#include "base/huge_pages.h"
#include "base/json_fields.h"
#include "base/parallel_jobs.h"
#include "base/seconds_since.h"
#include "distributed/share_exchange.h"
#include "distributed/share_split.h"
#include "distributed/step_gather.h"
#include "formats/dcp_checkpoint.h"
#include "formats/native_shard.h"
#include "formats/shard_formats.h"
#include "formats/tensor_file_open.h"
#include "layouts/layout_registry.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "shards/file_chunk_index.h"
#include "shards/laid_out_native_shard.h"
#include "shards/manifest.h"
#include "shards/shard_header_chunks.h"
#include "verifier/check/checkpoint_kind.h"
#include "verifier/check/chunk_coverage.h"
#include "verifier/check/foreign_verifier.h"
#include "verifier/check/resumability.h"
#include "verifier/check/seal.h"
#include "verifier/check/signature.h"
#include "verifier/check/trainer_verifier.h"
#include "verifier/check/what_to_pass.h"
#include "verifier/pins/drift.h"
#include "verifier/tensors/shard_scan.h"

namespace ckpt {

namespace {

constexpr int kMaxDirectoryDepth = 8;  // shard paths are shallow; bounds the leftover walk

// A manifest chunk, by position: manifest.tensors[tensor].chunks[chunk].
struct ChunkRef {
  size_t tensor;
  size_t chunk;
};

// What one shard's checks found; merged into the report in shard order so output is stable
// whatever order the parallel workers finish in.
struct ShardOutcome {
  std::vector<VerifyIssue> errors;
  std::vector<VerifyIssue> warnings;
  std::map<size_t, NonfiniteCount> nonfinite;  // by tensor index
  uint64_t bytes_hashed = 0;
};

class ShardCheck {
 public:
  // `header_may_match`: the manifest's chunks passed its own checks (coverage: no two chunks of a
  // tensor at the same offsets), so a header that is their layout pairs with them one to one.
  // `header_read`: what reading this shard's header gave a version-2 manifest (its chunks came
  // from it), or null (version 1: the manifest lists them, and the header is compared with it).
  ShardCheck(const std::string& dir, const Manifest& manifest, size_t index,
             const std::vector<ChunkRef>& refs, bool quick, uint64_t unit_bytes, bool header_may_match,
             const ShardHeaderChunks* header_read)
      : dir_(dir),
        manifest_(manifest),
        shard_(manifest.shards[index]),
        refs_(refs),
        quick_(quick),
        unit_bytes_(unit_bytes),
        header_may_match_(header_may_match),
        header_read_(header_read) {}

  // Opens the shard, compares its header with the manifest and plans the data scan (none in
  // --quick mode or when the shard cannot be opened).
  void prepare() {
    auto path = resolve_shard_path(dir_, shard_.path);
    if (!path.is_ok()) {
      classify_path_failure(path.status());
      return;
    }
    const ShardFormat* format = find_shard_format(shard_.format);
    if (!format) {
      error(verify_code::kShardUnreadable, "", "unknown shard format '" + shard_.format + "'");
      return;
    }
    struct stat st {};
    if (::stat(path->c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) != shard_.bytes) {
      error(
          verify_code::kShardSizeMismatch, "",
          "file has " + std::to_string(st.st_size) + " bytes, manifest says " + std::to_string(shard_.bytes));
    }
    if (header_read_) {
      prepare_from_header(*path);
      return;
    }
    if (header_may_match_ && shard_.format == "native" && prepare_from_manifest(*path)) return;
    auto file = format->open(*path);
    if (!file.is_ok()) {
      const bool torn = file.status().code() == StatusCode::kTruncated;
      error(torn ? verify_code::kShardTruncated : verify_code::kShardUnreadable, "", file.status().message());
      return;
    }
    matched_ = match_chunks(**file);
    if (quick_) return;
    auto scanner = ShardScanner::plan(*path, **file, digest(), unit_bytes_);
    if (!scanner.is_ok()) {
      scan_failed(scanner.status());
      return;
    }
    scanner_.emplace(std::move(*scanner));
    // Planned shards hold no descriptor unless their scan reads through the file.
    if (scanner_->needs_file()) file_ = std::move(*file);
  }

  ShardScanner* scanner() { return scanner_ ? &*scanner_ : nullptr; }
  // Whether prepare() found the header to be the manifest's layout, byte for byte.
  bool header_matched() const { return header_matched_; }

  // Once every unit of the scan ran: compares what it found with the manifest.
  ShardOutcome finish() {
    if (scanner_) check_data(scanner_->finish());
    scanner_.reset();
    file_.reset();
    return std::move(out_);
  }

 private:
  void error(const char* code, const std::string& tensor, std::string message) {
    out_.errors.push_back({code, shard_.path, tensor, std::move(message)});
  }

  void classify_path_failure(const Status& status) {
    const std::string full = dir_ + "/" + shard_.path;
    if (status.code() == StatusCode::kNotFound || status.code() == StatusCode::kIoError) {
      error(verify_code::kShardMissing, "", status.message());
    } else if (is_safe_relative_path(shard_.path) && path_resolves_inside(dir_, full)) {
      error(verify_code::kShardNotRegular, "", full + ": not a regular file");
    } else {
      error(verify_code::kShardPathUnsafe, "", status.message());
    }
  }

  // A version-2 manifest's chunks of this shard are its header's, read and checked against the
  // manifest's digest of it already (shards/shard_header_chunks.h): there is nothing to compare,
  // only what reading it found to report and the scan to plan.
  void prepare_from_header(const std::string& path) {
    using Problem = ShardHeaderChunks::Problem;
    const ShardHeaderChunks& read = *header_read_;
    if (read.problem == Problem::kPath) return classify_path_failure(read.status);
    if (read.problem != Problem::kNone) return error(verify_code_of(read.problem), "", read.status.message());
    if (quick_) {  // nothing to scan: the header is the records, checked already
      header_matched_ = true;
      return;
    }
    // The scanner takes the chunks in any order (it sorts them by offset itself).
    std::vector<size_t> order(refs_.size());
    for (size_t r = 0; r < order.size(); ++r) order[r] = r;
    plan_in_payload_order(path, order);
  }

  // The code verify reports a header's problem by, as version 1 reports the same damage.
  static const char* verify_code_of(ShardHeaderChunks::Problem problem) {
    using Problem = ShardHeaderChunks::Problem;
    switch (problem) {
      case Problem::kTruncated: return verify_code::kShardTruncated;
      case Problem::kDigestMismatch: return verify_code::kShardSha256Mismatch;
      case Problem::kDisagrees: return verify_code::kChunkHeaderMismatch;
      default: return verify_code::kShardUnreadable;
    }
  }

  const ManifestChunk& chunk_of(size_t r) const {
    return manifest_.tensors[refs_[r].tensor].chunks[refs_[r].chunk];
  }

  // The chunks of refs `order` are the header's, one to one: only the scan is left.
  void plan_in_payload_order(const std::string& path, const std::vector<size_t>& order) {
    header_matched_ = true;
    matched_.assign(refs_.size(), SIZE_MAX);
    std::vector<ScanChunk> chunks(order.size());
    for (size_t k = 0; k < order.size(); ++k) {
      matched_[order[k]] = k;
      const ManifestChunk& mc = chunk_of(order[k]);
      chunks[k] = {mc.data_offset, mc.data_bytes, manifest_.tensors[refs_[order[k]].tensor].dtype};
    }
    if (quick_) return;
    auto scanner = ShardScanner::plan(path, shard_.format, std::move(chunks), digest(), unit_bytes_);
    if (!scanner.is_ok()) {
      scan_failed(scanner.status());
      return;
    }
    scanner_.emplace(std::move(*scanner));
  }

  // A native header that is byte for byte the writer's layout of this shard's manifest chunks, in
  // payload order, is what comparing it entry by entry would find equal: the chunks pair up by
  // position, and only the scan is left to plan. Parsing 20,000 header entries a shard to compare
  // them was ~40% of verify --quick at 320k chunks (issue 44). False: any other header, which the
  // format's reader opens and match_chunks compares, as before.
  bool prepare_from_manifest(const std::string& path) {
    // An empty chunk can share its offsets with another without overlapping it, which coverage
    // does not report: entry by entry, both would pair with the header's first.
    for (size_t r = 0; r < refs_.size(); ++r) {
      if (chunk_of(r).data_bytes == 0) return false;
    }
    auto source = FileByteSource::open(path);
    if (!source.is_ok()) return false;
    const auto layout = native_header_layout(**source, refs_.size(), [&](size_t r) {
      return ManifestChunkRef{&manifest_.tensors[refs_[r].tensor], &chunk_of(r)};
    });
    if (!layout) return false;
    plan_in_payload_order(path, layout->order);
    return true;
  }

  // Pairs every manifest chunk placed in this shard with the header chunk of the same tensor and
  // offsets; returns, per ref, the header chunk index (SIZE_MAX when the header lacks it).
  std::vector<size_t> match_chunks(const TensorFile& file) {
    const auto& chunks = file.chunks();
    const FileChunkIndex by_key(chunks);  // the first header chunk of each (name, offsets)
    std::vector<bool> referenced(chunks.size(), false);
    std::vector<size_t> matched(refs_.size(), SIZE_MAX);
    for (size_t r = 0; r < refs_.size(); ++r) {
      const ManifestTensor& t = manifest_.tensors[refs_[r].tensor];
      const ManifestChunk& mc = t.chunks[refs_[r].chunk];
      size_t index = 0;
      if (!by_key.find_at(t.name, mc.offsets, &index)) {
        error(verify_code::kChunkMissingInShard, t.name,
              "manifest places the chunk at offsets " + shape_to_string(mc.offsets) +
                  " here, the shard header has none");
        continue;
      }
      matched[r] = index;
      referenced[index] = true;
      compare_header(t, mc, chunks[index]);
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (!referenced[i]) {
        out_.warnings.push_back(
            {verify_code::kChunkNotInManifest, shard_.path, chunks[i].name,
             "shard header holds chunk " + chunks[i].label() + " that the manifest does not list"});
      }
    }
    return matched;
  }

  void compare_header(const ManifestTensor& t, const ManifestChunk& mc, const ChunkInfo& fc) {
    // The common case, every field equal, without formatting six strings per chunk.
    if (t.dtype == fc.dtype && t.shape == fc.global_shape && mc.shape == fc.shape &&
        mc.data_offset == fc.data_offset && mc.data_bytes == fc.data_bytes &&
        digest_is_hex(mc.sha256, fc.sha256))
      return;
    std::string diffs;
    auto differ = [&](const std::string& field, const std::string& manifest_value,
                      const std::string& header_value) {
      if (manifest_value == header_value) return;
      diffs +=
          (diffs.empty() ? "" : ", ") + field + " manifest " + manifest_value + " vs header " + header_value;
    };
    differ("dtype", dtype_name(t.dtype), dtype_name(fc.dtype));
    differ("global shape", shape_to_string(t.shape), shape_to_string(fc.global_shape));
    differ("shape", shape_to_string(mc.shape), shape_to_string(fc.shape));
    differ("data_offset", std::to_string(mc.data_offset), std::to_string(fc.data_offset));
    differ("data_bytes", std::to_string(mc.data_bytes), std::to_string(fc.data_bytes));
    differ("sha256", digest_hex(mc.sha256), fc.sha256);
    if (!diffs.empty())
      error(verify_code::kChunkHeaderMismatch, t.name, "chunk " + fc.label() + ": " + diffs);
  }

  // A version-2 shard's header was read and checked against the manifest's digest when its chunks
  // were taken from it: the scan does not read it again (~17% of the shard at 320k chunks).
  ShardDigest digest() const {
    if (header_read_ && header_read_->problem == ShardHeaderChunks::Problem::kNone)
      return ShardDigest::kHeaderChecked;
    return shard_.sha256_of == "header" ? ShardDigest::kHeader : ShardDigest::kWholeFile;
  }

  void scan_failed(const Status& status) {
    const bool torn = status.code() == StatusCode::kTruncated;
    error(torn ? verify_code::kShardTruncated : verify_code::kShardUnreadable, "", status.message());
  }

  void check_data(Result<ShardScan> scan) {
    if (!scan.is_ok()) {
      scan_failed(scan.status());
      return;
    }
    out_.bytes_hashed = scan->file_bytes;
    if (digest() != ShardDigest::kHeaderChecked && scan->file_sha256 != shard_.sha256) {
      error(verify_code::kShardSha256Mismatch, "",
            std::string(digest() == ShardDigest::kWholeFile ? "whole-file" : "header") +
                " sha256 mismatch: expected " + shard_.sha256 + " got " + scan->file_sha256);
    }
    if (scan->stray_byte_offset >= 0) {
      error(verify_code::kShardSha256Mismatch, "",
            "@" + std::to_string(scan->stray_byte_offset) +
                ": non-zero byte outside the header and every payload (padding must be zero)");
    }
    // The records were last read before the scan streamed the shard through the cache: each
    // comparison waited on a miss (a tenth of verify's time at 320,000 chunks of ~1.3 KB). A few
    // refs ahead, the tensor's entry and then its record are asked for early.
    constexpr size_t kTensorAhead = 16, kRecordAhead = 8;
    for (size_t r = 0; r < refs_.size(); ++r) {
      if (r + kTensorAhead < refs_.size())
        __builtin_prefetch(&manifest_.tensors[refs_[r + kTensorAhead].tensor]);
      if (r + kRecordAhead < refs_.size()) __builtin_prefetch(&chunk_of(r + kRecordAhead).sha256);
      if (matched_[r] == SIZE_MAX) continue;
      const ManifestTensor& t = manifest_.tensors[refs_[r].tensor];
      const ManifestChunk& mc = t.chunks[refs_[r].chunk];
      const Sha256Digest& computed = scan->chunk_sha256[matched_[r]];
      if (computed != mc.sha256) {
        // Named as the manifest places it: the header's chunk has the same name and offsets, and
        // its shape, where it differs, is reported as a header mismatch already.
        const std::string label = chunk_label(t.name, t.shape, mc.offsets, mc.shape);
        error(verify_code::kChunkSha256Mismatch, t.name,
              chunk_sha256_mismatch_message(scanner_->chunk(matched_[r]).data_offset, label,
                                            digest_hex(mc.sha256), digest_hex(computed)));
      }
      // Only counts that are not zero: a map entry a chunk was 320,000 node insertions at 320k.
      const NonfiniteCount& nonfinite = scan->chunk_nonfinite[matched_[r]];
      if (nonfinite.any()) out_.nonfinite[refs_[r].tensor] += nonfinite;
    }
  }

  const std::string& dir_;
  const Manifest& manifest_;
  const ManifestShard& shard_;
  const std::vector<ChunkRef>& refs_;
  bool quick_;
  uint64_t unit_bytes_;  // scan units are cut at payload starts once this long
  bool header_may_match_;
  const ShardHeaderChunks* header_read_;
  bool header_matched_ = false;
  ShardOutcome out_;
  std::vector<size_t> matched_;  // per ref: the header chunk index, SIZE_MAX when missing
  std::optional<ShardScanner> scanner_;
  std::unique_ptr<TensorFile> file_;  // kept open only when the scan reads through it
};

// The strict parser rejects unsafe shard paths as a schema error; look for them first so the
// report says what is actually wrong (a manifest pointing outside its directory).
bool report_unsafe_shard_paths(const std::string& text, VerifyReport& report) {
  auto json = parse_json(text, "manifest");
  if (!json.is_ok() || !json->is_object()) return false;
  auto shards = json->find("shards");
  if (shards == json->end() || !shards->is_array()) return false;
  bool found = false;
  for (const auto& s : *shards) {
    if (!s.is_object() || !s.contains("path") || !s["path"].is_string()) continue;
    const std::string path = s["path"].get<std::string>();
    if (!is_safe_relative_path(path)) {
      report.add_error(
          verify_code::kShardPathUnsafe, path, "",
          "manifest names shard path '" + path + "', which is absolute, has '..' or is malformed");
      found = true;
    }
  }
  return found;
}

void report_unlisted_files(const std::string& dir, const Manifest& manifest, VerifyReport& report) {
  std::set<std::string> listed = {kManifestFileName, kSignatureFileName};
  for (const auto& s : manifest.shards) listed.insert(s.path);
  for (const auto& f : list_files_under(dir, kMaxDirectoryDepth)) {
    if (!listed.count(f)) {
      report.add_warning(verify_code::kUnlistedFile, "", "", dir + "/" + f + ": not listed in the manifest");
    }
  }
}

void report_nonfinite(const Manifest& manifest, const std::map<size_t, NonfiniteCount>& counts,
                      VerifyReport& report) {
  for (const auto& [tensor, count] : counts) {
    if (!count.any()) continue;
    const ManifestTensor& t = manifest.tensors[tensor];
    add_nonfinite_error(report, "", t.name, t.dtype, t.shape, count);
  }
}

// The threads that plan the units: this process's, or (distributed) every task's together, so each
// task's share still holds ~kScanUnitsPerWorker units per thread and the split balances.
Result<size_t> planning_threads(const VerifyOptions& options) {
  const uint64_t mine = resolve_jobs(options.jobs, SIZE_MAX);
  if (!options.distributed || options.distributed->world_size() <= 1) return mine;
  CKPT_ASSIGN_OR_RETURN(std::vector<std::string> threads,
                        all_gather_step(*options.distributed, "verify: plan", std::to_string(mine)));
  size_t all = 0;
  for (const std::string& t : threads) all += static_cast<size_t>(std::strtoull(t.c_str(), nullptr, 10));
  return std::max<size_t>(all, 1);
}

// Every shard opened, compared with the manifest and cut into scan units: one job per unit.
struct ScanPlan {
  std::vector<std::vector<ChunkRef>> refs;  // by shard; ShardCheck keeps a reference
  std::vector<std::unique_ptr<ShardCheck>> checks;
  std::vector<ScanTask> jobs;  // every unit of every planned shard
  uint64_t total = 0;
};

// `threads`: every thread that will scan (all tasks' together), which sets the unit length.
// `chunks_consistent`: the manifest's chunks passed the coverage check (ShardCheck says why).
// `header_reads`: by shard, what reading a version-2 manifest's headers gave (empty: version 1).
void plan_scan(const std::string& dir, const Manifest& manifest, bool quick, size_t threads, size_t jobs,
               bool chunks_consistent, const std::vector<ShardHeaderChunks>& header_reads, ScanPlan& plan) {
  const size_t count = manifest.shards.size();
  plan.refs.assign(count, {});
  for (size_t t = 0; t < manifest.tensors.size(); ++t) {
    for (size_t c = 0; c < manifest.tensors[t].chunks.size(); ++c)
      plan.refs[manifest.tensors[t].chunks[c].shard].push_back({t, c});
  }
  for (const auto& s : manifest.shards) plan.total += s.bytes;
  // Shards are opened and planned in parallel, then every planned unit of every shard is one job,
  // largest first (a single payload cannot be split, so the biggest must start early), so one
  // shard much larger than the rest is spread over the cores instead of leaving them idle.
  plan.checks.resize(count);
  const uint64_t unit_bytes = scan_unit_bytes(plan.total, threads);
  run_parallel(count, resolve_jobs(jobs, count), [&](size_t i) {
    const ShardHeaderChunks* header_read = header_reads.empty() ? nullptr : &header_reads[i];
    plan.checks[i] = std::make_unique<ShardCheck>(dir, manifest, i, plan.refs[i], quick, unit_bytes,
                                                  chunks_consistent, header_read);
    plan.checks[i]->prepare();
  });
  for (size_t i = 0; i < count; ++i) {
    if (ShardScanner* scanner = plan.checks[i]->scanner()) {
      for (size_t u = 0; u < scanner->unit_count(); ++u) plan.jobs.push_back({scanner, u});
    }
  }
}

// `headers_matched` (by shard): which headers were found to be the manifest's layout.
Status check_shards(const std::string& dir, const Manifest& manifest, const VerifyOptions& options,
                    bool chunks_consistent, const std::vector<ShardHeaderChunks>& header_reads,
                    VerifyReport& report, std::vector<bool>* headers_matched) {
  const size_t count = manifest.shards.size();
  CKPT_ASSIGN_OR_RETURN(const size_t threads, planning_threads(options));
  ScanPlan plan;
  plan_scan(dir, manifest, options.quick, threads, options.jobs, chunks_consistent, header_reads, plan);
  const std::vector<ScanTask>& jobs = plan.jobs;
  const uint64_t total = plan.total;
  auto& checks = plan.checks;
  // Distributed: this task scans only its share of the jobs (the same split on every task).
  std::vector<uint64_t> all_sizes;
  for (const ScanTask& job : jobs) all_sizes.push_back(job.scanner->unit_size(job.unit));
  ByteCollective* world =
      options.distributed && options.distributed->world_size() > 1 ? options.distributed : nullptr;
  const std::vector<int> owners =
      world ? split_by_size(all_sizes, world->world_size()) : std::vector<int>(jobs.size(), 0);
  const int me = world ? world->rank() : 0;
  std::vector<ScanTask> mine;
  uint64_t share = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (owners[j] != me) continue;
    mine.push_back(jobs[j]);
    share += all_sizes[j];
  }
  std::atomic<uint64_t> hashed{0};
  std::function<void()> report_progress;
  const uint64_t progress_total = world ? share : total;
  if (options.on_progress) report_progress = [&] { options.on_progress(hashed.load(), progress_total); };
  if (options.on_share) options.on_share(mine.size(), share);
  // Each worker scans two units at once (their blocks hash side by side), largest first, and
  // takes the next whenever one ends.
  scan_units_in_parallel(mine, options.jobs, &hashed, report_progress);
  if (world) {
    CKPT_RETURN_IF_ERROR(exchange_unit_results(
        *world, "verify: scan", all_sizes, owners,
        [&](size_t j) { return jobs[j].scanner->unit_result(jobs[j].unit); },
        [&](size_t j, const nlohmann::json& r) {
          return jobs[j].scanner->take_unit_result(jobs[j].unit, r);
        }));
  }
  std::vector<ShardOutcome> outcomes(count);
  headers_matched->assign(count, false);
  for (size_t i = 0; i < count; ++i) {
    (*headers_matched)[i] = checks[i]->header_matched();
    outcomes[i] = checks[i]->finish();
  }

  std::map<size_t, NonfiniteCount> nonfinite;
  for (auto& o : outcomes) {
    for (auto& e : o.errors) report.errors.push_back(std::move(e));
    for (auto& w : o.warnings) report.warnings.push_back(std::move(w));
    for (const auto& [tensor, n] : o.nonfinite) nonfinite[tensor] += n;
    report.bytes_hashed += o.bytes_hashed;
  }
  report_nonfinite(manifest, nonfinite, report);
  return Status::ok();
}

void check_resume_state(const std::string& dir, const Manifest& manifest,
                        const std::vector<bool>& headers_matched, VerifyReport& report) {
  LoadOptions load;
  load.select = is_resume_scalar;
  load.headers_matched = headers_matched;  // compared already: not hashed again
  load.map_files = false;                  // verify streams with pread and never maps: its memory stays flat
  auto loaded = load_checkpoint_tensors(dir, manifest, load);
  std::map<std::string, LoadedTensor> scalars;
  if (loaded.is_ok()) {
    for (auto& t : *loaded) scalars.emplace(t.name, std::move(t));
  } else if (report.ok()) {
    // Not already explained by a shard check (in --quick mode data is not hashed).
    report.add_error(verify_code::kShardUnreadable, "", "",
                     "reading the resume scalars: " + loaded.status().message());
  }
  check_resumability(manifest, scalars, report);
}

// `verify ROOT` (or ROOT/latest) checks what `latest` names; a committed checkpoint of a later step
// beside it is what a resume from `latest` would skip: said, as a warning.
void warn_of_newer_checkpoints(const std::string& raw, const std::string& verified, VerifyReport& report) {
  const std::string given = strip_trailing_slashes(raw);
  if (given == verified || step_from_dir_name(base_name(verified)) < 0)
    return;  // a checkpoint dir was passed
  const std::string root = parent_dir(verified);
  std::vector<std::string> newer;
  for (const std::string& dir : list_checkpoints(root).committed) {
    const int64_t step = step_from_dir_name(base_name(dir));
    if (step > step_from_dir_name(base_name(verified))) newer.push_back(base_name(dir));
  }
  if (newer.empty()) return;
  report.add_warning(verify_code::kNewerCheckpointExists, "", "",
                     root + ": `latest` names " + base_name(verified) + ", but " +
                         std::to_string(newer.size()) + " committed checkpoint(s) of later steps exist (" +
                         newer.back() + " the newest): a resume from `latest` would skip them");
}

void report_uncommitted(const std::string& dir, VerifyReport& report) {
  if (step_from_dir_name(base_name(dir)) < 0) return;  // not inside a checkpoint root
  for (const auto& u : list_checkpoints(parent_dir(dir)).uncommitted) {
    if (u == dir) continue;
    report.uncommitted.push_back(u);
    // A `.deleting-*` dir was a committed checkpoint that a prune had started to delete: it is no
    // longer a checkpoint, and the next prune finishes it (shards/retention.h).
    const bool pruned = base_name(u).rfind(kDeletingDirPrefix, 0) == 0;
    report.add_warning(verify_code::kUncommittedCheckpoint, "", "",
                       u + (pruned ? ": left by an interrupted prune; the next prune removes it"
                                   : ": left by an interrupted save (no manifest); it is not a checkpoint"));
  }
}

// Only the fields the caller could compute are compared: `verify --against-env` without a config
// knows the environment (dependencies, container) but not the dataset revision.
void check_pin_drift(const nlohmann::json& recorded, const nlohmann::json& current, VerifyReport& report) {
  nlohmann::json comparable = nlohmann::json::object();
  for (auto it = current.begin(); it != current.end(); ++it) {
    if (recorded.contains(it.key())) comparable[it.key()] = recorded[it.key()];
  }
  for (const DriftItem& item : compare_pins(comparable, current, {}).items) {
    if (item.severity == DriftSeverity::kBlocking) {
      report.add_error(verify_code::kPinsDrift, "", "", item.describe());
    } else {
      report.add_warning(verify_code::kEnvironmentDrift, "", "", item.describe());
    }
  }
}

// The manifest's own digest covers what no shard check reads (config, pins, extra, step...).
void check_manifest_digest(const ManifestDigest* digest, const std::string& manifest_path,
                           VerifyReport& report) {
  if (!digest->present) {
    report.add_warning(
        verify_code::kManifestDigestMissing, "", "",
        manifest_path + ": no " + kManifestDigestField +
            " (written by an older version): edits to its config, pins or extra cannot be detected");
  } else if (!digest->matches()) {
    report.add_error(verify_code::kManifestDigestMismatch, "", "",
                     manifest_path + ": " + kManifestDigestField + " mismatch: recorded " + digest->recorded +
                         ", content hashes to " + digest->computed + " (edited after commit)");
  }
}

Result<VerifyReport> verify_one(const std::string& raw_dir, const VerifyOptions& options,
                                bool list_leftovers) {
  const auto start = std::chrono::steady_clock::now();
  if (!options.pubkey_path.empty()) CKPT_RETURN_IF_ERROR(check_public_key(options.pubkey_path));
  const std::string dir = strip_trailing_slashes(raw_dir);
  VerifyReport report;
  report.path = dir;
  report.kind = checkpoint_kind_name(CheckpointKind::kCkptcheck);
  if (list_leftovers) report_uncommitted(dir, report);
  const std::string manifest_path = dir + "/" + kManifestFileName;
  if (!path_exists(manifest_path)) {
    report.add_error(verify_code::kManifestMissing, "", "",
                     manifest_path + ": missing; the checkpoint was never committed");
    report.seconds = seconds_since(start);
    return report;
  }
  auto text = read_small_file(manifest_path, kMaxManifestBytes);
  if (!text.is_ok()) {
    report.add_error(verify_code::kManifestInvalid, "", "", text.status().message());
    report.seconds = seconds_since(start);
    return report;
  }
  if (!options.pubkey_path.empty())
    check_detached_signature(dir + "/" + kSignatureFileName, *text, options.pubkey_path, report);
  ManifestDigest digest;  // from the same parse: a manifest of 320,000 chunks is 36 MB of JSON
  auto manifest = parse_manifest(*text, manifest_path, &digest);
  if (!manifest.is_ok()) {
    if (!report_unsafe_shard_paths(*text, report)) {
      report.add_error(verify_code::kManifestInvalid, "", "", manifest.status().message());
    }
    report.seconds = seconds_since(start);
    return report;
  }
  // Parsed, the text is not read again: its bytes (84 MB at 320k chunks) and the parse's go back to
  // the system instead of adding to the peak while the headers are read (issue 44). A version-2
  // text lists no chunk (~25x smaller): releasing would only turn the heap's huge pages into 4 KiB
  // ones, a fault each for the chunk records read from the headers next.
  const bool text_was_large = manifest->chunk_records == ChunkRecords::kInManifest;
  std::string().swap(*text);
  if (text_was_large) release_freed_heap();
  check_manifest_digest(&digest, manifest_path, report);
  report.step = manifest->step;
  // step_00000008/ holding step 4's manifest: a copy put in the wrong place, which a resume from
  // `latest` would take for step 8.
  if (const int64_t named = step_from_dir_name(base_name(dir)); named >= 0 && named != manifest->step) {
    report.add_error(verify_code::kStepDirMismatch, "", "",
                     dir + ": the folder is named for step " + std::to_string(named) +
                         " but its manifest is step " + std::to_string(manifest->step) +
                         ": a checkpoint copied into another step's place");
  }
  report.shards = manifest->shards.size();
  report.tensors = manifest->tensors.size();
  // Version 2: the chunks are the headers', each shard's read (and its digest checked) in parallel.
  const std::vector<ShardHeaderChunks> header_reads =
      manifest->chunk_records == ChunkRecords::kInShardHeaders
          ? add_chunks_from_shard_headers(dir, *manifest, options.jobs)
          : std::vector<ShardHeaderChunks>{};
  // A header that could not be read leaves its chunks unknown: each of its tensors would be
  // reported uncovered beside the shard's own error, which says what is wrong.
  const bool all_chunks_known =
      std::none_of(header_reads.begin(), header_reads.end(),
                   [](const ShardHeaderChunks& r) { return r.problem != ShardHeaderChunks::Problem::kNone; });
  const size_t errors_before_coverage = report.errors.size();
  if (all_chunks_known) {
    for (const auto& t : manifest->tensors) check_chunk_coverage(t, report);
  }
  const bool chunks_consistent = all_chunks_known && report.errors.size() == errors_before_coverage;
  std::vector<bool> headers_matched;
  CKPT_RETURN_IF_ERROR(
      check_shards(dir, *manifest, options, chunks_consistent, header_reads, report, &headers_matched));
  check_resume_state(dir, *manifest, headers_matched, report);
  report_unlisted_files(dir, *manifest, report);
  if (!options.current_pins.is_null()) check_pin_drift(manifest->pins, options.current_pins, report);
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace

void add_nonfinite_error(VerifyReport& report, const std::string& shard, const std::string& tensor,
                         DType dtype, const std::vector<int64_t>& shape, const NonfiniteCount& count) {
  if (!count.any()) return;
  report.add_error(verify_code::kNonfiniteValues, shard, tensor,
                   std::to_string(count.nan) + " NaN and " + std::to_string(count.inf) + " Inf of " +
                       std::to_string(checked_numel(shape).value_or(0)) + " " + dtype_name(dtype) +
                       " elements");
}

Result<std::vector<ShareUnit>> plan_verify_shares(const std::string& checkpoint_dir, size_t tasks,
                                                  size_t threads_per_task) {
  CKPT_ASSIGN_OR_RETURN(Manifest manifest, read_manifest_file(checkpoint_dir));
  ScanPlan plan;
  const size_t threads = std::max<size_t>(1, tasks) * resolve_jobs(threads_per_task, SIZE_MAX);
  VerifyReport coverage;  // as verify_one plans: the same units whichever way a header is read
  for (const auto& t : manifest.tensors) check_chunk_coverage(t, coverage);
  // read_manifest_file read a version-2 manifest's headers, and refuses one it could not read.
  const std::vector<ShardHeaderChunks> header_reads(
      manifest.chunk_records == ChunkRecords::kInShardHeaders ? manifest.shards.size() : 0);
  plan_scan(strip_trailing_slashes(checkpoint_dir), manifest, false, threads, threads_per_task,
            coverage.errors.empty(), header_reads, plan);
  std::vector<uint64_t> sizes;
  for (const ScanTask& job : plan.jobs) sizes.push_back(job.scanner->unit_size(job.unit));
  const std::vector<int> owners = split_by_size(sizes, static_cast<int>(std::max<size_t>(1, tasks)));
  std::vector<ShareUnit> out;
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    const ScanTask& job = plan.jobs[j];
    out.push_back({job.scanner->path(), job.scanner->unit_begin(job.unit),
                   job.scanner->unit_begin(job.unit) + sizes[j], owners[j]});
  }
  for (auto& check : plan.checks) (void)check->finish();
  return out;
}

Result<VerifyReport> verify_checkpoint(const std::string& checkpoint_dir, const VerifyOptions& options) {
  return verify_one(checkpoint_dir, options, /*list_leftovers=*/true);
}

namespace {

// Whether a seal's verification found it vouching for every file: none unlisted, and the seal valid.
bool seal_lists_every_file(const VerifyReport& seal) {
  const auto unvouched = [](const VerifyIssue& i) {
    return i.code == verify_code::kSealUnlistedFile || i.code == verify_code::kSealInvalid;
  };
  return std::none_of(seal.errors.begin(), seal.errors.end(), unvouched) &&
         std::none_of(seal.warnings.begin(), seal.warnings.end(), unvouched);
}

// The checks of a kind other than ckptcheck's own, with the seal's beside them when one covers the
// checkpoint. The seal hashes every byte, so the kind's checks then skip the payload (as --quick).
Result<VerifyReport> verify_foreign_kind(const VerifyTarget& target, const VerifyOptions& options) {
  const std::string& path = target.path;
  const CheckpointKind kind = target.kind;
  const std::string sealed_path =
      target.match && target.match->defect.is_ok() ? seal_subject_of(*target.match, path) : path;
  const bool sealed = has_seal(sealed_path);
  // Distributed, the seal's file pieces are what the tasks split: without one there is nothing to
  // hash but the kind's own structure (and its CRCs), which one task checks as fast.
  if (options.distributed && options.distributed->world_size() > 1 && !sealed) {
    return Status::not_supported(
        std::string(
            "--distributed: splits the hashing of ckptcheck's own checkpoints and of sealed ones; this ") +
        checkpoint_kind_name(kind) + " checkpoint has no seal: run `ckptcheck seal " + sealed_path +
        "` first, or verify it without --distributed");
  }
  // The seal first: where it lists every file, its hashes cover every byte and the kind's checks skip
  // the payload (as --quick). A file it does not list (added since, or a seal of nothing) gets the
  // kind's own checks in full (CRC-32, NaN/Inf), as an unsealed checkpoint's would.
  std::optional<VerifyReport> seal;
  if (sealed) {
    CKPT_ASSIGN_OR_RETURN(seal, verify_sealed(sealed_path, options));
  }
  VerifyOptions kind_options = options;
  kind_options.quick = options.quick || (seal && seal_lists_every_file(*seal));
  VerifyReport report;
  switch (kind) {
    case CheckpointKind::kDcp:
    case CheckpointKind::kMegatronTorchDist: {
      report = verify_dcp_dir(path, kind_options);
      // Every other pickle in the folder passes the gate too (a stray extra.pt beside the .distcp
      // files), though dcp.load never reads it: torch.load of it would run its code.
      std::vector<std::string> listed;
      if (target.match) {
        for (const LayoutFile& f : target.match->files) {
          if (f.role != FileRole::kOther) listed.push_back(f.name);
        }
      }
      check_pickles_under(path, 1, kind_options, report, listed);
      break;
    }
    case CheckpointKind::kModelFolder:
      report = verify_foreign_dir(path, kind_options);
      check_pickles_under(path, 2, kind_options, report);  // verify_foreign_dir read the top level
      break;
    case CheckpointKind::kSafetensorsIndex: report = verify_safetensors_index(path, kind_options); break;
    case CheckpointKind::kHfTrainer:
    case CheckpointKind::kAccelerate:
    case CheckpointKind::kDeepSpeed: {
      if (!target.match || !target.match->defect.is_ok()) {  // DeepSpeed's `latest` naming nothing
        report.path = path;
        report.add_error(verify_code::kShardMissing, "", "",
                         target.match ? target.match->defect.message() : path + ": no trainer folder");
        break;
      }
      const TrainerLayout layout = trainer_layout_of(*target.match);
      report = verify_trainer_folder(layout, kind_options);
      std::vector<std::string> listed;  // judged with their loaders (DeepSpeed's tag, FSDP's DCP folders)
      for (const LayoutFile& f : layout.files) listed.push_back(f.name);
      check_pickles_under(layout.dir, 2, kind_options, report, listed);  // nested folders it does not list
      break;
    }
    case CheckpointKind::kAmbiguous:
      // Two layouts claim the path (layouts/layout_registry.h): the registry's message names both.
      report.path = path;
      report.add_error(verify_code::kReadingAmbiguous, "", "", target.refusal.message());
      break;
    case CheckpointKind::kSealedDirectory:
      // Only its seal describes it; its torch.save files still pass the pickle gate.
      report.path = path;
      check_pickles_under(path, 1, kind_options, report);
      break;
    default: report = verify_foreign_file(path, kind_options); break;
  }
  if (sealed) {
    report.shards = std::max(report.shards, seal->shards);
    report.tensors = std::max(report.tensors, seal->tensors);
    report.seconds += seal->seconds;
    merge_report(std::move(*seal), report);
  } else {
    if (!options.pubkey_path.empty()) {
      report.add_error(verify_code::kSignatureMissing, "", "",
                       path + ": --pubkey needs a signed seal and this " + checkpoint_kind_name(kind) +
                           " checkpoint has none (run `ckptcheck seal " + sealed_path +
                           "`, then `ckptcheck sign`)");
    }
    // A layout's defect (a resume would fail before any byte is read) leaves nothing to seal yet.
    if (!target.match || target.match->defect.is_ok())
      report.add_warning(verify_code::kNotSealed, "", "",
                         path + ": no seal: only structural checks ran; run `ckptcheck seal " + sealed_path +
                             "` after saving to record hashes that verify can check");
  }
  report.sealed = sealed;
  return report;
}

}  // namespace

Result<VerifyReport> verify_path(const std::string& raw_path, const VerifyOptions& options) {
  Result<VerifyTarget> resolved = resolve_verify_target(raw_path);
  if (!resolved.is_ok()) return with_what_to_pass(raw_path, "verify", resolved.status());
  const VerifyTarget target = *resolved;
  // A file no reader knows and no seal covers is not a checkpoint: a usage error (exit 2) that
  // says what the file is, as inspect says it, and nothing to seal.
  if (target.kind == CheckpointKind::kUnknownFile && !has_seal(target.path)) {
    auto opened = open_tensor_file(target.path);
    if (!opened.is_ok() && !is_damage(opened.status()))
      return with_what_to_pass(target.path, "verify", opened.status());
  }
  // An unreadable key is a usage error whatever the checkpoint turns out to be.
  if (!options.pubkey_path.empty()) CKPT_RETURN_IF_ERROR(check_public_key(options.pubkey_path));
  CKPT_RETURN_IF_ERROR(refuse_unhonoured_options(target.kind, options));
  VerifyReport report;
  if (target.kind == CheckpointKind::kCkptcheck) {
    CKPT_ASSIGN_OR_RETURN(report, verify_checkpoint(target.path, options));
    warn_of_newer_checkpoints(raw_path, target.path, report);
  } else {
    CKPT_ASSIGN_OR_RETURN(report, verify_foreign_kind(target, options));
  }
  report.kind = checkpoint_kind_name(target.kind);
  return report;
}

Result<RootVerifyReport> verify_root(const std::string& raw_root, const VerifyOptions& options) {
  const std::string root = strip_trailing_slashes(raw_root);
  if (!is_directory(root)) return Status::io_error(root + ": no such directory");
  CKPT_RETURN_IF_ERROR(refuse_unhonoured_options(CheckpointKind::kCkptcheck, options));
  if (path_exists(root + "/" + kManifestFileName)) {
    return Status::invalid_argument(
        root + ": is a checkpoint; --all takes the checkpoint root that holds step_* dirs");
  }
  const CheckpointListing listing = list_checkpoints(root);
  if (listing.committed.empty()) {
    return Status::not_found(root + ": no committed checkpoint (" +
                             std::to_string(listing.uncommitted.size()) + " uncommitted leftovers)");
  }
  RootVerifyReport out;
  out.root = root;
  out.uncommitted = listing.uncommitted;
  for (const auto& dir : listing.committed) {
    CKPT_ASSIGN_OR_RETURN(VerifyReport r, verify_one(dir, options, /*list_leftovers=*/false));
    out.checkpoints.push_back(std::move(r));
  }
  return out;
}

}  // namespace ckpt
