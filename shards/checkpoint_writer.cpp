#include "shards/checkpoint_writer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <future>
#include <optional>
#include <unordered_map>

#include "base/json_fields.h"
#include "base/parallel_jobs.h"
#include "base/streaming_file_writer.h"
#include "base/text.h"
#include "formats/shard_formats.h"
#include "shards/checkpoint_dir.h"

namespace ckpt {

using nlohmann::json;

std::string shard_file_name(size_t index, size_t count, const std::string& extension) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "shard-%05zu-of-%05zu", index, count);
  return buf + extension;
}

std::string utc_timestamp_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

Manifest manifest_skeleton(const CheckpointMetadata& metadata) {
  Manifest manifest;
  manifest.step = metadata.step;
  manifest.world_size = metadata.world_size;
  manifest.strategy = metadata.strategy;
  manifest.config = metadata.config;
  manifest.pins = metadata.pins;
  manifest.extra = metadata.extra;
  return manifest;
}

// Each chunk joins its tensor, found by name (the last tensor of that name, as a scan in order
// finds it), and a tensor no rank declared is added. By name through `by_name`: a scan of every
// tensor for every chunk made committing quadratic (326,697 chunks x 26,682 tensors at 320k
// chunks: most of `convert`'s time there, and more at 1M, issue 44).
Status add_written_chunks(Manifest& manifest, std::unordered_map<std::string, size_t>& by_name,
                          size_t shard_index, const std::vector<ChunkInfo>& chunks,
                          const std::string& shard_path) {
  for (const ChunkInfo& c : chunks) {
    // Every writer hashes what it writes; a rank's report that says otherwise commits nothing.
    const std::optional<Sha256Digest> digest = digest_from_hex(c.sha256);
    if (!digest) {
      return Status::corruption(shard_path + ": chunk " + c.label() + " was reported with sha256 " +
                                quoted_for_message(c.sha256) + ", not 64 lowercase hex digits");
    }
    auto [it, added] = by_name.try_emplace(c.name, manifest.tensors.size());
    if (added) manifest.tensors.push_back({c.name, c.component, c.dtype, c.global_shape, {}});
    manifest.tensors[it->second].chunks.push_back(
        {shard_index, c.offsets, c.shape, c.data_offset, c.data_bytes, *digest});
  }
  return Status::ok();
}

// What one rank writes: file i of its own holds the chunks `planned[i]` and, for file 0, the rank's
// own tensors. A file's payload list (a ChunkInfo a chunk) is made when the file is written
// (payloads_of), not for every file up front (issue 44).
struct RankShards {
  size_t first_index = 0;  // global index of this rank's first file
  size_t total = 0;        // files across all ranks
  std::vector<std::vector<PlannedChunk>> planned;
  std::vector<ChunkPayload> rank_tensors;  // in file 0, after its planned chunks
};

RankShards plan_rank_shards(const std::vector<TensorView>& replicated,
                            const std::vector<RankTensor>& rank_tensors,
                            const CheckpointWriteOptions& options, int rank, int world) {
  const size_t per_rank = std::max<size_t>(1, options.num_shards);
  RankShards mine;
  mine.total = per_rank * static_cast<size_t>(world);
  mine.first_index = per_rank * static_cast<size_t>(rank);
  ShardingPlan plan = plan_shards(replicated, mine.total, options.split_min_bytes);
  for (size_t i = 0; i < per_rank; ++i) mine.planned.push_back(std::move(plan.shards[mine.first_index + i]));
  for (const RankTensor& t : rank_tensors) {
    ChunkInfo c;
    c.name = t.view.name;
    c.component = t.view.component;
    c.dtype = t.view.dtype;
    c.shape = t.view.shape;
    c.global_shape = t.offsets.empty() ? c.shape : t.global_shape;
    c.offsets = t.offsets.empty() ? std::vector<int64_t>(c.shape.size(), 0) : t.offsets;
    mine.rank_tensors.push_back({c, t.view.data});
  }
  return mine;
}

