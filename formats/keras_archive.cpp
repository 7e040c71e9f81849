#include "formats/keras_archive.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <vector>

#include "base/file_io.h"
#include "base/text.h"
#include "formats/keras_config.h"
#include "formats/numpy_file.h"
#ifdef CKPTCHECK_WITH_HDF5
#include "formats/hdf5_file.h"
#endif

namespace ckpt {

namespace {

constexpr uint64_t kKerasMaxConfigBytes = 64ull << 20;
// Keras's own guard against decompression bombs (saving_lib._reject_zip_bomb, _NPZ_MEMBER_*): a
// member declaring more than 4 GiB and more than 100x the bytes it stores is refused by Keras
// before it reads it; refused here too, before a byte is inflated.
constexpr uint64_t kKerasBombFloorBytes = 1ull << 32;
constexpr uint64_t kKerasMaxExpansion = 100;

// A window [offset, offset + size) of another source that outlives it: a stored member, read in
// place (a stored .npy inside a stored model.weights.npz is bytes of the archive itself); or a
// private copy it owns, named for messages after the member it holds.
class SliceByteSource final : public ByteSource {
 public:
  SliceByteSource(const ByteSource* parent, uint64_t offset, uint64_t size, std::string name)
      : parent_(parent), offset_(offset), size_(size), name_(std::move(name)) {}
  // All of `owned`, under another name (a private copy named for the member it holds).
  SliceByteSource(std::unique_ptr<ByteSource> owned, std::string name)
      : owned_(std::move(owned)),
        parent_(owned_.get()),
        offset_(0),
        size_(parent_->size()),
        name_(std::move(name)) {}
  uint64_t size() const override { return size_; }
  Status read_at(uint64_t offset, void* out, size_t length) const override {
    if (offset > size_ || length > size_ - offset)
      return Status::truncated(name_ + ": read of " + std::to_string(length) + " bytes at " +
                               std::to_string(offset) + " runs past its " + std::to_string(size_) + " bytes");
    return parent_->read_at(offset_ + offset, out, length);
  }
  const std::string& name() const override { return name_; }

 private:
  std::unique_ptr<ByteSource> owned_;
  const ByteSource* parent_;
  uint64_t offset_, size_;
  std::string name_;
};

// The archive, with its weights read from model.weights.h5 (one HDF5 file) or model.weights.npz (one
// numpy file per array): chunks, reads and metadata are the weights'; the container checks are the
// zip's. `parts` own the byte sources they read, and may read `source` itself (declared first, so it
// is destroyed last).
class KerasArchiveFile final : public TensorFile {
 public:
  struct Part {
    std::unique_ptr<ByteSource> inner_zip_source;  // model.weights.npz when it had to be inflated
    std::unique_ptr<TensorFile> file;
  };

  KerasArchiveFile(std::unique_ptr<ByteSource> source, ZipArchive zip, nlohmann::json metadata)
      : source_(std::move(source)), zip_(std::move(zip)), metadata_(std::move(metadata)) {}

  const ByteSource& source() const { return *source_; }
  const ZipArchive& zip() const { return zip_; }
  nlohmann::json& mutable_metadata() { return metadata_; }
  void set_npz_source(std::unique_ptr<ByteSource> npz) { npz_source_ = std::move(npz); }
  const ByteSource* npz_source() const { return npz_source_.get(); }
  // Adds one weights file; its chunks are listed under `names` (one per chunk), at `offsets` in the
  // archive where they are known (else the part's own).
  void add_part(std::unique_ptr<TensorFile> file, const std::vector<std::string>& names,
                const std::vector<std::optional<uint64_t>>& offsets) {
    const size_t part = parts_.size();
    for (size_t i = 0; i < file->chunks().size(); ++i) {
      ChunkInfo c = file->chunks()[i];
      if (i < names.size()) c.name = names[i];
      const bool in_place = i < offsets.size() && offsets[i].has_value();
      if (in_place) c.data_offset = *offsets[i];
      in_place_.push_back(in_place);
      chunks_.push_back(std::move(c));
      where_.emplace_back(part, i);
    }
    parts_.push_back(std::move(file));
  }

