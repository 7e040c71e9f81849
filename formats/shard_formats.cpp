#include "formats/shard_formats.h"

#include "formats/native_shard.h"
#include "formats/safetensors_file.h"
#ifdef CKPTCHECK_WITH_HDF5
#include "formats/hdf5_file.h"
#endif

namespace ckpt {

namespace {

Result<std::unique_ptr<TensorFile>> open_native(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto file, open_native_shard_file(path));
  return std::unique_ptr<TensorFile>(std::move(file));
}

const ShardFormat kFormats[] = {
    {"native", ".cks", &write_native_shard, &open_native},
    {"safetensors", ".safetensors", &write_safetensors_file, &open_safetensors_file},
#ifdef CKPTCHECK_WITH_HDF5
    {"hdf5", ".h5", &write_hdf5_file, &open_hdf5},
#endif
};

}  // namespace

const ShardFormat* find_shard_format(const std::string& name) {
  for (const auto& f : kFormats) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::vector<std::string> shard_format_names() {
  std::vector<std::string> names;
  for (const auto& f : kFormats) names.push_back(f.name);
  return names;
}

}  // namespace ckpt
