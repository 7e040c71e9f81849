#include "formats/dcp_metadata.h"

#include <algorithm>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "formats/tensor_file.h"

namespace ckpt {

namespace {

// Items of one kind (tensor or bytes) in key order (fqn, then offsets), equal keys in pickle order.
// An item whose key an earlier item has is "listed twice"; the first such in pickle order is the
// one named. The names are ranked once, in string order, and the items sorted by rank: a million
// items sort in ~20 M comparisons, which as string comparisons were a sixth of the parse.
Result<std::vector<size_t>> items_by_key(const std::string& where, const DcpMetadata& out, bool bytes) {
  std::vector<size_t> order;
  // rank[i]: first the id of item i's name (in the order names are first seen), then its rank.
  std::vector<uint32_t> rank(out.items.size(), 0);
  std::unordered_map<std::string_view, uint32_t> id_of;
  std::vector<std::string_view> names;
  const std::string* last = nullptr;  // a tensor's items share their name: one lookup for a run
  uint32_t last_id = 0;
  for (size_t i = 0; i < out.items.size(); ++i) {
    if (out.items[i].is_bytes != bytes) continue;
    order.push_back(i);
    const std::string& name = out.items[i].fqn.str();
    if (&name != last) {
      auto [it, added] = id_of.emplace(name, static_cast<uint32_t>(names.size()));
      if (added) names.push_back(name);
      last = &name;
      last_id = it->second;
    }
    rank[i] = last_id;
  }
  std::vector<uint32_t> by_name(names.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::sort(by_name.begin(), by_name.end(), [&](uint32_t a, uint32_t b) { return names[a] < names[b]; });
  std::vector<uint32_t> rank_of_id(names.size());
  for (size_t r = 0; r < by_name.size(); ++r) rank_of_id[by_name[r]] = static_cast<uint32_t>(r);
  for (size_t i : order) rank[i] = rank_of_id[rank[i]];
  auto less = [&](size_t a, size_t b) {
    if (rank[a] != rank[b]) return rank[a] < rank[b];
    return out.items[a].offsets < out.items[b].offsets;
  };
  std::stable_sort(order.begin(), order.end(), less);
  size_t twice = SIZE_MAX;
  for (size_t k = 1; k < order.size(); ++k)
    if (!less(order[k - 1], order[k])) twice = std::min(twice, order[k]);
  if (twice != SIZE_MAX)
    return Status::corruption(where + ": storage item " + out.items[twice].label() + " is listed twice");
  return order;
}

// Ties every chunk and bytes entry to its item. One left untied (item == SIZE_MAX) is reported by
// the verifier as missing from storage_data, not here: the metadata itself still parses. Both sides
// are walked in key order, so a million chunks cost two sorts, not a million map nodes.
Status link_chunks_to_items(const std::string& where, DcpMetadata& out) {
  CKPT_ASSIGN_OR_RETURN(std::vector<size_t> tensor_items, items_by_key(where, out, false));
  CKPT_ASSIGN_OR_RETURN(std::vector<size_t> bytes_items, items_by_key(where, out, true));
  size_t k = 0;
  for (DcpTensor& t : out.tensors) {
    while (k < tensor_items.size() && out.items[tensor_items[k]].fqn < t.fqn) ++k;
    size_t j = k;
    for (DcpChunk& c : t.chunks) {
      while (j < tensor_items.size() && out.items[tensor_items[j]].fqn == t.fqn &&
             out.items[tensor_items[j]].offsets < c.offsets)
        ++j;
      if (j < tensor_items.size() && out.items[tensor_items[j]].fqn == t.fqn &&
          out.items[tensor_items[j]].offsets == c.offsets)
        c.item = tensor_items[j];
    }
  }
  k = 0;
  for (DcpBytesEntry& b : out.bytes) {
    while (k < bytes_items.size() && out.items[bytes_items[k]].fqn < b.fqn) ++k;
    if (k < bytes_items.size() && out.items[bytes_items[k]].fqn == b.fqn) b.item = bytes_items[k];
  }
  return Status::ok();
}

}  // namespace

std::string DcpItem::label() const {
  if (is_bytes) return fqn + " (bytes)";
  return fqn + " at " + shape_to_string(offsets);
}

bool operator==(const DcpItem& a, const DcpItem& b) {
  return a.fqn == b.fqn && a.offsets == b.offsets && a.is_bytes == b.is_bytes &&
         a.relative_path == b.relative_path && a.file == b.file && a.offset == b.offset &&
         a.length == b.length && a.transforms == b.transforms && a.container_offset == b.container_offset &&
         a.recorded_offset == b.recorded_offset && a.recorded_length == b.recorded_length &&
         a.safetensors == b.safetensors;
}

bool operator==(const DcpChunk& a, const DcpChunk& b) {
  return a.offsets == b.offsets && a.sizes == b.sizes && a.item == b.item;
}

bool operator==(const DcpTensor& a, const DcpTensor& b) {
  return a.fqn == b.fqn && a.dtype == b.dtype && a.torch_dtype == b.torch_dtype && a.shape == b.shape &&
         a.chunks == b.chunks;
}

bool operator==(const DcpBytesEntry& a, const DcpBytesEntry& b) {
  return a.fqn == b.fqn && a.item == b.item;
}

bool same_listing(const PickleGlobal& a, const PickleGlobal& b) {
  return a.name == b.name && a.risk == b.risk && a.first_offset == b.first_offset && a.count == b.count &&
         a.pickle == b.pickle && a.attribute_lookups == b.attribute_lookups && a.uses == b.uses &&
         a.other_calls == b.other_calls;
}

bool operator==(const DcpMetadata& a, const DcpMetadata& b) {
  return a.layout == b.layout && a.version == b.version && a.metadata_class == b.metadata_class &&
         a.mcore_data == b.mcore_data && a.tensors == b.tensors && a.bytes == b.bytes && a.items == b.items &&
         a.planner_data == b.planner_data && a.storage_meta == b.storage_meta &&
         std::equal(a.globals.begin(), a.globals.end(), b.globals.begin(), b.globals.end(), same_listing);
}

Status check_dcp_chunk(const DcpChunk& chunk, const std::vector<int64_t>& shape, const std::string& at) {
  if (chunk.offsets.size() != shape.size() || chunk.sizes.size() != shape.size()) {
    return Status::corruption(at + ": chunk at " + shape_to_string(chunk.offsets) + " sized " +
                              shape_to_string(chunk.sizes) + " has the wrong rank for size " +
                              shape_to_string(shape));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (chunk.offsets[d] > shape[d] || chunk.sizes[d] > shape[d] - chunk.offsets[d]) {
      return Status::corruption(at + ": chunk at " + shape_to_string(chunk.offsets) + " sized " +
                                shape_to_string(chunk.sizes) + " leaves size " + shape_to_string(shape) +
                                " in dim " + std::to_string(d));
    }
  }
  return Status::ok();
}

Status finish_dcp_metadata(const std::string& where, DcpMetadata& out) {
  for (DcpTensor& t : out.tensors)
    std::sort(t.chunks.begin(), t.chunks.end(),
              [](const DcpChunk& a, const DcpChunk& b) { return a.offsets < b.offsets; });
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const DcpTensor& a, const DcpTensor& b) { return a.fqn < b.fqn; });
  std::stable_sort(out.bytes.begin(), out.bytes.end(),
                   [](const DcpBytesEntry& a, const DcpBytesEntry& b) { return a.fqn < b.fqn; });
  return link_chunks_to_items(where, out);
}

}  // namespace ckpt
