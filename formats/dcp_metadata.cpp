#include "formats/dcp_metadata.h"

#include <algorithm>
#include <numeric>

#include "formats/tensor_file.h"

namespace ckpt {

namespace {

bool item_less(const DcpItem& a, const DcpItem& b) {
  if (a.fqn != b.fqn) return a.fqn < b.fqn;
  return a.offsets < b.offsets;
}

bool same_key(const DcpItem& a, const DcpItem& b) {
  return a.fqn == b.fqn && a.offsets == b.offsets;
}

// Items of one kind (tensor or bytes) in key order, equal keys in pickle order. An item whose key an
// earlier item has is "listed twice"; the first such in pickle order is the one named.
Result<std::vector<size_t>> items_by_key(const std::string& where, const DcpMetadata& out, bool bytes) {
  std::vector<size_t> order;
  for (size_t i = 0; i < out.items.size(); ++i)
    if (out.items[i].is_bytes == bytes) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return item_less(out.items[a], out.items[b]); });
  size_t twice = SIZE_MAX;
  for (size_t k = 1; k < order.size(); ++k)
    if (same_key(out.items[order[k - 1]], out.items[order[k]])) twice = std::min(twice, order[k]);
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
