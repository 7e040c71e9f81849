#include "formats/dcp_checkpoint.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <set>

#include "base/byte_coding.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/path_byte_source.h"
#include "base/text.h"
#include "formats/dcp_metadata_reader.h"
#include "formats/pickle_reader.h"
#include "formats/pytorch_file.h"
#include "formats/safetensors_file.h"

namespace ckpt {

namespace {

constexpr size_t kMaxDcpRank = 64;

// "torch.distributed.checkpoint.metadata.TensorStorageMetadata" -> "TensorStorageMetadata".
std::string class_of(const nlohmann::json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("__class__");
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::string class_tail(const nlohmann::json& j) {
  const std::string c = class_of(j);
  const size_t dot = c.rfind('.');
  return dot == std::string::npos ? c : c.substr(dot + 1);
}

Result<uint64_t> get_uint(const nlohmann::json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::corruption(where + ": no '" + key + "'");
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) return static_cast<uint64_t>(it->get<int64_t>());
  return Status::corruption(where + ": '" + key + "' is " + it->dump().substr(0, 64) +
                            ", not a non-negative integer");
}

Result<std::vector<int64_t>> get_dims(const nlohmann::json& v, const std::string& where) {
  if (!v.is_array() || v.size() > kMaxDcpRank)
    return Status::corruption(where + ": " + v.dump().substr(0, 64) + " is not a shape");
  std::vector<int64_t> out;
  for (const auto& d : v) {
    if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<uint64_t>() > INT64_MAX) ||
        d.get<int64_t>() < 0) {
      return Status::corruption(where + ": dim " + d.dump().substr(0, 32) + " is not a non-negative integer");
    }
    out.push_back(d.get<int64_t>());
  }
  return out;
}

// TensorProperties pickles its __getstate__ tuple (dtype, layout, requires_grad, memory format,
// pin_memory); a dict state (a hand-built or future layout) carries "dtype".
Result<std::pair<DType, std::string>> properties_dtype(const nlohmann::json& props,
                                                       const std::string& where) {
  const nlohmann::json* d = nullptr;
  if (props.is_object() && props.contains("dtype")) {
    d = &props["dtype"];
  } else if (props.is_object() && props.contains("__state__") && props["__state__"].is_array() &&
             !props["__state__"].empty()) {
    d = &props["__state__"][0];
  }
  if (!d || !d->is_string()) return Status::corruption(where + ": properties carry no dtype");
  const std::string s = d->get<std::string>();
  const std::string prefix = "global:torch.";
  if (s.compare(0, prefix.size(), prefix) == 0) {
    const std::string n = s.substr(prefix.size());
    if (auto d = dtype_from_torch_name(n)) return std::make_pair(*d, "torch." + n);
  }
  return Status::not_supported(where + ": dtype " + s.substr(0, 64) + " is not supported");
}

bool safe_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos && name.size() <= 255;
}

std::string component_of_dcp_fqn(const std::string& fqn) {
  const std::string first = fqn.substr(0, fqn.find('.'));
  if (first.rfind("optim", 0) == 0) return "optimizer";
  if (first.find("scheduler") != std::string::npos) return "scheduler";
  return "model";
}

void merge_globals(std::vector<PickleGlobal>& into, const std::vector<PickleGlobal>& from) {
  for (const PickleGlobal& g : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const PickleGlobal& x) { return x.name == g.name; });
    if (it == into.end()) {
      into.push_back(g);
    } else {
      it->count += g.count;
    }
  }
}

// The chunks of one data file: tensor chunks and tensors inside bytes items, each served by the
// item's own torch.save reader.
class DcpDataFile final : public TensorFile {
 public:
  DcpDataFile(std::string path, std::shared_ptr<const ByteSource> source)
      : path_(std::move(path)), source_(std::move(source)) {}
  const std::string& path() const override { return path_; }
  const char* format_name() const override { return "dcp"; }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  const std::vector<PickleGlobal>& pickle_globals() const override { return globals_; }
  const ByteSource* payload_source() const override { return plain_ && source_ ? source_.get() : nullptr; }
  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override {
    if (index >= refs_.size()) return Status::invalid_argument(path_ + ": no chunk " + std::to_string(index));
    const Ref& r = refs_[index];
    const Status st = items_[r.item].file->read_chunk(r.inner, offset, out, length);
    return st.is_ok() ? st : st.with_context(path_ + ": item " + items_[r.item].label);
  }
  Status check_container() const override {
    for (const auto& item : items_) {
      const Status st = item.file->check_container();
      if (!st.is_ok()) return st.with_context(path_ + ": item " + item.label);
    }
    return Status::ok();
  }

  struct Item {
    std::string label;
    std::unique_ptr<TensorFile> file;
  };
  struct Ref {
    size_t item;
    size_t inner;
  };
  void add_item(std::string label, std::unique_ptr<TensorFile> file) {
    if (!file->payload_source()) plain_ = false;
    merge_globals(globals_, file->pickle_globals());
    items_.push_back({std::move(label), std::move(file)});
  }
  void add_chunk(ChunkInfo c, size_t inner) {
    chunks_.push_back(std::move(c));
    refs_.push_back({items_.size() - 1, inner});
  }
  nlohmann::json& mutable_metadata() { return metadata_; }
  void set_globals(std::vector<PickleGlobal> g) { globals_ = std::move(g); }

