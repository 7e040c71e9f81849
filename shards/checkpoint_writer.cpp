#include "shards/checkpoint_writer.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <future>
#include <map>

#include "formats/parallel_jobs.h"
#include "formats/shard_formats.h"
#include "shards/checkpoint_dir.h"

namespace ckpt {

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

Manifest manifest_skeleton(const CheckpointMetadata& metadata) {
  Manifest manifest;
  manifest.step = metadata.step;
  manifest.created_utc = utc_timestamp_now();
  manifest.world_size = metadata.world_size;
  manifest.strategy = metadata.strategy;
  manifest.config = metadata.config;
  manifest.pins = metadata.pins;
  manifest.extra = metadata.extra;
  return manifest;
}

void add_written_chunks(Manifest& manifest, size_t shard_index, const std::vector<ChunkInfo>& chunks) {
  for (const ChunkInfo& c : chunks) {
    ManifestTensor* tensor = nullptr;
    for (auto& t : manifest.tensors) {
      if (t.name == c.name) tensor = &t;
    }
    if (!tensor) {
      manifest.tensors.push_back({c.name, c.component, c.dtype, c.global_shape, {}});
      tensor = &manifest.tensors.back();
    }
    tensor->chunks.push_back({shard_index, c.offsets, c.shape, c.data_offset, c.data_bytes, c.sha256});
  }
}

namespace {

Result<WrittenFile> write_one_shard(const ShardFormat& format, const std::string& path,
                                    const std::vector<PlannedChunk>& planned, const std::vector<TensorView>& tensors,
                                    nlohmann::json shard_metadata) {
  std::vector<ChunkPayload> payloads;
  payloads.reserve(planned.size());
  for (const auto& p : planned) payloads.push_back({p.info, tensors[p.tensor].data + p.byte_begin});
  return format.write(path, payloads, shard_metadata);
}

}  // namespace

Result<CommittedCheckpoint> write_checkpoint(const std::string& root, const std::vector<TensorView>& tensors,
                                             const CheckpointMetadata& metadata,
                                             const CheckpointWriteOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const ShardFormat* format = find_shard_format(options.format);
  if (!format) return Status::invalid_argument("unknown shard format '" + options.format + "'");
  for (const auto& t : tensors) {
    auto nbytes = checked_nbytes(t.shape, t.dtype);
    if (!nbytes || *nbytes != t.bytes) {
      return Status::invalid_argument("tensor " + t.name + ": " + std::to_string(t.bytes) + " bytes do not match shape " +
                                      shape_to_string(t.shape));
    }
  }
  const ShardingPlan plan = plan_shards(tensors, options.num_shards, options.split_min_bytes);
  CKPT_ASSIGN_OR_RETURN(auto tx, CheckpointTransaction::begin(root, metadata.step));

  const size_t count = plan.shards.size();
  std::vector<std::string> names(count);
  std::vector<Result<WrittenFile>> results(count, Status::io_error("not written"));
  const size_t jobs = resolve_jobs(options.jobs, count);
  for (size_t first = 0; first < count; first += jobs) {
    std::vector<std::future<Result<WrittenFile>>> running;
    for (size_t i = first; i < std::min(count, first + jobs); ++i) {
      names[i] = shard_file_name(i, count, format->extension);
      nlohmann::json shard_meta = {{"step", metadata.step}, {"shard_index", i}, {"shard_count", count}};
      running.push_back(std::async(std::launch::async, write_one_shard, std::cref(*format), tx.temp_dir() + "/" + names[i],
                                   std::cref(plan.shards[i]), std::cref(tensors), shard_meta));
    }
    for (size_t k = 0; k < running.size(); ++k) {
      const size_t i = first + k;
      results[i] = running[k].get();
      if (results[i].is_ok() && options.on_shard_written) options.on_shard_written(i, results[i]->path);
    }
  }

  Manifest manifest = manifest_skeleton(metadata);
  // Tensors appear in the manifest in their original order, not shard order.
  for (const auto& t : tensors) manifest.tensors.push_back({t.name, t.component, t.dtype, t.shape, {}});
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!results[i].is_ok()) return results[i].status();
    const WrittenFile& w = *results[i];
    manifest.shards.push_back({names[i], format->name, w.bytes, w.sha256, 0, w.sha256_of});
    add_written_chunks(manifest, i, w.chunks);
    total += w.bytes;
  }
  CKPT_RETURN_IF_ERROR(tx.commit(manifest_to_json_text(manifest)));

  CommittedCheckpoint committed;
  committed.dir = tx.final_dir();
  committed.bytes = total;
  committed.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  committed.manifest = std::move(manifest);
  return committed;
}

}  // namespace ckpt
