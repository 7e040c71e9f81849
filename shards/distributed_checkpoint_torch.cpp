#include <chrono>
#include <cstring>
#include <optional>

#include "formats/sha256.h"
#include "formats/shard_formats.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "shards/distributed_checkpoint.h"
#include "shards/reshard_plan.h"
#include "shards/sharding_plan.h"
#include "shards/state_codec.h"

namespace ckpt {

namespace {

using nlohmann::json;

bool rank_owned(const StateTensor& t) {
  return !t.offsets.empty() || t.name.rfind("rng.", 0) == 0;
}

// Parses what a peer rank sent; a malformed report fails the save rather than the process.
Result<ChunkInfo> chunk_from_json(const json& j) {
  try {
    ChunkInfo c;
    c.name = j.at("name").get<std::string>();
    c.component = j.at("component").get<std::string>();
    auto dtype = dtype_from_name(j.at("dtype").get<std::string>());
    if (!dtype) return Status::corruption("rank report: chunk " + c.name + ": unknown dtype");
    c.dtype = *dtype;
    c.global_shape = j.at("global_shape").get<std::vector<int64_t>>();
    c.offsets = j.at("offsets").get<std::vector<int64_t>>();
    c.shape = j.at("shape").get<std::vector<int64_t>>();
    c.data_offset = j.at("data_offset").get<uint64_t>();
    c.data_bytes = j.at("data_bytes").get<uint64_t>();
    c.sha256 = j.at("sha256").get<std::string>();
    return c;
  } catch (const std::exception& e) {
    return Status::corruption(std::string("rank report: malformed chunk: ") + e.what());
  }
}

// The payloads this rank writes: its plan_shards share of the replicated tensors, then its own.
Result<std::vector<ChunkPayload>> my_payloads(const TrainingState& state, int rank, int world,
                                              std::vector<TensorView>* views_storage) {
  TrainingState replicated, owned;
  for (const StateTensor& t : state) (rank_owned(t) ? owned : replicated).push_back(t);
  CKPT_ASSIGN_OR_RETURN(*views_storage, views_of_state(replicated));
  const ShardingPlan plan = plan_shards(*views_storage, static_cast<size_t>(world));
  std::vector<ChunkPayload> payloads;
  for (const PlannedChunk& p : plan.shards[static_cast<size_t>(rank)])
    payloads.push_back({p.info, (*views_storage)[p.tensor].data + p.byte_begin});
  CKPT_ASSIGN_OR_RETURN(auto owned_views, views_of_state(owned));
  for (size_t i = 0; i < owned.size(); ++i) {
    ChunkInfo c;
    c.name = owned[i].name;
    c.component = owned[i].component;
    c.dtype = owned_views[i].dtype;
    c.shape = owned_views[i].shape;
    c.global_shape = owned[i].offsets.empty() ? c.shape : owned[i].global_shape;
    c.offsets = owned[i].offsets.empty() ? std::vector<int64_t>(c.shape.size(), 0) : owned[i].offsets;
    payloads.push_back({c, owned_views[i].data});
  }
  return payloads;
}

// Each rank's outcome as one JSON text: {"ok":..., "error":..., "file":..., ...}.
std::string report_of(const Result<WrittenFile>& w, const std::string& file_name) {
  if (!w.is_ok()) return json{{"ok", false}, {"error", w.status().to_string()}}.dump();
  json chunks = json::array();
  for (const ChunkInfo& c : w->chunks) chunks.push_back(c.to_json());
  return json{
      {"ok", true}, {"file", file_name}, {"bytes", w->bytes}, {"sha256", w->sha256}, {"sha256_of", w->sha256_of}, {"chunks", chunks}}
      .dump();
}

Result<Manifest> merge_reports(const std::vector<std::string>& reports, const CheckpointMetadata& metadata,
                               const std::string& format) {
  Manifest manifest = manifest_skeleton(metadata);
  for (size_t r = 0; r < reports.size(); ++r) {
    const json j = json::parse(reports[r], nullptr, false);
    if (!j.is_object() || !j.contains("ok"))
      return Status::corruption("rank " + std::to_string(r) + ": unreadable save report");
    if (!j["ok"].get<bool>())
      return Status::io_error("rank " + std::to_string(r) +
                              " failed to write its shard: " + j.value("error", std::string("?")));
    std::vector<ChunkInfo> chunks;
    for (const json& c : j.at("chunks")) {
      CKPT_ASSIGN_OR_RETURN(ChunkInfo info, chunk_from_json(c));
      chunks.push_back(std::move(info));
    }
    manifest.shards.push_back({j.at("file").get<std::string>(), format, j.at("bytes").get<uint64_t>(),
                               j.at("sha256").get<std::string>(), static_cast<int64_t>(r),
                               j.at("sha256_of").get<std::string>()});
    add_written_chunks(manifest, r, chunks);
  }
  return manifest;
}

std::string status_text(const Status& s, const std::string& ok_detail) {
  return s.is_ok() ? "OK:" + ok_detail : "ERR:" + s.to_string();
}

}  // namespace

Result<CommittedCheckpoint> save_distributed_checkpoint(const std::string& root, const TrainingState& state,
                                                        const CheckpointMetadata& metadata,
                                                        ProcessGroup& group,
                                                        const DistributedSaveOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const int rank = group.rank(), world = group.world_size();
  const ShardFormat* format = find_shard_format(options.format);
  if (!format) return Status::invalid_argument("unknown shard format '" + options.format + "'");

  // Rank 0 owns the transaction; the others learn its temp dir (or its failure) from the gather.
  std::optional<CheckpointTransaction> tx;
  Status begun = Status::ok();
  if (rank == 0) {
    auto t = CheckpointTransaction::begin(root, metadata.step);
    if (t.is_ok())
      tx.emplace(std::move(*t));
    else
      begun = t.status();
  }
  const std::string announced =
      group.all_gather_bytes(rank == 0 ? status_text(begun, tx ? tx->temp_dir() : "") : "")[0];
  if (announced.rfind("OK:", 0) != 0)
    return Status::io_error("rank 0 could not begin the checkpoint: " + announced.substr(4));
  const std::string temp_dir = announced.substr(3);

  const std::string file_name =
      shard_file_name(static_cast<size_t>(rank), static_cast<size_t>(world), format->extension);
  std::vector<TensorView> views;
  Result<WrittenFile> written = Status::io_error("not written");
  auto payloads = my_payloads(state, rank, world, &views);
  if (!payloads.is_ok()) {
    written = payloads.status();
  } else {
    json meta = {{"step", metadata.step}, {"shard_index", rank}, {"shard_count", world}, {"rank", rank}};
    written = format->write(temp_dir + "/" + file_name, *payloads, meta);
    if (written.is_ok() && options.on_own_shard_written) options.on_own_shard_written(written->path);
  }
  const std::vector<std::string> reports = group.all_gather_bytes(report_of(written, file_name));

  Status committed = Status::ok();
  std::string final_dir;
  Manifest manifest;
  uint64_t total = 0;
  if (rank == 0) {
    auto merged = merge_reports(reports, metadata, format->name);
    if (!merged.is_ok()) {
      committed = merged.status();
    } else {
      manifest = std::move(*merged);
      committed = tx->commit(manifest_to_json_text(manifest));
      final_dir = tx->final_dir();
    }
  }
  const std::string outcome = group.all_gather_bytes(rank == 0 ? status_text(committed, final_dir) : "")[0];
  if (outcome.rfind("OK:", 0) != 0)
    return Status::io_error("checkpoint of step " + std::to_string(metadata.step) +
                            " not committed: " + outcome.substr(4));
  CommittedCheckpoint out;
  out.dir = outcome.substr(3);
  for (const std::string& r : reports) total += json::parse(r, nullptr, false).value("bytes", uint64_t{0});
  out.bytes = total;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.manifest = std::move(manifest);  // filled on rank 0 only
  return out;
}


Result<std::map<std::string, at::Tensor>> load_distributed_state(const std::string& checkpoint_dir,
                                                                 const Manifest& manifest,
                                                                 const TrainingState& layout,
                                                                 ReshardStats* stats) {
  ReshardStats local;
  ReshardStats& st = stats ? *stats : local;
  std::map<size_t, std::unique_ptr<TensorFile>> open_shards;
  std::map<std::string, at::Tensor> out;
  for (const StateTensor& want : layout) {
    const ManifestTensor* t = manifest.find_tensor(want.name);
    if (!t) {
      st.absent.push_back(want.name);
      continue;
    }
    const int64_t rows = t->shape.empty() ? 1 : t->shape[0];
    const int64_t begin = want.offsets.empty() ? 0 : want.offsets[0];
    const int64_t end =
        want.offsets.empty() ? rows : begin + (want.tensor.dim() > 0 ? want.tensor.size(0) : 1);
    CKPT_ASSIGN_OR_RETURN(RowReadPlan plan, plan_row_reads(*t, begin, end));
    std::vector<int64_t> shape = t->shape;
    if (!shape.empty()) shape[0] = end - begin;
    at::Tensor target = at::empty(shape, at::TensorOptions().dtype(scalar_type_of(t->dtype)));
    if (static_cast<uint64_t>(target.nbytes()) != plan.target_bytes)
      return Status::corruption(t->name + ": planned " + std::to_string(plan.target_bytes) +
                                " bytes, tensor holds " + std::to_string(target.nbytes()));
    auto* dst = static_cast<uint8_t*>(target.data_ptr());
    for (const ChunkRead& r : plan.reads) {
      const ManifestChunk& mc = t->chunks[r.chunk];
      auto& shard = open_shards[mc.shard];
      if (!shard) {
        CKPT_ASSIGN_OR_RETURN(shard, open_manifest_shard(checkpoint_dir, manifest, mc.shard));
      }
      const std::string& shard_name = manifest.shards[mc.shard].path;
      size_t index = 0;
      const ChunkInfo* fc = find_file_chunk(*shard, t->name, mc, &index);
      if (!fc)
        return Status::corruption(shard_name + ": has no chunk of " + t->name + " at offsets " +
                                  shape_to_string(mc.offsets));
      if (fc->data_bytes != mc.data_bytes || r.chunk_offset + r.length > fc->data_bytes)
        return Status::corruption(shard_name + ": chunk " + fc->label() + " holds " +
                                  std::to_string(fc->data_bytes) + " bytes, manifest says " +
                                  std::to_string(mc.data_bytes));
      CKPT_RETURN_IF_ERROR(shard->read_chunk(index, r.chunk_offset, dst + r.target_offset, r.length));
      st.bytes_read += r.length;
      if (r.whole_chunk) {
        ++st.whole_chunk_reads;
        const std::string actual = sha256_hex(dst + r.target_offset, r.length);
        if (actual != mc.sha256)
          return Status::corruption(shard_name + " @" + std::to_string(fc->data_offset) +
                                    ": sha256 mismatch for " + fc->label() + ": expected " + mc.sha256 +
                                    " got " + actual);
      } else {
        ++st.partial_chunk_reads;
      }
    }
    out.emplace(want.name, std::move(target));
  }
  return out;
}

}  // namespace ckpt