 private:
  std::string path_;
  std::shared_ptr<const ByteSource> source_;
  std::vector<Item> items_;
  std::vector<ChunkInfo> chunks_;
  std::vector<Ref> refs_;
  std::vector<PickleGlobal> globals_;
  nlohmann::json metadata_ = nlohmann::json::object();
  bool plain_ = true;
};

// A TensorFile that answers with another one's: the wrappers below change one or two answers.
class ForwardingTensorFile : public TensorFile {
 public:
  explicit ForwardingTensorFile(std::shared_ptr<const TensorFile> inner) : inner_(std::move(inner)) {}
  const std::string& path() const override { return inner_->path(); }
  const char* format_name() const override { return inner_->format_name(); }
  const std::vector<ChunkInfo>& chunks() const override { return inner_->chunks(); }
  const nlohmann::json& metadata() const override { return inner_->metadata(); }
  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override {
    return inner_->read_chunk(index, offset, out, length);
  }
  const ByteSource* payload_source() const override { return inner_->payload_source(); }
  const std::vector<PickleGlobal>& pickle_globals() const override { return inner_->pickle_globals(); }
  Status check_container() const override { return inner_->check_container(); }

 protected:
  std::shared_ptr<const TensorFile> inner_;
};

// Megatron's common.pt inside a DCP source: its tensors renamed "common.pt:<name>" so they cannot
// be taken for DCP fqns, its metadata left to summary() (TensorSource files every data file's
// metadata under bytes_contents).
class MegatronCommonFile final : public ForwardingTensorFile {
 public:
  explicit MegatronCommonFile(std::shared_ptr<const TensorFile> inner)
      : ForwardingTensorFile(std::move(inner)) {
    chunks_ = inner_->chunks();
    for (ChunkInfo& c : chunks_) c.name = kMegatronCommonTensorPrefix + c.name;
  }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }

 private:
  std::vector<ChunkInfo> chunks_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

// One chunk's view of a safetensors blob that several items share: the blob's own answers, in a
// TensorFile the caller owns.
class SharedBlobFile final : public ForwardingTensorFile {
 public:
  using ForwardingTensorFile::ForwardingTensorFile;
};

size_t chunk_named(const TensorFile& f, const std::string& name) {
  const auto& chunks = f.chunks();
  for (size_t k = 0; k < chunks.size(); ++k)
    if (chunks[k].name == name) return k;
  return SIZE_MAX;
}

// DCP_SHARDING_INFO from a blob's __metadata__: null when absent, an object when well formed.
Result<nlohmann::json> sharding_info(const TensorFile& blob, const std::string& where) {
  const nlohmann::json& meta = blob.metadata();
  if (!meta.is_object() || !meta.contains(kDcpShardingInfoKey)) return nlohmann::json();
  const nlohmann::json& raw = meta[kDcpShardingInfoKey];
  if (!raw.is_string()) return Status::corruption(where + ": __metadata__ DCP_SHARDING_INFO is not a string");
  CKPT_ASSIGN_OR_RETURN(nlohmann::json info,
                        parse_json(raw.get<std::string>(), where + ": __metadata__ DCP_SHARDING_INFO"));
  if (!info.is_object()) return Status::corruption(where + ": DCP_SHARDING_INFO is not a JSON object");
  return info;
}

// A tensor's saved_offsets from DCP_SHARDING_INFO; all zeros when the blob carries none (as torch's
// HuggingFaceStorageReader reads it).
Result<std::vector<int64_t>> saved_offsets(const nlohmann::json& info, const ChunkInfo& c,
                                           const std::string& where) {
  if (info.is_null()) return std::vector<int64_t>(c.shape.size(), 0);
  auto it = info.find(c.name);
  if (it == info.end() || !it->is_object() || !it->contains(kDcpSavedOffsetsKey))
    return Status::corruption(where + ": DCP_SHARDING_INFO has no saved_offsets for '" + c.name + "'");
  CKPT_ASSIGN_OR_RETURN(auto offsets,
                        get_dims((*it)[kDcpSavedOffsetsKey], where + ": " + c.name + " saved_offsets"));
  if (offsets.size() != c.shape.size())
    return Status::corruption(where + ": " + c.name + " saved_offsets " + shape_to_string(offsets) +
                              " has the wrong rank for shape " + shape_to_string(c.shape));
  return offsets;
}

