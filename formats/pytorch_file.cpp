#include "formats/pytorch_file.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/byte_coding.h"
#include "base/text.h"
#include "formats/keras_archive.h"
#include "formats/pickle_reader.h"
#include "formats/torch_load_dispatch.h"
#include "formats/zip_archive.h"

namespace ckpt {

namespace {

constexpr const char* kComponents[] = {"model", "optimizer", "scheduler", "scaler",
                                       "rng",   "data",      "progress"};

// A bare state dict carries no component; a full training-state dict says it in its first key.
std::string component_of_pickle_key(const std::string& name) {
  const std::string first = name.substr(0, name.find('.'));
  for (const char* c : kComponents) {
    if (first == c) return c;
  }
  if (first == "state" || first == "param_groups") return "optimizer";
  return "model";
}

// Where one tensor's elements are: a plain file range, a strided view of a file range (gathered
// on read), or bytes held in memory (a numpy array from the pickle, already row-major).
struct TensorLayout {
  enum class Kind : uint8_t { kRange, kGather, kInline } kind = Kind::kRange;
  uint64_t span_offset = 0;            // kGather: file offset of the lowest storage element the view touches
  uint64_t span_bytes = 0;             // kGather: bytes from there to the end of the highest one
  std::vector<int64_t> shape, stride;  // kGather: strides relative to span_offset, in elements
  std::string bytes;                   // kInline
};

bool is_row_major(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride) {
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return true;  // an empty tensor has no layout
    if (shape[d] != 1 && stride[d] != expected) return false;
    if (shape[d] > 1 && expected > INT64_MAX / shape[d]) return false;
    expected *= shape[d];
  }
  return true;
}

// Copies the view's elements in row-major order from `span` (the storage from the view's lowest
// element on) into `out`. Bounds were checked when the layout was made.
void gather(const uint8_t* span, const std::vector<int64_t>& shape, const std::vector<int64_t>& stride,
            size_t elem, uint8_t* out) {
  const size_t rank = shape.size();
  if (rank == 0) {
    std::memcpy(out, span, elem);
    return;
  }
  std::vector<int64_t> index(rank, 0);
  const int64_t inner = shape[rank - 1], inner_stride = stride[rank - 1];
  int64_t base = 0;  // storage index of index[0..rank-2], 0 in the last dim
  for (;;) {
    if (inner_stride == 1) {
      std::memcpy(out, span + static_cast<size_t>(base) * elem, static_cast<size_t>(inner) * elem);
      out += static_cast<size_t>(inner) * elem;
    } else {
      for (int64_t k = 0; k < inner; ++k, out += elem)
        std::memcpy(out, span + static_cast<size_t>(base + k * inner_stride) * elem, elem);
    }
    size_t d = rank - 1;
    while (d-- > 0) {
      base += stride[d];
      if (++index[d] < shape[d]) break;
      base -= stride[d] * shape[d];
      index[d] = 0;
    }
    if (d == SIZE_MAX) return;
  }
}

class PytorchTensorFile final : public TensorFile {
 public:
  PytorchTensorFile(std::unique_ptr<ByteSource> source, std::vector<ChunkInfo> chunks,
                    std::vector<TensorLayout> layouts, nlohmann::json metadata, PyValuePtr value,
                    std::vector<PickleGlobal> globals, std::optional<ZipArchive> zip, const char* format)
      : format_(format),
        source_(std::move(source)),
        chunks_(std::move(chunks)),
        layouts_(std::move(layouts)),
        metadata_(std::move(metadata)),
        value_(std::move(value)),
        globals_(std::move(globals)),
        zip_(std::move(zip)) {
    for (const auto& l : layouts_) plain_ = plain_ && l.kind == TensorLayout::Kind::kRange;
  }

