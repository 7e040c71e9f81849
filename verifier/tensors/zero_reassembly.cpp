#include "verifier/tensors/zero_reassembly.h"

#include <algorithm>
#include <cstring>

namespace ckpt {

namespace {

// One rank's partition of one group: the chunk holding it in the rank's file.
struct Partition {
  const TensorFile* file = nullptr;
  size_t chunk = 0;
  uint64_t elements = 0;
};

// Where one parameter's element range lies: `count` fp32 elements of `rank`'s partition of its
// group, from element `at`.
struct Piece {
  size_t rank;
  uint64_t at, count;
};

class ZeroReassembled final : public TensorFile {
 public:
  ZeroReassembled(std::string where, std::vector<std::vector<Partition>> parts, std::vector<ChunkInfo> chunks,
                  std::vector<size_t> group_of, std::vector<std::vector<Piece>> pieces)
      : where_(std::move(where)),
        parts_(std::move(parts)),
        chunks_(std::move(chunks)),
        group_of_(std::move(group_of)),
        pieces_(std::move(pieces)) {}

  const std::string& path() const override { return where_; }
  const char* format_name() const override { return "zero_fp32"; }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }

  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override {
    CKPT_RETURN_IF_ERROR(check_chunk_read(where_, chunks_, index, offset, length));
    const size_t g = group_of_[index];
    auto* dst = static_cast<uint8_t*>(out);
    uint64_t element = 0;  // of the parameter, where the current piece starts
    for (const Piece& p : pieces_[index]) {
      const uint64_t begin = element * 4, end = (element + p.count) * 4;
      element += p.count;
      if (end <= offset || begin >= offset + length) continue;
      const uint64_t from = std::max<uint64_t>(begin, offset), to = std::min<uint64_t>(end, offset + length);
      const Partition& part = parts_[p.rank][g];
      CKPT_RETURN_IF_ERROR(
          part.file->read_chunk(part.chunk, p.at * 4 + (from - begin), dst + (from - offset), to - from));
    }
    return Status::ok();
  }

 private:
  std::string where_;
  std::vector<std::vector<Partition>> parts_;  // [rank][group]
  std::vector<ChunkInfo> chunks_;
  std::vector<size_t> group_of_;
  std::vector<std::vector<Piece>> pieces_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

bool partition_index(const std::string& name, bool* stage3, size_t* group) {
  for (const char* key : {"single_partition_of_fp32_groups.", "fp32_flat_groups."}) {
    const size_t at = name.find(key);
    if (at == std::string::npos) continue;
    const std::string index = name.substr(at + std::strlen(key));
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos)
      continue;
    *stage3 = std::strcmp(key, "fp32_flat_groups.") == 0;
    *group = std::stoul(index);
    return true;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<TensorFile>> reassemble_zero_fp32(const std::vector<const TensorFile*>& rank_files,
                                                         const nlohmann::json& param_shapes,
                                                         const nlohmann::json& shared_params,
                                                         const std::vector<std::string>& module_order,
                                                         const std::string& where) {
  const auto rank_in_module = [&](const std::string& name) {
    const auto it = std::find(module_order.begin(), module_order.end(), name);
    return static_cast<size_t>(it - module_order.begin());  // unknown names last, by name
  };
  const size_t world = rank_files.size();
  if (world == 0 || !param_shapes.is_array()) return Status::not_found(where + ": no ZeRO partitions");
  const size_t groups = param_shapes.size();
  std::vector<std::vector<Partition>> parts(world, std::vector<Partition>(groups));
  bool stage3 = false;
  for (size_t r = 0; r < world; ++r) {
    for (size_t c = 0; c < rank_files[r]->chunks().size(); ++c) {
      const ChunkInfo& info = rank_files[r]->chunks()[c];
      size_t g = 0;
      if (!partition_index(info.name, &stage3, &g) || g >= groups) continue;
      if (info.dtype != DType::kF32) return Status::not_supported(where + ": " + info.name + " is not fp32");
      parts[r][g] = {rank_files[r], c, info.data_bytes / 4};
    }
    for (size_t g = 0; g < groups; ++g) {
      if (!parts[r][g].file)
        return Status::corruption(where + ": rank " + std::to_string(r) + " has no partition of group " +
                                  std::to_string(g));
    }
  }
  std::vector<ChunkInfo> chunks;
  std::vector<size_t> group_of;
  std::vector<std::vector<Piece>> pieces;
  for (size_t g = 0; g < groups; ++g) {
    if (!param_shapes[g].is_object())
      return Status::corruption(where + ": param_shapes[" + std::to_string(g) + "]");
    uint64_t slice = 0;  // stage 1/2: every rank's slice is this long but the last ones'
    for (size_t r = 0; r < world; ++r) slice = std::max(slice, parts[r][g].elements);
    uint64_t flat = 0, stage3_offset = 0;  // where the parameter starts: in the group, in each rank's group
    std::vector<std::pair<std::string, nlohmann::json>> ordered;
    for (const auto& item : param_shapes[g].items()) ordered.emplace_back(item.key(), item.value());
    std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) {
      return rank_in_module(a.first) < rank_in_module(b.first);
    });
    for (const auto& [name, shape_json] : ordered) {
      ChunkInfo c;
      c.name = "zero_fp32/" + name;
      c.component = "model";
      c.dtype = DType::kF32;
      uint64_t numel = 1;
      for (const auto& d : shape_json) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          return Status::corruption(where + ": shape of " + name);
        c.shape.push_back(d.get<int64_t>());
        numel *= d.get<uint64_t>();
      }
      c.global_shape = c.shape;
      c.offsets.assign(c.shape.size(), 0);
      c.data_bytes = numel * 4;
      std::vector<Piece> ps;
      if (stage3) {
        const uint64_t q = (numel + world - 1) / world;
        for (size_t r = 0; r < world && r * q < numel; ++r) {
          const uint64_t count = std::min<uint64_t>(q, numel - r * q);
          if (stage3_offset + count > parts[r][g].elements)
            return Status::corruption(where + ": rank " + std::to_string(r) +
                                      "'s partition is too short for " + name);
          ps.push_back({r, stage3_offset, count});
        }
        stage3_offset += q;
      } else {
        for (uint64_t e = flat; e < flat + numel;) {
          const size_t r = slice ? static_cast<size_t>(e / slice) : 0;
          if (r >= world || e - r * slice >= parts[r][g].elements)
            return Status::corruption(where + ": the partitions end before " + name);
          const uint64_t count = std::min<uint64_t>(flat + numel - e, parts[r][g].elements - (e - r * slice));
          ps.push_back({r, e - r * slice, count});
          e += count;
        }
        flat += numel;
      }
      chunks.push_back(std::move(c));
      group_of.push_back(g);
      pieces.push_back(std::move(ps));
    }
  }
  // Tied parameters: the second name reads the first one's bytes.
  if (shared_params.is_object()) {
    for (const auto& [alias, target] : shared_params.items()) {
      if (!target.is_string()) continue;
      for (size_t i = 0; i < chunks.size(); ++i) {
        if (chunks[i].name != "zero_fp32/" + target.get<std::string>()) continue;
        ChunkInfo c = chunks[i];
        c.name = "zero_fp32/" + alias;
        c.alias_of = chunks[i].name;
        chunks.push_back(std::move(c));
        group_of.push_back(group_of[i]);
        pieces.push_back(pieces[i]);
        break;
      }
    }
  }
  return std::unique_ptr<TensorFile>(new ZeroReassembled(where, std::move(parts), std::move(chunks),
                                                         std::move(group_of), std::move(pieces)));
}

}  // namespace ckpt