// Moves tensor item `it` of a safetensors blob (which starts at `base`) from where `.metadata`
// records it (the blob's start) to its tensor's bytes inside the blob. Returns "" when the blob's
// header agrees with `.metadata`, else how it disagrees (the item then stays as recorded).
std::string place_item_in_blob(const TensorFile& blob, uint64_t base, const nlohmann::json& info,
                               const std::string& name, DcpItem& it) {
  it.safetensors = true;
  it.container_offset = base;
  const std::string at = name + ": item " + it.label();
  if (it.offset != base) {
    return at + " is recorded at " + hex_offset(it.offset) + ", but the file's safetensors blob starts at " +
           hex_offset(base);
  }
  const size_t k = chunk_named(blob, it.fqn);
  if (k == SIZE_MAX) return at + ": '" + it.fqn + "' is not in the safetensors header";
  const ChunkInfo& c = blob.chunks()[k];
  auto offsets = saved_offsets(info, c, name);
  if (!offsets.is_ok()) return offsets.status().message();
  if (*offsets != it.offsets) {
    return at + ": DCP_SHARDING_INFO saved_offsets " + shape_to_string(*offsets) +
           " disagree with .metadata's " + shape_to_string(it.offsets);
  }
  if (c.data_bytes != it.length) {
    return at + ": the header gives " + std::to_string(c.data_bytes) + " bytes, .metadata " +
           std::to_string(it.length);
  }
  it.offset = base + c.data_offset;
  it.length = c.data_bytes;
  return "";
}

// `.metadata` synthesized from the headers of a sharded safetensors directory (no `.metadata`).
Result<DcpMetadata> sharded_safetensors_metadata(const std::string& dir) {
  DcpMetadata out;
  out.layout = "hf-safetensors-sharded";
  std::map<std::string, DcpTensor> tensors;
  std::vector<std::string> names;
  for (const std::string& n : list_files_under(dir, 0))
    if (ends_with(n, ".safetensors")) names.push_back(n);
  if (names.size() > kDcpMaxShardedFiles)
    return Status::corruption(dir + ": " + std::to_string(names.size()) +
                              " safetensors files, more than the limit");
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (!is_regular_file(path)) return Status::invalid_argument(path + ": not a regular file");
    if (!path_resolves_inside(dir, path)) return Status::invalid_argument(path + ": resolves outside " + dir);
    CKPT_ASSIGN_OR_RETURN(auto file, open_safetensors_file(path));
    CKPT_ASSIGN_OR_RETURN(nlohmann::json info, sharding_info(*file, path));
    if (info.is_null())
      return Status::corruption(path + ": __metadata__ has no DCP_SHARDING_INFO (not written by DCP)");
    for (const ChunkInfo& c : file->chunks()) {
      CKPT_ASSIGN_OR_RETURN(auto offsets, saved_offsets(info, c, path));
      DcpTensor& t = tensors[c.name];
      if (t.fqn.empty()) {
        t.fqn = c.name;
        t.dtype = c.dtype;
        t.torch_dtype = torch_dtype_name(c.dtype);
        t.shape.assign(c.shape.size(), 0);
      } else if (t.dtype != c.dtype || t.shape.size() != c.shape.size()) {
        return Status::corruption(path + ": " + c.name + " is " + dtype_name(c.dtype) +
                                  shape_to_string(c.shape) + ", another file holds it as " +
                                  dtype_name(t.dtype) + " of rank " + std::to_string(t.shape.size()));
      }
      for (size_t d = 0; d < c.shape.size(); ++d) {
        if (offsets[d] > INT64_MAX - c.shape[d])
          return Status::corruption(path + ": " + c.name + " saved_offsets overflow");
        t.shape[d] = std::max(t.shape[d], offsets[d] + c.shape[d]);
      }
      t.chunks.push_back({offsets, c.shape, out.items.size()});
      DcpItem item;
      item.fqn = c.name;
      item.offsets = offsets;
      item.relative_path = name;
      item.offset = item.recorded_offset = 0;
      item.length = item.recorded_length = c.data_bytes;
      out.items.push_back(std::move(item));
    }
  }
  std::set<std::pair<std::string, Dims>> seen;
  for (auto& [fqn, t] : tensors) {
    std::sort(t.chunks.begin(), t.chunks.end(),
              [](const DcpChunk& a, const DcpChunk& b) { return a.offsets < b.offsets; });
    for (const DcpChunk& c : t.chunks) {
      if (!seen.emplace(fqn, c.offsets).second)
        return Status::corruption(dir + ": chunk of " + fqn + " at " + shape_to_string(c.offsets) +
                                  " is stored twice (" + out.items[c.item].relative_path + ")");
    }
    out.tensors.push_back(std::move(t));
  }
  return out;
}

// The Metadata object's own fields: which torch wrote it (the layout), and what it carries besides
// the state dict, kept as-is for the report.
Status read_metadata_fields(const nlohmann::json& root, const std::string& where, DcpMetadata& out) {
  const std::string mclass = class_of(root);
  out.layout = mclass.find("._shard.checkpoint.") != std::string::npos ? "torch-1.13" : "torch-2.0";
  if (root.contains("storage_meta") || root.contains("version")) out.layout = "torch-2.4";
  if (root.contains("version") && root["version"].is_string())
    out.version = root["version"].get<std::string>();
  out.metadata_class = mclass;
  out.mcore_data = root.value("mcore_data", nlohmann::json());
  if (!out.mcore_data.is_null() && !out.mcore_data.is_object())
    return Status::corruption(where + ": mcore_data is " + out.mcore_data.type_name() + ", not a dict");
  out.planner_data = root.value("planner_data", nlohmann::json());
  out.storage_meta = root.value("storage_meta", nlohmann::json());
  return Status::ok();
}