// File i's payloads, in write order.
std::vector<ChunkPayload> payloads_of(const RankShards& mine, size_t i,
                                      const std::vector<TensorView>& replicated,
                                      const CheckpointWriteOptions& options) {
  std::vector<ChunkPayload> payloads;
  payloads.reserve(mine.planned[i].size() + (i == 0 ? mine.rank_tensors.size() : 0));
  for (const PlannedChunk& p : mine.planned[i]) {
    const TensorView& t = replicated[p.tensor];
    if (t.data)
      payloads.push_back({planned_chunk_info(p, t), t.data + p.byte_begin});
    else
      payloads.push_back({planned_chunk_info(p, t), nullptr, options.payload_reader, p.tensor, p.byte_begin});
  }
  if (i == 0) payloads.insert(payloads.end(), mine.rank_tensors.begin(), mine.rank_tensors.end());
  return payloads;
}

// Writes this rank's files in parallel. The first failure is returned after every thread ended.
// `add_to_manifest(i, file)`, where given, is handed each file written without a failure before
// it, as soon as it is, in file order: rank 0 moves the file's chunk list into the manifest then
// (ManifestMerge, which keeps any failure of its own for the merge to report).
Result<std::vector<WrittenFile>> write_rank_shards(
    const ShardFormat& format, const std::string& temp_dir, RankShards& mine,
    const std::vector<TensorView>& replicated, const CheckpointMetadata& metadata, int rank,
    const CheckpointWriteOptions& options, const std::function<void(size_t, WrittenFile&)>& add_to_manifest) {
  const size_t count = mine.planned.size();
  const WriteBufferReuse reuse;  // each file's writer takes the buffers the last one let go of
  std::vector<Result<WrittenFile>> results(count, Status::io_error("not written"));
  const size_t jobs = resolve_jobs(options.jobs, count);
  bool all_written = true;  // files 0..i: the manifest takes files in order, and only while none failed
  for (size_t first = 0; first < count; first += jobs) {
    std::vector<std::future<Result<WrittenFile>>> running;
    for (size_t i = first; i < std::min(count, first + jobs); ++i) {
      const size_t index = mine.first_index + i;
      json shard_meta = {{"step", metadata.step}, {"shard_index", index}, {"shard_count", mine.total}};
      if (metadata.world_size > 1) shard_meta["rank"] = rank;
      const std::string path = temp_dir + "/" + shard_file_name(index, mine.total, format.extension);
      running.push_back(
          std::async(std::launch::async, [&format, path, &mine, &replicated, &options, i, shard_meta] {
            return format.write(path, payloads_of(mine, i, replicated, options), shard_meta);
          }));
    }
    for (size_t k = 0; k < running.size(); ++k) {
      const size_t i = first + k;
      results[i] = running[k].get();
      std::vector<PlannedChunk>().swap(mine.planned[i]);
      all_written = all_written && results[i].is_ok();
      if (all_written && add_to_manifest) add_to_manifest(i, *results[i]);
      if (results[i].is_ok() && options.on_shard_written) options.on_shard_written(i, results[i]->path);
    }
  }
  std::vector<WrittenFile> written;
  for (auto& r : results) {
    if (!r.is_ok()) return r.status();
    written.push_back(std::move(*r));
  }
  return written;
}

// A rank's outcome as one JSON text: {"ok": false, "error": ...} or {"ok": true, "files": [...]}.
// Rank 0 adds its own files to the manifest from what it holds (ManifestMerge), so its report leaves out
// their chunks: at 320,000 chunks writing them as JSON and parsing them back was a third of `convert` (issue
// 44). The other ranks read only the files' bytes from it.
std::string report_of(const Result<std::vector<WrittenFile>>& written, const RankShards& mine,
                      const std::string& extension, bool with_chunks) {
  if (!written.is_ok()) return json{{"ok", false}, {"error", written.status().to_string()}}.dump();
  json files = json::array();
  for (size_t i = 0; i < written->size(); ++i) {
    const WrittenFile& w = (*written)[i];
    json file = {{"index", mine.first_index + i},
                 {"file", shard_file_name(mine.first_index + i, mine.total, extension)},
                 {"bytes", w.bytes},
                 {"sha256", w.sha256},
                 {"sha256_of", w.sha256_of}};
    if (with_chunks) {
      json chunks = json::array();
      for (const ChunkInfo& c : w.chunks) chunks.push_back(c.to_json());
      file["chunks"] = std::move(chunks);
    }
    files.push_back(std::move(file));
  }
  return json{{"ok", true}, {"files", files}}.dump();
}