  const std::string& path() const override { return source_->name(); }
  const char* format_name() const override { return format_; }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  PyValuePtr state_value() const override { return value_; }
  const std::vector<PickleGlobal>& pickle_globals() const override { return globals_; }
  const ByteSource* payload_source() const override { return plain_ ? source_.get() : nullptr; }
  // The local headers first (a flipped byte there is in no member's CRC-32), then every CRC-32.
  Status check_container() const override {
    if (!zip_) return Status::ok();
    CKPT_RETURN_IF_ERROR(zip_->check_local_headers(*source_));
    return zip_->check_crc32(*source_);
  }
  Status check_structure_members() const override {
    if (!zip_) return Status::ok();
    // Storages are "<folder>/data/<key>"; every other member is read to build the structure.
    return zip_->check_crc32(*source_, [](const std::string& name) {
      const size_t slash = name.find('/');
      return name.compare(slash == std::string::npos ? 0 : slash + 1, 5, "data/") != 0;
    });
  }
  std::vector<std::pair<uint64_t, uint64_t>> damaged_ranges() const override {
    return zip_ ? zip_->crc_mismatch_ranges(*source_) : std::vector<std::pair<uint64_t, uint64_t>>{};
  }

  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override {
    CKPT_RETURN_IF_ERROR(check_chunk_read(path(), chunks_, index, offset, length));
    const ChunkInfo& c = chunks_[index];
    const TensorLayout& l = layouts_[index];
    switch (l.kind) {
      case TensorLayout::Kind::kRange: return source_->read_at(c.data_offset + offset, out, length);
      case TensorLayout::Kind::kInline:
        std::memcpy(out, l.bytes.data() + offset, length);
        return Status::ok();
      case TensorLayout::Kind::kGather: break;
    }
    // One strided tensor is kept gathered, so streaming it in pieces reads the file once.
    std::lock_guard<std::mutex> lock(mu_);
    if (gathered_index_ != index) {
      if (l.span_bytes > kPytorchMaxGatherBytes || c.data_bytes > kPytorchMaxGatherBytes) {
        return Status::not_supported(path() + ": tensor '" + c.name + "': strided view over " +
                                     std::to_string(l.span_bytes) + " bytes of storage (" +
                                     std::to_string(c.data_bytes) + " bytes gathered) is more than the " +
                                     std::to_string(kPytorchMaxGatherBytes) + "-byte limit");
      }
      std::vector<uint8_t> span(static_cast<size_t>(l.span_bytes));
      CKPT_RETURN_IF_ERROR(source_->read_at(l.span_offset, span.data(), span.size()));
      gathered_.assign(static_cast<size_t>(c.data_bytes), 0);
      gather(span.data(), l.shape, l.stride, dtype_size(c.dtype), gathered_.data());
      gathered_index_ = index;
    }
    std::memcpy(out, gathered_.data() + offset, length);
    return Status::ok();
  }