// One ChunkStorageMetadata: its offsets and sizes must lie inside the tensor's size.
Result<DcpChunk> parse_dcp_chunk(const nlohmann::json& c, const std::vector<int64_t>& shape,
                                 const std::string& at) {
  if (class_tail(c) != "ChunkStorageMetadata" || !c.contains("offsets") || !c.contains("sizes"))
    return Status::corruption(at + ": a chunk is not a ChunkStorageMetadata(offsets, sizes)");
  DcpChunk chunk;
  CKPT_ASSIGN_OR_RETURN(chunk.offsets, get_dims(c["offsets"], at + ": chunk offsets"));
  CKPT_ASSIGN_OR_RETURN(chunk.sizes, get_dims(c["sizes"], at + ": chunk sizes"));
  CKPT_RETURN_IF_ERROR(check_dcp_chunk(chunk, shape, at));
  return chunk;
}

// One TensorStorageMetadata: dtype, size and chunks (sorted by offset). Properties of the
// torch.distributed.checkpoint.metadata class mark a torch 2.4+ writer, so `layout` may change.
Result<DcpTensor> parse_dcp_tensor(const std::string& fqn, const nlohmann::json& t, const std::string& at,
                                   std::string& layout) {
  if (class_tail(t.value("properties", nlohmann::json())) == "" && !t.contains("properties"))
    return Status::corruption(at + ": no properties");
  if (t.contains("properties") && t["properties"].is_object() && t["properties"].contains("__class__")) {
    if (class_of(t["properties"]).find("torch.distributed.checkpoint.metadata.") == 0) layout = "torch-2.4";
  }
  DcpTensor tensor;
  tensor.fqn = fqn;
  CKPT_ASSIGN_OR_RETURN(auto dt, properties_dtype(t.value("properties", nlohmann::json()), at));
  tensor.dtype = dt.first;
  tensor.torch_dtype = dt.second;
  if (!t.contains("size")) return Status::corruption(at + ": no size");
  CKPT_ASSIGN_OR_RETURN(tensor.shape, get_dims(t["size"], at + ": size"));
  if (!checked_nbytes(tensor.shape, tensor.dtype))
    return Status::corruption(at + ": size " + shape_to_string(tensor.shape) + " overflows");
  if (!t.contains("chunks") || !t["chunks"].is_array()) return Status::corruption(at + ": no chunks list");
  for (const auto& c : t["chunks"]) {
    CKPT_ASSIGN_OR_RETURN(DcpChunk chunk, parse_dcp_chunk(c, tensor.shape, at));
    tensor.chunks.push_back(std::move(chunk));
  }
  return tensor;
}

// state_dict_metadata: every tensor (sorted by name) and bytes entry the checkpoint holds.
Status parse_state_dict_metadata(const nlohmann::json& root, const std::string& where, DcpMetadata& out) {
  const nlohmann::json& sdm =
      root.contains("state_dict_metadata") ? root["state_dict_metadata"] : nlohmann::json();
  if (!sdm.is_object() || sdm.contains("__pairs__") || sdm.contains("__class__"))
    return Status::corruption(where + ": state_dict_metadata is not a dict keyed by names");
  for (auto it = sdm.begin(); it != sdm.end(); ++it) {
    const std::string& fqn = it.key();
    const std::string at = where + ": " + fqn;
    const std::string kind = class_tail(it.value());
    if (kind == "BytesStorageMetadata") {
      out.bytes.push_back({fqn, SIZE_MAX});
      continue;
    }
    if (kind != "TensorStorageMetadata")
      return Status::not_supported(at + ": unknown storage metadata '" + class_of(it.value()) + "'");
    CKPT_ASSIGN_OR_RETURN(DcpTensor tensor, parse_dcp_tensor(fqn, it.value(), at, out.layout));
    out.tensors.push_back(std::move(tensor));
  }
  return Status::ok();
}

// One storage_data pair, MetadataIndex -> _StorageInfo: which chunk (or bytes entry) lies where.
Result<DcpItem> parse_storage_item(const nlohmann::json& p, const std::string& at) {
  if (!p.is_array() || p.size() != 2 || class_tail(p[0]) != "MetadataIndex" ||
      class_tail(p[1]) != "_StorageInfo")
    return Status::corruption(at + ": not a MetadataIndex -> _StorageInfo pair");
  const auto& key = p[0];
  const auto& info = p[1];
  DcpItem item;
  if (!key.contains("fqn") || !key["fqn"].is_string())
    return Status::corruption(at + ": MetadataIndex has no fqn");
  item.fqn = key["fqn"].get<std::string>();
  const nlohmann::json off = key.value("offset", nlohmann::json());
  if (off.is_null()) {
    item.is_bytes = true;
  } else {
    CKPT_ASSIGN_OR_RETURN(item.offsets, get_dims(off, at + " (" + item.fqn + "): offset"));
  }
  if (!info.contains("relative_path") || !info["relative_path"].is_string())
    return Status::corruption(at + " (" + item.fqn + "): _StorageInfo has no relative_path");
  item.relative_path = info["relative_path"].get<std::string>();
  CKPT_ASSIGN_OR_RETURN(item.offset, get_uint(info, "offset", at + " (" + item.fqn + ")"));
  CKPT_ASSIGN_OR_RETURN(item.length, get_uint(info, "length", at + " (" + item.fqn + ")"));
  if (item.offset > UINT64_MAX - item.length)
    return Status::corruption(at + " (" + item.fqn + "): offset + length overflows");
  item.container_offset = item.recorded_offset = item.offset;
  item.recorded_length = item.length;
  const nlohmann::json td = info.value("transform_descriptors", nlohmann::json());
  if (td.is_array()) {
    for (const auto& d : td) item.transforms.push_back(d.is_string() ? d.get<std::string>() : d.dump());
  }
  return item;
}