// Rank 0's manifest in the making. Its own files join as each is written (add_own_file, from
// write_rank_shards): a written file's chunk list is ~230 bytes a chunk and its strings, made in a
// writer thread's heap, against 136 bytes a manifest record; held for every file until the merge,
// the lists were most of `convert`'s peak at 320k chunks (issue 44). The other ranks' files join
// from their reports (merge_reports). Tensors keep rank 0's state order (in a world of one: the
// caller's order); what only other ranks hold follows in report order.
class ManifestMerge {
 public:
  ManifestMerge(const CheckpointMetadata& metadata, const ShardFormat& format,
                const std::vector<TensorView>& replicated, const std::vector<RankTensor>& rank_tensors,
                size_t per_rank)
      : manifest_(manifest_skeleton(metadata)), format_(format), per_rank_(per_rank) {
    for (const TensorView& t : replicated)
      manifest_.tensors.push_back({t.name, t.component, t.dtype, t.shape, {}});
    for (const RankTensor& t : rank_tensors) {
      manifest_.tensors.push_back({t.view.name,
                                   t.view.component,
                                   t.view.dtype,
                                   t.offsets.empty() ? t.view.shape : t.global_shape,
                                   {}});
    }
    by_name_.reserve(manifest_.tensors.size());
    for (size_t i = 0; i < manifest_.tensors.size(); ++i) by_name_[manifest_.tensors[i].name] = i;
  }

  // File `index` (global), in index order.
  Status add_file(ManifestShard shard, uint64_t index, const std::vector<ChunkInfo>& chunks,
                  const std::string& where) {
    shard.format = format_.name;
    shard.rank = static_cast<int64_t>(index / per_rank_);
    if (index != manifest_.shards.size())
      return Status::corruption(where + ": file index " + std::to_string(index) + ", expected " +
                                std::to_string(manifest_.shards.size()));
    total_ += shard.bytes;
    manifest_.shards.push_back(std::move(shard));
    return add_written_chunks(manifest_, by_name_, index, chunks, manifest_.shards.back().path);
  }

  // Rank 0's own file `i` of `own`, as written; its chunk list is let go once in the manifest. The
  // first failure is kept for merge_reports, which reports it where the merge of rank 0's files
  // did before they were added during the write; later files are not added.
  void add_own_file(const RankShards& own, size_t i, WrittenFile& file) {
    if (own_files_.is_ok()) {
      const size_t index = own.first_index + i;
      ManifestShard shard;
      shard.path = shard_file_name(index, own.total, format_.extension);
      shard.bytes = file.bytes;
      shard.sha256 = file.sha256;
      shard.sha256_of = file.sha256_of;
      own_files_ = add_file(std::move(shard), index, file.chunks, "rank 0 save report");
    }
    std::vector<ChunkInfo>().swap(file.chunks);
  }
  const Status& own_files() const { return own_files_; }

  Manifest& manifest() { return manifest_; }
  uint64_t total_bytes() const { return total_; }

 private:
  Manifest manifest_;
  std::unordered_map<std::string, size_t> by_name_;
  const ShardFormat& format_;
  size_t per_rank_;
  uint64_t total_ = 0;
  Status own_files_;
};