  const std::string& path() const override { return source_->name(); }
  const char* format_name() const override { return "keras"; }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override {
    CKPT_RETURN_IF_ERROR(check_chunk_read(path(), chunks_, index, offset, length));
    const auto [part, chunk] = where_[index];
    return parts_[part]->read_chunk(chunk, offset, out, length);
  }
  Status check_container() const override {
    CKPT_RETURN_IF_ERROR(zip_.check_local_headers(*source_));
    return zip_.check_crc32(*source_);
  }
  std::vector<std::pair<uint64_t, uint64_t>> damaged_ranges() const override {
    return zip_.crc_mismatch_ranges(*source_);
  }
  // A chunk inside stored members only is bytes of the archive itself, at the offset add_part
  // was given; one inside a deflated member is not, and that member's compressed bytes are packed.
  bool chunk_is_file_range(size_t index) const override {
    return index < in_place_.size() && in_place_[index];
  }
  std::vector<PackedRange> packed_payload_ranges() const override { return packed_; }
  void add_packed_range(const std::string& name, const ZipEntry& e, uint64_t base) {
    packed_.push_back({name, base + e.data_offset, e.compressed_size});
  }

 private:
  std::unique_ptr<ByteSource> source_;
  ZipArchive zip_;
  nlohmann::json metadata_;
  std::unique_ptr<ByteSource> npz_source_;
  std::vector<std::unique_ptr<TensorFile>> parts_;
  std::vector<ChunkInfo> chunks_;
  std::vector<std::pair<size_t, size_t>> where_;  // chunk -> (part, the part's chunk)
  std::vector<bool> in_place_;                    // chunk -> its data_offset is the archive's
  std::vector<PackedRange> packed_;
};

Status refuse_bomb(const std::string& file, const ZipEntry& e) {
  if (e.method == kZipStored || e.size <= kKerasBombFloorBytes ||
      e.size <= kKerasMaxExpansion * e.compressed_size)
    return Status::ok();
  return Status::not_supported(file + ": zip member '" + e.name + "' declares " + std::to_string(e.size) +
                               " bytes but stores only " + std::to_string(e.compressed_size) +
                               ": a decompression bomb, refused as Keras's loader refuses it "
                               "(saving_lib._reject_zip_bomb)");
}

// Streams a member (stored or inflated) into the file `to`.
Status copy_member(const ByteSource& source, const ZipArchive& zip, const ZipEntry& e,
                   const std::string& to) {
  CKPT_RETURN_IF_ERROR(refuse_bomb(source.name(), e));
  std::FILE* out = std::fopen(to.c_str(), "wb");
  if (!out) return Status::io_error(to + ": cannot create a copy of " + e.name);
  Status st = zip.stream(source, e, [&](const uint8_t* bytes, size_t n) {
    return std::fwrite(bytes, 1, n, out) == n ? Status::ok() : Status::io_error(to + ": short write");
  });
  if (std::fclose(out) != 0 && st.is_ok()) st = Status::io_error(to + ": cannot write");
  return st;
}

// A member as a byte source: in place when stored, else inflated into a private file whose name is
// removed at once (the source keeps its descriptor), so no exit path leaves it behind.
Result<std::unique_ptr<ByteSource>> member_source(const ByteSource& source, const ZipArchive& zip,
                                                  const ZipEntry& e, const std::string& name) {
  if (e.method == kZipStored)
    return std::unique_ptr<ByteSource>(new SliceByteSource(&source, e.data_offset, e.size, name));
  CKPT_ASSIGN_OR_RETURN(std::string scratch, make_scratch_directory("", "ckptcheck-keras"));
  const std::string copy = scratch + "/member";
  Status copied = copy_member(source, zip, e, copy);
  Result<std::unique_ptr<FileByteSource>> opened =
      copied.is_ok() ? FileByteSource::open(copy) : Result<std::unique_ptr<FileByteSource>>(copied);
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  if (!opened.is_ok()) return opened.status();
  return std::unique_ptr<ByteSource>(new SliceByteSource(std::move(*opened), name));
}

// model.weights.npz (saving_lib.NpzIOStore): numpy.savez's zip of `<path>.npy` arrays, which Keras
// reads with np.load(allow_pickle=False). A numeric array is one tensor named `<path>`. An object
// array is a pickle: Keras 3.9+ refuses to load it and Keras 3.0-3.8 (allow_pickle=True) ran it, so
// it is refused here as code, naming the member, and nothing of it is listed as weights. (Keras's own
// writer stores each layer's variables as a dict, which numpy pickles: a real npz-format archive of a
// model with weights is such a pickle.)
Status read_npz_weights(KerasArchiveFile& archive, const ZipEntry& member) {
  const std::string file = archive.path();
  const std::string label = file + ": " + member.name;
  CKPT_RETURN_IF_ERROR(refuse_bomb(file, member));
  const ByteSource* npz = &archive.source();
  uint64_t base = member.data_offset;  // where the npz's bytes sit in the archive, when stored
  if (member.method != kZipStored) {
    archive.add_packed_range(member.name, member, 0);  // every array is inside its compressed bytes
    CKPT_ASSIGN_OR_RETURN(auto inflated, member_source(archive.source(), archive.zip(), member, label));
    archive.set_npz_source(std::move(inflated));
    npz = archive.npz_source();
    base = 0;
  } else {
    archive.set_npz_source(std::unique_ptr<ByteSource>(
        new SliceByteSource(&archive.source(), member.data_offset, member.size, label)));
    npz = archive.npz_source();
  }
  auto inner = ZipArchive::open(*npz, ZipMethods::kStoredOrDeflated);
  if (!inner.is_ok()) return inner.status().with_context(label + " (numpy.savez's zip)");
  CKPT_RETURN_IF_ERROR(inner->check_local_headers(*npz).with_context(label));
  nlohmann::json& code = archive.mutable_metadata()["keras_code"];
  if (!code.is_array()) code = nlohmann::json::array();
  for (const ZipEntry& e : inner->entries()) {
    if (!ends_with(e.name, ".npy")) {
      return Status::not_supported(label + ": member '" + e.name +
                                   "' is no .npy array (numpy.savez writes only <name>.npy)");
    }
    const std::string stem = e.name.substr(0, e.name.size() - 4);
    CKPT_RETURN_IF_ERROR(refuse_bomb(label, e));
    CKPT_ASSIGN_OR_RETURN(auto bytes, member_source(*npz, *inner, e, label + "/" + e.name));
    auto array = open_numpy(std::move(bytes));
    if (!array.is_ok()) return array.status();
    if ((*array)->metadata().value("numpy_object_array", false)) {
      std::string globals;
      for (const PickleGlobal& g : (*array)->pickle_globals())
        globals += (globals.empty() ? "" : ", ") + g.name;
      code.push_back(
          {{"attribute", member.name + "/" + e.name},
           {"layer", stem},
           {"class_name", "object array"},
           {"reason", "a pickle (naming " + (globals.empty() ? std::string("no global") : globals) +
                          ") that np.load reads only with allow_pickle=True: Keras 3.9+ loads "
                          ".npz weights without it and fails here, Keras 3.0-3.8 loaded them "
                          "with it"}});
      continue;
    }
    if (member.method == kZipStored && e.method != kZipStored)
      archive.add_packed_range(member.name + "/" + e.name, e, base);
    std::vector<std::optional<uint64_t>> offsets;
    for (const ChunkInfo& c : (*array)->chunks())
      offsets.push_back(member.method == kZipStored && e.method == kZipStored
                            ? std::optional<uint64_t>(base + e.data_offset + c.data_offset)
                            : std::nullopt);
    archive.add_part(std::move(*array), {stem}, offsets);
  }
  if (code.empty()) archive.mutable_metadata().erase("keras_code");
  return Status::ok();
}

}  // namespace

bool is_keras_archive(const ZipArchive& zip) {
  bool config = false, weights = false;
  for (const ZipEntry& e : zip.entries()) {
    if (e.name == "config.json") config = true;
    if (e.name == "model.weights.h5" || e.name == "model.weights.npz") weights = true;
    if (e.name.size() > 9 && e.name.compare(e.name.size() - 9, 9, "/data.pkl") == 0) return false;
  }
  return config && weights;
}

bool is_keras_file(const std::string& path) {
  auto source = FileByteSource::open(path);
  if (!source.is_ok()) return false;
  auto zip = ZipArchive::open(**source, ZipMethods::kStoredOrDeflated);
  return zip.is_ok() && is_keras_archive(*zip);
}

Result<std::unique_ptr<TensorFile>> open_keras_archive(std::unique_ptr<ByteSource> source, ZipArchive zip) {
  const std::string file = source->name();
  nlohmann::json metadata = nlohmann::json::object();
  const ZipEntry* config = zip.find("config.json");
  if (!config) return Status::corruption(file + ": a Keras archive without config.json");
  CKPT_RETURN_IF_ERROR(refuse_bomb(file, *config));
  CKPT_ASSIGN_OR_RETURN(std::string text, zip.read(*source, *config, kKerasMaxConfigBytes));
  nlohmann::json code = nlohmann::json::array();
  for (const KerasCodeReference& k : find_keras_code("config.json", text)) {
    code.push_back(
        {{"attribute", k.attribute}, {"layer", k.layer}, {"class_name", k.class_name}, {"reason", k.reason}});
  }
  if (!code.empty()) metadata["keras_code"] = std::move(code);
  if (const ZipEntry* meta = zip.find("metadata.json")) {
    CKPT_ASSIGN_OR_RETURN(std::string m, zip.read(*source, *meta, 1 << 20));
    const auto j = nlohmann::json::parse(m, nullptr, false);
    if (j.is_object() && j.contains("keras_version")) metadata["keras_version"] = j["keras_version"];
  }
  // Keras's loader takes model.weights.h5 when both are present (_load_model_from_fileobj).
  const ZipEntry* weights = zip.find("model.weights.h5");
  if (!weights) {
    const ZipEntry* npz = zip.find("model.weights.npz");
    if (!npz) return Status::corruption(file + ": a Keras archive without model.weights.h5 or .npz");
    metadata["keras_weights"] = npz->name;
    const ZipEntry member = *npz;
    auto archive = std::make_unique<KerasArchiveFile>(std::move(source), std::move(zip), std::move(metadata));
    CKPT_RETURN_IF_ERROR(read_npz_weights(*archive, member));
    return std::unique_ptr<TensorFile>(std::move(archive));
  }
  metadata["keras_weights"] = weights->name;
#ifdef CKPTCHECK_WITH_HDF5
  const ZipEntry weights_entry = *weights;  // `zip` moves into the archive below
  CKPT_RETURN_IF_ERROR(refuse_bomb(file, *weights));
  CKPT_ASSIGN_OR_RETURN(std::string scratch, make_scratch_directory("", "ckptcheck-keras"));
  const std::string copy = scratch + "/model.weights.h5";
  Status copied = copy_member(*source, zip, *weights, copy);
  auto opened = copied.is_ok() ? open_hdf5(copy) : Result<std::unique_ptr<TensorFile>>(copied);
  // The reader keeps the copy open and reads its chunks as byte ranges of that descriptor: the copy's
  // name goes at once, so no exit path (commands release their sources without destroying them)
  // leaves it behind.
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  if (!opened.is_ok()) return opened.status().with_context(file + ": model.weights.h5");
  for (const auto& [key, value] : (*opened)->metadata().items()) {
    if (!metadata.contains(key)) metadata[key] = value;
  }
  auto archive = std::make_unique<KerasArchiveFile>(std::move(source), std::move(zip), std::move(metadata));
  // A stored member is the HDF5 file's own bytes at its data offset: each dataset's payload (a plain
  // range of the HDF5 file, formats/hdf5_file.h) lies that far into the archive. A deflated one is
  // sealed as its compressed bytes.
  std::vector<std::string> names;
  std::vector<std::optional<uint64_t>> offsets;
  for (const ChunkInfo& c : (*opened)->chunks()) {
    names.push_back(c.name);
    offsets.push_back(weights_entry.method == kZipStored
                          ? std::optional<uint64_t>(weights_entry.data_offset + c.data_offset)
                          : std::nullopt);
  }
  if (weights_entry.method != kZipStored) archive->add_packed_range(weights_entry.name, weights_entry, 0);
  archive->add_part(std::move(*opened), names, offsets);
  return std::unique_ptr<TensorFile>(std::move(archive));
#else
  return Status::not_supported(file + ": a Keras archive, but ckptcheck was built without HDF5");
#endif
}

}  // namespace ckpt