// storage_data: every item, in the order the pickle lists them.
Status parse_storage_data(const nlohmann::json& root, const std::string& where, DcpMetadata& out) {
  const nlohmann::json sd = root.value("storage_data", nlohmann::json());
  nlohmann::json pairs = nlohmann::json::array();
  if (sd.is_object() && sd.contains("__pairs__") && sd["__pairs__"].is_array()) {
    pairs = sd["__pairs__"];
  } else if (!(sd.is_object() && sd.empty())) {
    return Status::corruption(where + ": storage_data is not a dict of MetadataIndex -> _StorageInfo");
  }
  if (pairs.size() > kDcpMaxItems)
    return Status::corruption(where + ": " + std::to_string(pairs.size()) +
                              " storage items, more than the limit");
  for (size_t i = 0; i < pairs.size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(DcpItem item,
                          parse_storage_item(pairs[i], where + ": storage_data item " + std::to_string(i)));
    out.items.push_back(std::move(item));
  }
  return Status::ok();
}

}  // namespace

Status SliceByteSource::read_at(uint64_t offset, void* out, size_t length) const {
  if (!range_within(offset, length, length_)) {
    return Status::truncated(name_ + ": read of " + std::to_string(length) + " bytes at offset " +
                             std::to_string(offset) + " past the item's end (" + std::to_string(length_) +
                             " bytes)");
  }
  return parent_->read_at(offset_ + offset, out, length);
}

Status SliceByteSource::scan(uint64_t offset, uint64_t length, size_t block_bytes,
                             const BlockVisitor& visit) const {
  CKPT_RETURN_IF_ERROR(check_range(*this, offset, length));
  return parent_->scan(offset_ + offset, length, block_bytes,
                       [&](uint64_t at, const uint8_t* data, size_t n) { visit(at - offset_, data, n); });
}

// The restricted VM's reading: its value tree, flattened to JSON, then read field by field.
Result<DcpMetadata> read_dcp_metadata_with_vm(const uint8_t* data, size_t size, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(PickledStateDict dict, read_tensor_pickle(data, size, where));
  if (!dict.tensors.empty()) return Status::corruption(where + ": holds tensors; a DCP .metadata holds none");
  const nlohmann::json& root = dict.metadata.contains("value") ? dict.metadata["value"] : nlohmann::json();
  // Megatron-Core's MCoreMetadata subclasses Metadata with one more field, mcore_data.
  if (class_tail(root) != "Metadata" && class_tail(root) != "MCoreMetadata") {
    return Status::corruption(where + ": not a DCP Metadata object (top-level " +
                              (class_of(root).empty() ? root.type_name() : class_of(root)) + ")");
  }
  DcpMetadata out;
  out.globals = std::move(dict.globals);
  CKPT_RETURN_IF_ERROR(read_metadata_fields(root, where, out));
  CKPT_RETURN_IF_ERROR(parse_state_dict_metadata(root, where, out));
  CKPT_RETURN_IF_ERROR(parse_storage_data(root, where, out));
  return out;
}

namespace {

Result<DcpMetadata> finish_parse(Result<DcpMetadata> read, const std::string& where) {
  if (!read.is_ok()) return read;
  DcpMetadata out = std::move(*read);
  for (PickleGlobal& g : out.globals) g.pickle = kDcpMetadataFileName;
  CKPT_RETURN_IF_ERROR(finish_dcp_metadata(where, out));
  return out;
}

}  // namespace

Result<DcpMetadata> parse_dcp_metadata(const uint8_t* data, size_t size, const std::string& where) {
  std::optional<Result<DcpMetadata>> typed = read_dcp_metadata_typed(data, size, where);
  return finish_parse(typed ? std::move(*typed) : read_dcp_metadata_with_vm(data, size, where), where);
}

Result<DcpMetadata> read_dcp_metadata_file(const std::string& path) {
  // The typed reader streams the file; only a pickle it leaves to the VM is read whole, and a file
  // that cannot be opened or is too large gets read_small_file's message.
  auto source = FileByteSource::open(path);
  if (source.is_ok() && (*source)->size() <= kDcpMaxMetadataBytes) {
    std::optional<Result<DcpMetadata>> typed = read_dcp_metadata_typed(**source, path);
    if (typed) return finish_parse(std::move(*typed), path);
  }
  CKPT_ASSIGN_OR_RETURN(std::string text, read_small_file(path, kDcpMaxMetadataBytes));
  return finish_parse(
      read_dcp_metadata_with_vm(reinterpret_cast<const uint8_t*>(text.data()), text.size(), path), path);
}