// Rank 0: every other rank's report into the manifest (rank 0's own files are in it already,
// and its report leaves out their chunks).
Status merge_reports(const std::vector<std::string>& reports, ManifestMerge& merge) {
  for (size_t r = 0; r < reports.size(); ++r) {
    const std::string where = "rank " + std::to_string(r) + " save report";
    CKPT_ASSIGN_OR_RETURN(json j, parse_json(reports[r], where));
    if (!j.is_object() || !j.contains("ok") || !j["ok"].is_boolean())
      return Status::corruption(where + ": unreadable");
    if (!j["ok"].get<bool>())
      return Status::io_error("rank " + std::to_string(r) +
                              " failed to write its shard: " + j.value("error", std::string("?")));
    if (r == 0) {
      CKPT_RETURN_IF_ERROR(merge.own_files());
      continue;
    }
    CKPT_ASSIGN_OR_RETURN(const json* files, json_array(j, "files", where));
    for (const json& f : *files) {
      ManifestShard shard;
      CKPT_ASSIGN_OR_RETURN(uint64_t index, json_uint(f, "index", where));
      CKPT_ASSIGN_OR_RETURN(shard.path, json_string(f, "file", where));
      CKPT_ASSIGN_OR_RETURN(shard.bytes, json_uint(f, "bytes", where));
      CKPT_ASSIGN_OR_RETURN(shard.sha256, json_string(f, "sha256", where));
      CKPT_ASSIGN_OR_RETURN(shard.sha256_of, json_string(f, "sha256_of", where));
      CKPT_ASSIGN_OR_RETURN(const json* chunk_list, json_array(f, "chunks", where));
      std::vector<ChunkInfo> chunks;
      for (const json& c : *chunk_list) {
        CKPT_ASSIGN_OR_RETURN(ChunkInfo info, ChunkInfo::from_json(c, where + " " + shard.path));
        chunks.push_back(std::move(info));
      }
      CKPT_RETURN_IF_ERROR(merge.add_file(std::move(shard), index, chunks, where));
    }
  }
  return Status::ok();
}

// A failed save removes its temp dir, so the space it took (maybe the space that ran out) comes
// back, and says so.
Status abandoned(CheckpointTransaction& tx, const Status& why) {
  const Status removed = tx.abandon();
  return why.with_note(removed.is_ok() ? "removed the partial checkpoint " + tx.temp_dir()
                                       : "could not remove the partial checkpoint: " + removed.message());
}

// "OK:<detail>" or "ERR:<status>": how rank 0 tells the others what happened.
std::string outcome_text(const Status& s, const std::string& ok_detail) {
  return s.is_ok() ? "OK:" + ok_detail : "ERR:" + s.to_string();
}

}  // namespace