 private:
  const char* format_;  // "pytorch" | "torchscript"
  std::unique_ptr<ByteSource> source_;
  std::vector<ChunkInfo> chunks_;
  std::vector<TensorLayout> layouts_;
  nlohmann::json metadata_;
  PyValuePtr value_;
  std::vector<PickleGlobal> globals_;
  std::optional<ZipArchive> zip_;
  bool plain_ = true;
  mutable std::mutex mu_;
  mutable size_t gathered_index_ = SIZE_MAX;
  mutable std::vector<uint8_t> gathered_;
};

// A storage's elements in the file: where element 0 is and how many there are.
struct StorageBytes {
  uint64_t offset = 0;
  int64_t numel = 0;
};

// The chunk and layout of one tensor, every index bounds-checked against its storage.
Status locate_tensor(const PickledTensor& t, const StorageBytes* storage, const std::string& file,
                     ChunkInfo* c, TensorLayout* layout) {
  const std::string where = file + ": tensor '" + t.name + "'";
  const size_t elem = dtype_size(t.dtype);
  c->name = t.name;
  c->component = component_of_pickle_key(t.name);
  c->dtype = t.dtype;
  c->global_shape = t.shape;
  c->shape = t.shape;
  c->offsets.assign(t.shape.size(), 0);
  const auto numel = checked_numel(t.shape);
  const auto nbytes = checked_nbytes(t.shape, t.dtype);
  if (!numel || !nbytes) {
    return Status::corruption(where + ": shape " + shape_to_string(t.shape) +
                              " has a negative or overflowing size");
  }
  c->data_bytes = *nbytes;
  const int64_t storage_numel = storage ? storage->numel : t.storage_numel;
  // The lowest and highest storage element the view touches; strides are never negative in torch.
  int64_t hi = t.storage_offset;
  if (t.storage_offset < 0) return Status::corruption(where + ": negative storage offset");
  for (size_t d = 0; d < t.shape.size() && *numel > 0; ++d) {
    if (t.stride[d] < 0) {
      return Status::corruption(where + ": negative stride " + std::to_string(t.stride[d]) + " in dim " +
                                std::to_string(d));
    }
    if (t.shape[d] > 1 && t.stride[d] > (INT64_MAX - hi) / (t.shape[d] - 1)) {
      return Status::corruption(where + ": shape " + shape_to_string(t.shape) + " with stride " +
                                shape_to_string(t.stride) + " overflows");
    }
    hi += (t.shape[d] - 1) * t.stride[d];
  }
  if (*numel > 0 && hi >= storage_numel) {
    return Status::corruption(where + ": view of shape " + shape_to_string(t.shape) + ", stride " +
                              shape_to_string(t.stride) + " at storage offset " +
                              std::to_string(t.storage_offset) + " reaches element " + std::to_string(hi) +
                              ", past the storage's " + std::to_string(storage_numel) + " elements");
  }
  const bool row_major = is_row_major(t.shape, t.stride);
  if (t.inline_payload) {  // numpy: the bytes are the storage; keep them row-major in memory
    layout->kind = TensorLayout::Kind::kInline;
    if (row_major) {
      layout->bytes = t.inline_bytes.substr(static_cast<size_t>(t.storage_offset) * elem, c->data_bytes);
    } else {
      layout->bytes.assign(static_cast<size_t>(c->data_bytes), '\0');
      gather(reinterpret_cast<const uint8_t*>(t.inline_bytes.data()) +
                 static_cast<size_t>(t.storage_offset) * elem,
             t.shape, t.stride, elem, reinterpret_cast<uint8_t*>(layout->bytes.data()));
    }
    c->data_offset = 0;
    return Status::ok();
  }
  c->data_offset = storage->offset + static_cast<uint64_t>(t.storage_offset) * elem;
  if (row_major || *numel == 0) {
    layout->kind = TensorLayout::Kind::kRange;
    return Status::ok();
  }
  layout->kind = TensorLayout::Kind::kGather;
  layout->span_offset = c->data_offset;
  layout->span_bytes = static_cast<uint64_t>(hi - t.storage_offset + 1) * elem;
  layout->shape = t.shape;
  layout->stride = t.stride;
  return Status::ok();
}

Result<std::string> archive_prefix(const ZipArchive& zip, const std::string& file) {
  std::string prefix;
  for (const auto& e : zip.entries()) {
    const auto slash = e.name.find('/');
    if (slash == std::string::npos || e.name.substr(slash) != "/data.pkl") continue;
    if (!prefix.empty())
      return Status::corruption(file + ": more than one data.pkl ('" + prefix + "/data.pkl', '" + e.name +
                                "')");
    prefix = e.name.substr(0, slash);
  }
  if (prefix.empty())
    return Status::not_supported(file + ": zip has no <archive>/data.pkl (not a torch.save file)");
  // PyTorchFileReader takes the archive's folder from the directory's first member, and reads
  // <that folder>/data.pkl; a data.pkl in another folder is one torch.load would not read.
  const std::string& first = zip.entries().front().name;
  if (first.substr(0, first.find('/')) != prefix) {
    return Status::ambiguous(file + ": data.pkl is in '" + prefix + "/' but the first member, '" + first +
                             "', names another archive folder, the one torch.load reads; refused");
  }
  return prefix;
}

// The file, with a chunk and layout for every tensor; `storage_of` finds a storage key's bytes.
template <typename StorageOf>
Result<std::unique_ptr<TensorFile>> make_file(std::unique_ptr<ByteSource> source, PickledStateDict dict,
                                              StorageOf&& storage_of, std::optional<ZipArchive>* zip,
                                              const char* format = "pytorch") {
  const std::string file = source->name();
  std::vector<ChunkInfo> chunks(dict.tensors.size());
  std::vector<TensorLayout> layouts(dict.tensors.size());
  for (size_t i = 0; i < dict.tensors.size(); ++i) {
    const PickledTensor& t = dict.tensors[i];
    std::optional<StorageBytes> storage;
    if (!t.inline_payload) {
      CKPT_ASSIGN_OR_RETURN(storage, storage_of(t));
    }
    CKPT_RETURN_IF_ERROR(locate_tensor(t, storage ? &*storage : nullptr, file, &chunks[i], &layouts[i]));
    chunks[i].alias_of = t.alias_of;
  }
  return std::unique_ptr<TensorFile>(new PytorchTensorFile(
      std::move(source), std::move(chunks), std::move(layouts), std::move(dict.metadata),
      std::move(dict.value), std::move(dict.globals), std::move(*zip), format));
}

}  // namespace