bool is_dcp_directory(const std::string& dir) {
  if (!is_directory(dir)) return false;
  return is_regular_file(dir + "/" + kDcpMetadataFileName) || is_dcp_sharded_safetensors_directory(dir);
}

bool is_dcp_sharded_safetensors_directory(const std::string& dir) {
  if (!is_directory(dir) || path_exists(dir + "/" + kDcpMetadataFileName) ||
      path_exists(dir + "/model.safetensors.index.json"))
    return false;
  const std::vector<std::string> names = list_files_under(dir, 0);
  for (const std::string& n : names) {
    if (!ends_with(n, ".safetensors")) continue;
    const std::string path = dir + "/" + n;
    if (!is_regular_file(path) || !path_resolves_inside(dir, path)) return false;
    auto file = open_safetensors_file(path);
    // A damaged first file still marks a folder of nothing but safetensors files, so open() names
    // what is wrong with it; beside other files (a trainer's checkpoint-N/ with its model.safetensors
    // truncated) it is no evidence of DCP: that folder's own layout reports the damaged file.
    if (!file.is_ok()) {
      const bool only_safetensors = std::all_of(names.begin(), names.end(), [](const std::string& name) {
        return ends_with(name, ".safetensors");
      });
      return only_safetensors && file.status().code() != StatusCode::kNotSupported;
    }
    const nlohmann::json& meta = (*file)->metadata();
    return meta.is_object() && meta.contains(kDcpShardingInfoKey);
  }
  return false;
}

Result<DcpCheckpoint> DcpCheckpoint::open(const std::string& raw_dir) {
  DcpCheckpoint c;
  c.dir_ = strip_trailing_slashes(raw_dir);
  const std::string meta_path = c.dir_ + "/" + kDcpMetadataFileName;
  if (!path_exists(meta_path) && is_dcp_sharded_safetensors_directory(c.dir_)) {
    CKPT_ASSIGN_OR_RETURN(c.metadata_, sharded_safetensors_metadata(c.dir_));
  } else {
    CKPT_ASSIGN_OR_RETURN(c.metadata_, read_dcp_metadata_file(meta_path));
  }
  std::set<std::string> names;
  for (const DcpItem& it : c.metadata_.items) {
    if (!safe_file_name(it.relative_path)) {
      return Status::invalid_argument(meta_path + ": item " + it.label() + " names file '" +
                                      it.relative_path.str().substr(0, 256) +
                                      "', which is not a plain name inside " + c.dir_);
    }
    names.insert(it.relative_path);
  }
  c.files_.assign(names.begin(), names.end());
  for (const std::string& name : c.files_) {
    const std::string path = c.dir_ + "/" + name;
    if (!path_exists(path)) return Status::not_found(path + ": missing (named by " + meta_path + ")");
    if (!is_regular_file(path)) return Status::invalid_argument(path + ": not a regular file");
    if (!path_resolves_inside(c.dir_, path))
      return Status::invalid_argument(path + ": resolves outside " + c.dir_);
    std::shared_ptr<const ByteSource> source;
    if (c.files_.size() <= kDcpMaxFilesKeptOpen) {
      CKPT_ASSIGN_OR_RETURN(source, FileByteSource::open(path));
    } else {
      CKPT_ASSIGN_OR_RETURN(source, PathByteSource::open(path));
    }
    c.sources_.push_back(std::move(source));
  }
  for (DcpItem& it : c.metadata_.items)
    it.file = static_cast<size_t>(std::lower_bound(c.files_.begin(), c.files_.end(), it.relative_path) -
                                  c.files_.begin());
  c.resolve_safetensors_items();
  const std::string& mc = c.metadata_.metadata_class;
  c.megatron_ = read_megatron_parts(c.dir_, mc == "MCoreMetadata" || ends_with(mc, ".MCoreMetadata"));
  return c;
}

void DcpCheckpoint::resolve_safetensors_items() {
  std::vector<DcpItem>& items = metadata_.items;
  blobs_.assign(files_.size(), SafetensorsBlob{});
  item_problems_.assign(items.size(), "");
  // Torch records every tensor item of a file at the blob's start (what the stream held before it).
  std::vector<uint64_t> first(files_.size(), UINT64_MAX);
  for (const DcpItem& it : items)
    if (!it.is_bytes) first[it.file] = std::min(first[it.file], it.offset);
  for (size_t f = 0; f < files_.size(); ++f) {
    if (first[f] == UINT64_MAX) continue;
    const std::string name = dir_ + "/" + files_[f] + "@" + hex_offset(first[f]);
    const std::optional<nlohmann::json> info = open_safetensors_blob(f, first[f], name);
    if (!info) continue;
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].file != f || items[i].is_bytes) continue;
      item_problems_[i] = place_item_in_blob(*blobs_[f].file, first[f], *info, name, items[i]);
    }
  }
}