Result<CommittedCheckpoint> write_checkpoint(const std::string& root,
                                             const std::vector<TensorView>& replicated,
                                             const std::vector<RankTensor>& rank_tensors,
                                             const CheckpointMetadata& metadata,
                                             const CheckpointWriteOptions& options, ByteCollective& group) {
  const auto start = std::chrono::steady_clock::now();
  const int rank = group.rank(), world = group.world_size();
  // 1. Every rank checks its input; rank 0 also begins the transaction (a temp dir). One gather
  //    tells everyone the temp dir, or who failed and why: no rank returns before the others know,
  //    so a bad input on one rank cannot leave the rest blocked in a later collective.
  const ShardFormat* format = find_shard_format(options.format);
  Status ready =
      format ? Status::ok() : Status::invalid_argument("unknown shard format '" + options.format + "'");
  for (const auto& t : replicated) {
    auto nbytes = checked_nbytes(t.shape, t.dtype);
    if (ready.is_ok() && (!nbytes || *nbytes != t.bytes)) {
      ready = Status::invalid_argument("tensor " + t.name + ": " + std::to_string(t.bytes) +
                                       " bytes do not match shape " + shape_to_string(t.shape));
    }
    if (ready.is_ok() && !t.data && t.bytes != 0 && !options.payload_reader)
      ready = Status::invalid_argument("tensor " + t.name + ": no bytes and no payload reader");
  }
  std::optional<CheckpointTransaction> tx;
  if (rank == 0 && ready.is_ok()) {
    auto t = CheckpointTransaction::begin(root, metadata.step);
    if (t.is_ok())
      tx.emplace(std::move(*t));
    else
      ready = t.status();
  }
  const std::vector<std::string> announced =
      group.all_gather_bytes(outcome_text(ready, tx ? tx->temp_dir() : ""));
  if (!ready.is_ok()) return ready;
  for (size_t r = 0; r < announced.size(); ++r) {
    if (announced[r].rfind("OK:", 0) != 0)
      return Status::io_error("rank " + std::to_string(r) +
                              " could not begin the checkpoint: " + announced[r].substr(4));
  }
  const std::string temp_dir = announced[0].substr(3);

  // 2. This rank's files.
  RankShards mine = plan_rank_shards(replicated, rank_tensors, options, rank, world);
  std::optional<ManifestMerge> merge;
  std::function<void(size_t, WrittenFile&)> add_to_manifest;
  if (rank == 0) {
    merge.emplace(metadata, *format, replicated, rank_tensors, std::max<size_t>(1, options.num_shards));
    add_to_manifest = [&](size_t i, WrittenFile& file) { merge->add_own_file(mine, i, file); };
  }
  Result<std::vector<WrittenFile>> written =
      write_rank_shards(*format, temp_dir, mine, replicated, metadata, rank, options, add_to_manifest);

  // 3. Every rank's report.
  const std::vector<std::string> reports =
      group.all_gather_bytes(report_of(written, mine, format->extension, /*with_chunks=*/rank != 0));

  // 4. Rank 0 merges and commits; its own failure is returned as it is.
  Status committed = written.status();
  std::string final_dir;
  Manifest manifest;
  uint64_t total = 0;
  if (rank == 0) {
    if (committed.is_ok()) {
      merge->manifest().created_utc = utc_timestamp_now();  // stamped as the reports merge, as always
      const Status merged = merge_reports(reports, *merge);
      total = merge->total_bytes();
      if (!merged.is_ok()) {
        committed = merged;
      } else if (options.before_commit) {
        committed = options.before_commit();
      }
      if (committed.is_ok()) {
        manifest = std::move(merge->manifest());
        merge.reset();  // its name index, before the text is made
        const bool in_headers =
            std::all_of(manifest.shards.begin(), manifest.shards.end(), holds_chunks_in_header);
        manifest.chunk_records = options.chunk_records == ChunkRecords::kInShardHeaders && in_headers
                                     ? ChunkRecords::kInShardHeaders
                                     : ChunkRecords::kInManifest;
        const std::string text = manifest_to_json_text(manifest);
        // Never commit a checkpoint the readers would refuse to open.
        committed = text.size() <= kMaxManifestBytes
                        ? tx->commit(text)
                        : Status::invalid_argument("step " + std::to_string(metadata.step) +
                                                   ": manifest.json would be " + std::to_string(text.size()) +
                                                   " bytes, above the readers' limit of " +
                                                   std::to_string(kMaxManifestBytes) +
                                                   " (fewer, larger chunks: a higher split size)");
        final_dir = tx->final_dir();
      }
    }
    // Every rank has finished writing (its report is in), so the temp dir can go.
    if (!committed.is_ok()) committed = abandoned(*tx, committed);
  }
  const std::string outcome = group.all_gather_bytes(rank == 0 ? outcome_text(committed, final_dir) : "")[0];
  if (rank == 0 && !committed.is_ok()) return committed;
  if (!written.is_ok()) return written.status();
  if (outcome.rfind("OK:", 0) != 0)
    return Status::io_error("checkpoint of step " + std::to_string(metadata.step) +
                            " not committed: " + outcome.substr(4));
  CommittedCheckpoint out;
  out.dir = outcome.substr(3);
  for (size_t r = 0; rank != 0 && r < reports.size(); ++r) {
    const json j = json::parse(reports[r], nullptr, false);
    if (j.is_object() && j.contains("files") && j["files"].is_array())
      for (const json& f : j["files"]) total += f.value("bytes", uint64_t{0});
  }
  out.bytes = total;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.manifest = std::move(manifest);
  return out;
}

Result<CommittedCheckpoint> write_checkpoint(const std::string& root, const std::vector<TensorView>& tensors,
                                             const CheckpointMetadata& metadata,
                                             const CheckpointWriteOptions& options) {
  SingleProcess self;
  return write_checkpoint(root, tensors, {}, metadata, options, self);
}

}  // namespace ckpt