namespace {

// torch.jit.save writes the module's TorchScript source under <archive>/code/ and constants.pkl;
// torch.save never does. torch.load dispatches on constants.pkl (formats/torch_load_dispatch.h).
bool is_torchscript(const ZipArchive& zip) {
  for (const auto& e : zip.entries()) {
    if (is_torchscript_member(e.name)) return true;
  }
  return false;
}

// A TorchScript archive's other parts: constants.pkl (read and gated like data.pkl, its tensors named
// "CONSTANTS.<i>"), and the names of its code/ members, which torch.jit.load compiles and runs.
Status add_torchscript_parts(const ZipArchive& zip, const ByteSource& source, const std::string& prefix,
                             PickledStateDict* dict) {
  nlohmann::json code = nlohmann::json::array();
  for (const auto& e : zip.entries()) {
    if (starts_with(e.name, prefix + "/code/") && !ends_with(e.name, ".debug_pkl"))
      code.push_back(e.name.substr(prefix.size() + 1));
  }
  dict->metadata["torchscript_code"] = std::move(code);
  const ZipEntry* constants = zip.find(prefix + "/constants.pkl");
  if (!constants) return Status::ok();
  CKPT_ASSIGN_OR_RETURN(std::string pkl, zip.read(source, *constants, kPytorchMaxPickleBytes));
  CKPT_ASSIGN_OR_RETURN(PickledStateDict c,
                        read_tensor_pickle(reinterpret_cast<const uint8_t*>(pkl.data()), pkl.size(),
                                           source.name() + ": " + constants->name));
  for (PickledTensor& t : c.tensors) {
    t.name = kTorchScriptConstantsPrefix + t.name;
    if (!t.inline_payload) t.storage_key = "constants/" + t.storage_key;
    if (!t.alias_of.empty()) t.alias_of = kTorchScriptConstantsPrefix + t.alias_of;
    dict->tensors.push_back(std::move(t));
  }
  for (PickleGlobal& g : c.globals) {
    g.pickle = constants->name;
    dict->globals.push_back(std::move(g));
  }
  if (!c.metadata.empty()) dict->metadata["torchscript_constants"] = std::move(c.metadata);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<TensorFile>> open_pytorch(std::unique_ptr<ByteSource> source) {
  const std::string file = source->name();
  // Keras's zipfile reads deflated members, torch's writers never deflate a pickle or a storage: which
  // archive this is decides which rule applies.
  CKPT_ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::open(*source, ZipMethods::kStoredOrDeflated));
  if (is_keras_archive(zip)) return open_keras_archive(std::move(source), std::move(zip));
  CKPT_RETURN_IF_ERROR(zip.require_torch_methods(file));
  CKPT_ASSIGN_OR_RETURN(std::string prefix, archive_prefix(zip, file));
  if (const ZipEntry* bo = zip.find(prefix + "/byteorder")) {
    CKPT_ASSIGN_OR_RETURN(std::string order, zip.read(*source, *bo, 16));
    if (order != "little")
      return Status::not_supported(file + ": byteorder '" + order + "' (only little-endian is read)");
  }
  CKPT_ASSIGN_OR_RETURN(std::string pkl,
                        zip.read(*source, *zip.find(prefix + "/data.pkl"), kPytorchMaxPickleBytes));
  CKPT_ASSIGN_OR_RETURN(PickledStateDict dict,
                        read_tensor_pickle(reinterpret_cast<const uint8_t*>(pkl.data()), pkl.size(),
                                           file + ": " + prefix + "/data.pkl"));
  for (PickleGlobal& g : dict.globals) g.pickle = prefix + "/data.pkl";
  const bool torchscript = is_torchscript(zip);
  if (torchscript) CKPT_RETURN_IF_ERROR(add_torchscript_parts(zip, *source, prefix, &dict));
  auto storage_of = [&](const PickledTensor& t) -> Result<StorageBytes> {
    const std::string where = file + ": tensor '" + t.name + "'";
    // data.pkl's storage keys never hold a '/' (formats/pickle_reader.h); constants.pkl's are
    // "constants/<key>" (add_torchscript_parts).
    const std::string entry_name =
        prefix + "/" + (t.storage_key.find('/') == std::string::npos ? "data/" : "") + t.storage_key;
    const ZipEntry* entry = zip.find(entry_name);
    if (!entry) return Status::corruption(where + ": storage entry '" + entry_name + "' is missing");
    const auto storage_bytes = t.storage_nbytes >= 0 ? std::optional<uint64_t>(t.storage_nbytes)
                                                     : checked_nbytes(DimsView(&t.storage_numel, 1), t.dtype);
    if (!storage_bytes || *storage_bytes != entry->size) {
      const std::string want =
          t.storage_nbytes >= 0 ? std::to_string(t.storage_nbytes) + " bytes (untyped)"
                                : std::to_string(t.storage_numel) + " " + dtype_name(t.dtype) + " elements";
      return Status::corruption(where + ": storage '" + entry_name + "' should hold " + want +
                                ", entry has " + std::to_string(entry->size) + " bytes");
    }
    return StorageBytes{entry->data_offset, t.storage_numel};
  };
  std::optional<ZipArchive> kept(zip);
  return make_file(std::move(source), std::move(dict), storage_of, &kept,
                   torchscript ? "torchscript" : "pytorch");
}

namespace {

// Runs the legacy format's pickles from the start of `head` (a prefix of the file).
struct LegacyPickles {
  PickledStateDict object;
  std::vector<std::string> keys;
  uint64_t storages_offset = 0;  // where the first storage record starts
};

// Runs the pickles torch.load runs, in its order, from the start of `head`. A first pickle that is
// no magic number is a plain pickle: `plain` gets it, and the rest of the stream is never read
// (torch.load raises "Invalid magic number" once it has run it).
Result<LegacyPickles> read_legacy_pickles(const uint8_t* head, size_t n, const std::string& file,
                                          std::optional<PickledStateDict>* plain) {
  LegacyPickles out;
  size_t pos = 0;
  // torch.load runs all four pickles through its unpickler, so the globals of each are the file's.
  std::vector<PickleGlobal> globals;
  auto next = [&](const char* what) -> Result<PickledStateDict> {
    CKPT_ASSIGN_OR_RETURN(
        PickledStateDict d,
        read_tensor_pickle(head + pos, n - pos, file + ": " + what + " pickle at " + std::to_string(pos)));
    for (PickleGlobal g : d.globals) {
      g.pickle = std::string(what) + " pickle at file offset " + hex_offset(pos);
      g.first_offset += pos;  // a legacy file is one stream: name the file offset
      globals.push_back(std::move(g));
    }
    pos += d.end_offset;
    return d;
  };
  CKPT_ASSIGN_OR_RETURN(PickledStateDict magic, next("first"));
  if (!is_legacy_magic(magic)) {
    magic.globals = std::move(globals);
    *plain = std::move(magic);
    return out;
  }
  CKPT_ASSIGN_OR_RETURN(PickledStateDict version, next("protocol version"));
  if (version.metadata.value("value", nlohmann::json()) != 1001) {
    return Status::not_supported(file + ": legacy torch.save protocol version " +
                                 version.metadata.value("value", nlohmann::json()).dump() +
                                 " (expected 1001)");
  }
  CKPT_ASSIGN_OR_RETURN(PickledStateDict sys_info, next("sys_info"));
  const nlohmann::json info = sys_info.metadata.value("value", nlohmann::json::object());
  if (!info.is_object() || (info.contains("little_endian") && info["little_endian"] != true))
    return Status::not_supported(file + ": legacy torch.save written on a big-endian machine");
  CKPT_ASSIGN_OR_RETURN(out.object, next("object"));
  CKPT_ASSIGN_OR_RETURN(PickledStateDict keys, next("storage keys"));
  const nlohmann::json list = keys.metadata.value("value", nlohmann::json());
  if (!list.is_array()) return Status::corruption(file + ": legacy storage key list is not a list");
  for (const auto& k : list) {
    if (!k.is_string()) return Status::corruption(file + ": legacy storage key is not a string");
    out.keys.push_back(k.get<std::string>());
  }
  out.storages_offset = pos;
  out.object.globals = std::move(globals);
  return out;
}

}  // namespace

Result<std::unique_ptr<TensorFile>> open_pytorch_legacy(std::unique_ptr<ByteSource> source) {
  const std::string file = source->name();
  const uint64_t size = source->size();
  // The pickles' length is known only by running them: read a prefix, and a longer one if they
  // run past it, up to the pickle limit.
  std::vector<uint8_t> head;
  Result<LegacyPickles> pickles = Status::truncated(file);
  std::optional<PickledStateDict> plain;
  for (uint64_t want = 1 << 20;; want *= 4) {
    const uint64_t n = std::min({want, size, kPytorchMaxPickleBytes});
    head.resize(static_cast<size_t>(n));
    CKPT_RETURN_IF_ERROR(source->read_at(0, head.data(), head.size()));
    pickles = read_legacy_pickles(head.data(), head.size(), file, &plain);
    if (pickles.is_ok() || pickles.status().code() != StatusCode::kTruncated || n == size) break;
    if (n == kPytorchMaxPickleBytes) {
      return Status::not_supported(file + ": legacy torch.save pickles run past " +
                                   std::to_string(kPytorchMaxPickleBytes) + " bytes");
    }
  }
  if (!pickles.is_ok()) return pickles.status();
  head = {};
  if (plain) {  // what pickle.load gives: numpy arrays are tensors; a storage needs torch's loader
    auto no_storage = [&](const PickledTensor& t) -> Result<StorageBytes> {
      return Status::corruption(
          file + ": tensor '" + t.name +
          "': a plain pickle names a storage (a persistent id), which only torch.load's "
          "own formats hold; pickle.load refuses it");
    };
    std::optional<ZipArchive> none;
    return make_file(std::move(source), std::move(*plain), no_storage, &none, "pickle");
  }
  // The storage records: numel (u64 LE), then the elements, in key-list order, to the end of file.
  std::unordered_map<std::string, DType> dtypes;
  for (const auto& s : pickles->object.storages) dtypes.emplace(s.key, s.dtype);
  std::unordered_map<std::string, StorageBytes> storages;
  uint64_t pos = pickles->storages_offset;
  for (const std::string& key : pickles->keys) {
    const auto dt = dtypes.find(key);
    if (dt == dtypes.end()) {
      return Status::corruption(file + " @" + std::to_string(pos) + ": storage '" + key +
                                "' is listed but no persistent id names it");
    }
    uint8_t count[8];
    if (!range_within(pos, 8, size)) {
      return Status::truncated(file + " @" + std::to_string(pos) + ": file ends before storage '" + key +
                               "'");
    }
    CKPT_RETURN_IF_ERROR(source->read_at(pos, count, 8));
    const uint64_t numel = decode_le64(count);
    const size_t elem = dtype_size(dt->second);
    if (numel > static_cast<uint64_t>(INT64_MAX) / elem || !range_within(pos + 8, numel * elem, size)) {
      return Status::truncated(file + " @" + std::to_string(pos) + ": storage '" + key + "' of " +
                               std::to_string(numel) + " " + dtype_name(dt->second) +
                               " elements runs past the end (" + std::to_string(size) + " bytes)");
    }
    if (!storages.emplace(key, StorageBytes{pos + 8, static_cast<int64_t>(numel)}).second)
      return Status::corruption(file + ": storage '" + key + "' is listed twice");
    pos += 8 + numel * elem;
  }
  if (pos != size) {
    return Status::corruption(file + " @" + std::to_string(pos) + ": " + std::to_string(size - pos) +
                              " bytes after the last storage (trailing garbage)");
  }
  auto storage_of = [&](const PickledTensor& t) -> Result<StorageBytes> {
    const auto it = storages.find(t.storage_key);
    if (it == storages.end()) {
      return Status::corruption(file + ": tensor '" + t.name + "': storage '" + t.storage_key +
                                "' is not in the file's storage list");
    }
    if (dtypes.at(t.storage_key) != t.dtype) {
      return Status::not_supported(file + ": tensor '" + t.name + "': storage '" + t.storage_key +
                                   "' is viewed as two dtypes");
    }
    return it->second;
  };
  std::optional<ZipArchive> none;
  return make_file(std::move(source), std::move(pickles->object), storage_of, &none);
}

Result<std::unique_ptr<TensorFile>> open_pytorch_file(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  uint8_t magic[4] = {};
  if (source->size() >= sizeof magic) CKPT_RETURN_IF_ERROR(source->read_at(0, magic, sizeof magic));
  if (std::memcmp(magic, "PK\3\4", 4) == 0) return open_pytorch(std::move(source));
  return open_pytorch_legacy(std::move(source));  // what torch.load reads with pickle.load
}

bool is_torchscript_file(const std::string& path) {
  auto source = FileByteSource::open(path);
  if (!source.is_ok()) return false;
  auto zip = ZipArchive::open(**source);
  if (!zip.is_ok()) return false;
  for (const auto& e : zip->entries()) {
    if (is_torchscript_member(e.name)) return true;
  }
  return false;
}

}  // namespace ckpt