std::optional<nlohmann::json> DcpCheckpoint::open_safetensors_blob(size_t f, uint64_t base,
                                                                   const std::string& name) {
  const uint64_t size = sources_[f]->size();
  uint8_t head[9];
  bool looks = false;
  if (base <= size && size - base >= sizeof(head) && sources_[f]->read_at(base, head, sizeof(head)).is_ok()) {
    looks = !(head[0] == 'P' && head[1] == 'K') && head[8] == '{' &&
            decode_le64(head) <= kSafetensorsMaxHeaderBytes;
  }
  if (!looks && !ends_with(files_[f], ".safetensors")) return std::nullopt;
  SafetensorsBlob& b = blobs_[f];
  b.present = true;
  b.base = base;
  if (base >= size) {
    b.status = Status::truncated(name + ": the safetensors blob starts at or past the file's end (" +
                                 std::to_string(size) + " bytes)");
    return std::nullopt;
  }
  auto opened = open_safetensors(std::make_unique<SliceByteSource>(sources_[f], base, size - base, name));
  if (!opened.is_ok()) {
    b.status = opened.status();
    return std::nullopt;
  }
  b.file = std::shared_ptr<const TensorFile>(std::move(*opened));
  b.header_end = base + 8 + decode_le64(head);
  auto info = sharding_info(*b.file, name);
  if (!info.is_ok()) {
    b.status = info.status();
    b.file.reset();
    return std::nullopt;
  }
  const nlohmann::json& meta = b.file->metadata();
  if (meta.is_object() && meta.contains(kDcpVersionKey) && meta[kDcpVersionKey].is_string())
    b.dcp_version = meta[kDcpVersionKey].get<std::string>();
  return std::move(*info);
}

bool DcpCheckpoint::safetensors_header_range(size_t f, uint64_t* begin, uint64_t* end) const {
  if (f >= blobs_.size() || !blobs_[f].file) return false;
  *begin = blobs_[f].base;
  *end = blobs_[f].header_end;
  return true;
}

std::string DcpCheckpoint::item_bounds_problem(size_t i) const {
  const DcpItem& it = metadata_.items[i];
  const uint64_t size = sources_[it.file]->size();
  if (!it.is_bytes && it.file < blobs_.size() && blobs_[it.file].present && !blobs_[it.file].status.is_ok())
    return blobs_[it.file].status.message() + " (item " + it.label() + ")";
  if (range_within(it.offset, it.length, size)) return "";
  return dir_ + "/" + it.relative_path + ": item " + it.label() + " spans " + std::to_string(it.length) +
         " bytes at " + hex_offset(it.offset) + ", past the file's end (" + std::to_string(size) + " bytes)";
}

Result<std::unique_ptr<TensorFile>> DcpCheckpoint::open_item(size_t i) const {
  const DcpItem& it = metadata_.items[i];
  const std::string problem = item_bounds_problem(i);
  if (!problem.empty()) return Status::truncated(problem);
  const std::string name = dir_ + "/" + it.relative_path + "@" + hex_offset(it.offset);
  if (!it.transforms.empty()) {
    std::string t;
    for (const auto& d : it.transforms) t += (t.empty() ? "" : ", ") + d;
    return Status::not_supported(name + ": item " + it.label() + " is transformed (" + t +
                                 "); only plain torch.save items are read");
  }
  if (it.safetensors) {
    if (!item_problems_[i].empty()) return Status::corruption(item_problems_[i]);
    return std::unique_ptr<TensorFile>(std::make_unique<SharedBlobFile>(blobs_[it.file].file));
  }
  auto slice = std::make_unique<SliceByteSource>(sources_[it.file], it.offset, it.length, name);
  auto file = open_pytorch(std::move(slice));
  if (!file.is_ok()) return file.status().with_context("item " + it.label());
  return file;
}

Result<std::pair<std::unique_ptr<TensorFile>, size_t>> DcpCheckpoint::open_tensor_item(size_t tensor,
                                                                                       size_t chunk) const {
  const DcpTensor& t = metadata_.tensors[tensor];
  const DcpChunk& c = t.chunks[chunk];
  if (c.item == SIZE_MAX) {
    return Status::corruption(dir_ + "/" + kDcpMetadataFileName + ": chunk of " + t.fqn + " at " +
                              shape_to_string(c.offsets) + " has no storage item");
  }
  CKPT_ASSIGN_OR_RETURN(auto file, open_item(c.item));
  const DcpItem& it = metadata_.items[c.item];
  const std::string at = dir_ + "/" + it.relative_path + "@" + hex_offset(it.offset) + ": item " + it.label();
  size_t index = 0;
  if (it.safetensors) {
    index = chunk_named(*file, t.fqn);
    if (index == SIZE_MAX)
      return Status::corruption(at + ": '" + t.fqn + "' is not in the safetensors header");
  } else if (file->chunks().size() != 1) {
    return Status::corruption(at + ": holds " + std::to_string(file->chunks().size()) +
                              " tensors, expected exactly 1");
  }
  const ChunkInfo& inner = file->chunks()[index];
  if (inner.dtype != t.dtype || inner.shape != c.sizes) {
    return Status::corruption(at + ": holds " + std::string(dtype_name(inner.dtype)) +
                              shape_to_string(inner.shape) + ", .metadata says " + dtype_name(t.dtype) +
                              shape_to_string(c.sizes));
  }
  return std::make_pair(std::move(file), index);
}

