#include "formats/pytorch_file.h"

#include "formats/mapped_tensor_file.h"
#include "formats/pickle_reader.h"
#include "formats/zip_archive.h"

namespace ckpt {

namespace {

constexpr const char* kComponents[] = {"model", "optimizer", "scheduler", "scaler", "rng", "data", "progress"};

// A bare state dict carries no component; a full training-state dict says it in its first key.
std::string guess_component(const std::string& name) {
  const std::string first = name.substr(0, name.find('.'));
  for (const char* c : kComponents) {
    if (first == c) return c;
  }
  if (first == "state" || first == "param_groups") return "optimizer";
  return "model";
}

Result<std::string> archive_prefix(const ZipArchive& zip, const std::string& file) {
  std::string prefix;
  for (const auto& e : zip.entries()) {
    const auto slash = e.name.find('/');
    if (slash == std::string::npos || e.name.substr(slash) != "/data.pkl") continue;
    if (!prefix.empty()) return Status::corruption(file + ": more than one data.pkl ('" + prefix + "/data.pkl', '" + e.name + "')");
    prefix = e.name.substr(0, slash);
  }
  if (prefix.empty()) {
    return Status::not_supported(file + ": zip has no <archive>/data.pkl (not a torch.save file, or a legacy one)");
  }
  return prefix;
}

bool is_row_major(const PickledTensor& t) {
  int64_t expected = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] == 0) return true;  // an empty tensor has no layout
    if (t.shape[d] != 1 && t.stride[d] != expected) return false;
    if (t.shape[d] > 1 && expected > INT64_MAX / t.shape[d]) return false;
    expected *= t.shape[d];
  }
  return true;
}

Result<ChunkInfo> locate_tensor(const PickledTensor& t, const ZipArchive& zip, const std::string& prefix,
                                const std::string& file) {
  const std::string where = file + ": tensor '" + t.name + "'";
  const std::string entry_name = prefix + "/data/" + t.storage_key;
  const ZipEntry* entry = zip.find(entry_name);
  if (!entry) return Status::corruption(where + ": storage entry '" + entry_name + "' is missing");
  const size_t elem = dtype_size(t.dtype);
  const auto storage_bytes = checked_nbytes({t.storage_numel}, t.dtype);
  if (!storage_bytes || *storage_bytes != entry->size) {
    return Status::corruption(where + ": storage '" + entry_name + "' should hold " + std::to_string(t.storage_numel) +
                              " " + dtype_name(t.dtype) + " elements, entry has " + std::to_string(entry->size) + " bytes");
  }
  if (!is_row_major(t)) {
    return Status::not_supported(where + ": non-contiguous layout (shape " + shape_to_string(t.shape) + ", stride " +
                                 shape_to_string(t.stride) + ")");
  }
  const auto numel = checked_numel(t.shape);
  if (!numel || t.storage_offset < 0 || t.storage_offset > t.storage_numel || *numel > t.storage_numel - t.storage_offset) {
    return Status::corruption(where + ": view of shape " + shape_to_string(t.shape) + " at storage offset " +
                              std::to_string(t.storage_offset) + " exceeds the storage's " +
                              std::to_string(t.storage_numel) + " elements");
  }
  ChunkInfo c;
  c.name = t.name;
  c.component = guess_component(t.name);
  c.dtype = t.dtype;
  c.global_shape = t.shape;
  c.shape = t.shape;
  c.offsets.assign(t.shape.size(), 0);
  c.data_offset = entry->data_offset + static_cast<uint64_t>(t.storage_offset) * elem;
  c.data_bytes = static_cast<uint64_t>(*numel) * elem;
  return c;
}

}  // namespace

Result<std::unique_ptr<TensorFile>> open_pytorch(std::unique_ptr<ByteSource> source) {
  const std::string file = source->name();
  CKPT_ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::open(*source));
  CKPT_ASSIGN_OR_RETURN(std::string prefix, archive_prefix(zip, file));
  if (const ZipEntry* bo = zip.find(prefix + "/byteorder")) {
    CKPT_ASSIGN_OR_RETURN(std::string order, zip.read(*source, *bo, 16));
    if (order != "little") return Status::not_supported(file + ": byteorder '" + order + "' (only little-endian is read)");
  }
  CKPT_ASSIGN_OR_RETURN(std::string pkl, zip.read(*source, *zip.find(prefix + "/data.pkl"), kPytorchMaxPickleBytes));
  CKPT_ASSIGN_OR_RETURN(PickledStateDict dict, read_tensor_pickle(reinterpret_cast<const uint8_t*>(pkl.data()),
                                                                  pkl.size(), file + ": " + prefix + "/data.pkl"));
  std::vector<ChunkInfo> chunks;
  chunks.reserve(dict.tensors.size());
  for (const auto& t : dict.tensors) {
    CKPT_ASSIGN_OR_RETURN(ChunkInfo c, locate_tensor(t, zip, prefix, file));
    chunks.push_back(std::move(c));
  }
  return std::unique_ptr<TensorFile>(
      new MappedTensorFile("pytorch", std::move(source), std::move(chunks), std::move(dict.metadata)));
}

Result<std::unique_ptr<TensorFile>> open_pytorch_file(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  return open_pytorch(std::move(source));
}

}  // namespace ckpt
