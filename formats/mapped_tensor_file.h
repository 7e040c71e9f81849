// A TensorFile whose chunk payloads are plain byte ranges of one ByteSource. safetensors, PyTorch
// zips and (contiguous, unfiltered) HDF5 all store payloads this way, so they share this reader:
// the format parser only has to produce the chunk table.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/byte_source.h"
#include "formats/tensor_file.h"

namespace ckpt {

class MappedTensorFile final : public TensorFile {
 public:
  // Invariant (checked by the parsers): every chunk's [data_offset, data_offset + data_bytes)
  // lies inside `source`.
  // `globals`: what a pickle inside the file names (a numpy object array's), for the gate.
  MappedTensorFile(const char* format, std::unique_ptr<ByteSource> source, std::vector<ChunkInfo> chunks,
                   nlohmann::json metadata, std::vector<PickleGlobal> globals = {})
      : format_(format),
        source_(std::move(source)),
        chunks_(std::move(chunks)),
        metadata_(std::move(metadata)),
        globals_(std::move(globals)) {}

  const std::string& path() const override { return source_->name(); }
  const char* format_name() const override { return format_; }
  const std::vector<ChunkInfo>& chunks() const override { return chunks_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  Status read_chunk(size_t index, uint64_t offset, void* out, size_t length) const override;
  const ByteSource* payload_source() const override { return source_.get(); }
  const std::vector<PickleGlobal>& pickle_globals() const override { return globals_; }

 private:
  const char* format_;
  std::unique_ptr<ByteSource> source_;
  std::vector<ChunkInfo> chunks_;
  nlohmann::json metadata_;
  std::vector<PickleGlobal> globals_;
};

}  // namespace ckpt