Result<std::vector<std::unique_ptr<TensorFile>>> DcpCheckpoint::tensor_files() const {
  std::vector<std::unique_ptr<DcpDataFile>> data;
  auto meta = std::make_unique<DcpDataFile>(dir_ + "/" + kDcpMetadataFileName, nullptr);
  meta->set_globals(metadata_.globals);
  for (size_t f = 0; f < files_.size(); ++f)
    data.push_back(std::make_unique<DcpDataFile>(dir_ + "/" + files_[f], sources_[f]));
  for (size_t ti = 0; ti < metadata_.tensors.size(); ++ti) {
    const DcpTensor& t = metadata_.tensors[ti];
    for (size_t ci = 0; ci < t.chunks.size(); ++ci) {
      CKPT_ASSIGN_OR_RETURN(auto opened, open_tensor_item(ti, ci));
      const DcpItem& it = metadata_.items[t.chunks[ci].item];
      const ChunkInfo& inner = opened.first->chunks()[opened.second];
      ChunkInfo c;
      c.name = t.fqn;
      c.component = component_of_dcp_fqn(t.fqn);
      c.dtype = t.dtype;
      c.global_shape = t.shape;
      c.offsets = t.chunks[ci].offsets.to_vector();
      c.shape = t.chunks[ci].sizes.to_vector();
      c.data_offset = it.container_offset + inner.data_offset;
      c.data_bytes = inner.data_bytes;
      DcpDataFile& df = *data[it.file];
      const size_t inner_index = opened.second;
      df.add_item(it.label(), std::move(opened.first));
      df.add_chunk(std::move(c), inner_index);
    }
  }
  for (const DcpBytesEntry& b : metadata_.bytes) {
    if (b.item == SIZE_MAX) {
      return Status::corruption(dir_ + "/" + kDcpMetadataFileName + ": bytes entry " + b.fqn +
                                " has no storage item");
    }
    CKPT_ASSIGN_OR_RETURN(auto file, open_item(b.item));
    const DcpItem& it = metadata_.items[b.item];
    DcpDataFile& df = *data[it.file];
    std::vector<ChunkInfo> inner = file->chunks();
    df.mutable_metadata()[b.fqn] = file->metadata();
    df.add_item(it.label(), std::move(file));
    for (size_t k = 0; k < inner.size(); ++k) {
      ChunkInfo c = inner[k];
      c.name = c.name.empty() ? b.fqn : b.fqn + "." + c.name;
      c.component = component_of_dcp_fqn(b.fqn);
      c.data_offset += it.offset;
      df.add_chunk(std::move(c), k);
    }
  }
  std::vector<std::unique_ptr<TensorFile>> out;
  out.push_back(std::move(meta));
  for (auto& d : data) out.push_back(std::move(d));
  if (megatron_.present && megatron_.has_common) {
    if (!megatron_.common) return megatron_.common_status;
    out.push_back(std::make_unique<MegatronCommonFile>(megatron_.common));
  }
  return out;
}

nlohmann::json DcpCheckpoint::summary() const {
  nlohmann::json bytes = nlohmann::json::array();
  for (const DcpBytesEntry& b : metadata_.bytes) {
    nlohmann::json e = {{"fqn", b.fqn}};
    if (b.item != SIZE_MAX) {
      const DcpItem& it = metadata_.items[b.item];
      e["file"] = it.relative_path;
      e["offset"] = it.offset;
      e["length"] = it.length;
    }
    bytes.push_back(std::move(e));
  }
  nlohmann::json files = nlohmann::json::array();
  for (size_t f = 0; f < files_.size(); ++f)
    files.push_back({{"path", files_[f]}, {"bytes", sources_[f]->size()}});
  nlohmann::json j = {{"format", "dcp"},      {"layout", metadata_.layout},
                      {"files", files},       {"items", metadata_.items.size()},
                      {"bytes_items", bytes}, {"planner_data", metadata_.planner_data}};
  if (!metadata_.version.empty()) j["version"] = metadata_.version;
  nlohmann::json blobs = nlohmann::json::array();
  for (size_t f = 0; f < blobs_.size(); ++f) {
    if (!blobs_[f].present) continue;
    blobs.push_back(
        {{"path", files_[f]}, {"offset", blobs_[f].base}, {"dcp_version", blobs_[f].dcp_version}});
  }
  j["serialization"] = blobs.empty() ? "torch_save" : "safetensors";
  if (!blobs.empty()) j["safetensors_blobs"] = blobs;
  if (!metadata_.storage_meta.is_null()) j["storage_meta"] = metadata_.storage_meta;
  if (megatron_.present) {
    nlohmann::json problems = nlohmann::json::array();
    for (const std::string& p : megatron_.config_problems) problems.push_back(p);
    if (!megatron_.common && !megatron_.common_status.is_ok())
      problems.push_back(megatron_.common_status.message());
    j["megatron"] = {{"format", "torch_dist"},
                     {"metadata_class", metadata_.metadata_class},
                     {"metadata_json", megatron_.config},
                     {"mcore_data", metadata_.mcore_data},
                     {"common", megatron_.common ? megatron_.common->metadata() : nlohmann::json()},
                     {"problems", problems}};
  }
  return j;
}

}  // namespace ckpt
