#include "formats/keras_archive.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "base/file_io.h"
#include "formats/keras_config.h"
#ifdef CKPTCHECK_WITH_HDF5
#include "formats/hdf5_file.h"
#endif

namespace ckpt {

namespace {

constexpr uint64_t kKerasMaxConfigBytes = 64ull << 20;

// The archive, with the weights' TensorFile read from a private copy of model.weights.h5: chunks,
// reads and metadata are the weights'; the container checks are the zip's.
class KerasArchiveFile final : public TensorFile {
 public:
  KerasArchiveFile(std::unique_ptr<ByteSource> source, ZipArchive zip, std::unique_ptr<TensorFile> weights,
                   std::string scratch, nlohmann::json metadata)
      : source_(std::move(source)),
        zip_(std::move(zip)),
        weights_(std::move(weights)),
        scratch_(std::move(scratch)),
        metadata_(std::move(metadata)) {
    if (weights_) chunks_ = weights_->chunks();
  }
  ~KerasArchiveFile() override {
    weights_.reset();
    std::error_code ec;
    if (!scratch_.empty()) std::filesystem::remove_all(scratch_, ec);
  }

  const std::string& path() const override { return source_->name(); }
  const char* format_name() const override { return "keras"; }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override {
    if (!weights_) return Status::not_found(path() + ": no model.weights.h5");
    return weights_->read_chunk(index, offset, out, length);
  }
  Status check_container() const override {
    CKPT_RETURN_IF_ERROR(zip_.check_local_headers(*source_));
    return zip_.check_crc32(*source_);
  }
  std::vector<std::pair<uint64_t, uint64_t>> damaged_ranges() const override {
    return zip_.crc_mismatch_ranges(*source_);
  }

 private:
  std::unique_ptr<ByteSource> source_;
  ZipArchive zip_;
  std::unique_ptr<TensorFile> weights_;
  std::string scratch_;
  nlohmann::json metadata_;
  std::vector<ChunkInfo> chunks_;
};

// Streams a stored member into `to`.
Status copy_member(const ByteSource& source, const ZipEntry& e, const std::string& to) {
  std::FILE* out = std::fopen(to.c_str(), "wb");
  if (!out) return Status::io_error(to + ": cannot create a copy of " + e.name);
  std::vector<uint8_t> buffer(1 << 20);
  Status st = Status::ok();
  for (uint64_t done = 0; done < e.size && st.is_ok();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(e.size - done, buffer.size()));
    st = source.read_at(e.data_offset + done, buffer.data(), n);
    if (st.is_ok() && std::fwrite(buffer.data(), 1, n, out) != n) st = Status::io_error(to + ": short write");
    done += n;
  }
  if (std::fclose(out) != 0 && st.is_ok()) st = Status::io_error(to + ": cannot write");
  return st;
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
  auto zip = ZipArchive::open(**source);
  return zip.is_ok() && is_keras_archive(*zip);
}

Result<std::unique_ptr<TensorFile>> open_keras_archive(std::unique_ptr<ByteSource> source, ZipArchive zip) {
  const std::string file = source->name();
  nlohmann::json metadata = nlohmann::json::object();
  const ZipEntry* config = zip.find("config.json");
  if (!config) return Status::corruption(file + ": a Keras archive without config.json");
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
  const ZipEntry* weights = zip.find("model.weights.h5");
  if (!weights) {
    return Status::not_supported(file +
                                 ": a Keras archive whose weights are model.weights.npz, which ckptcheck "
                                 "does not read");
  }
#ifdef CKPTCHECK_WITH_HDF5
  CKPT_ASSIGN_OR_RETURN(std::string scratch, make_scratch_directory("", "ckptcheck-keras"));
  const std::string copy = scratch + "/model.weights.h5";
  Status copied = copy_member(*source, *weights, copy);
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
  return std::unique_ptr<TensorFile>(
      new KerasArchiveFile(std::move(source), std::move(zip), std::move(*opened), "", std::move(metadata)));
#else
  return Status::not_supported(file + ": a Keras archive, but ckptcheck was built without HDF5");
#endif
}

}  // namespace ckpt
