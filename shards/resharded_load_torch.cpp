#include "shards/resharded_load_torch.h"

#include "base/sha256.h"
#include "shards/checkpoint_reader.h"
#include "shards/reshard_plan.h"
#include "shards/state_codec_torch.h"

namespace ckpt {

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
        CKPT_ASSIGN_OR_RETURN(
            shard, open_manifest_shard(checkpoint_dir, manifest, mc.shard, ShardOpening::kForLoad));
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
        const Sha256Digest actual = sha256_digest(dst + r.target_offset, r.length);
        if (actual != mc.sha256)
          return Status::corruption(shard_name + " @" + std::to_string(fc->data_offset) +
                                    ": sha256 mismatch for " + fc->label() + ": expected " +
                                    digest_hex(mc.sha256) + " got " + digest_hex(actual));
      } else {
        ++st.partial_chunk_reads;
      }
    }
    out.emplace(want.name, std::move(target));
  }
  return out;
}

}  // namespace ckpt
