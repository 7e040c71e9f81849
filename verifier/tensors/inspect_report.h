// `inspect`: what a checkpoint or tensor file holds (tensors, their chunks and hashes, the file's
// metadata, every global a pickle names and its risk), with every chunk's bytes re-hashed against the
// hashes recorded for it and a torch.save zip's member CRC-32s checked. The engine behind the
// `inspect` command and api/ckptcheck.h inspect(); it never imports or calls a pickle's globals.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "distributed/byte_collective.h"
#include "verifier/tensors/state_compare.h"
#include "verifier/tensors/tensor_source.h"
#include "verifier/tensors/tensor_stats.h"

namespace ckpt {

struct InspectOptions {
  bool stats = false;  // min, max, mean, L2 norm and NaN/Inf counts per tensor
  std::string tensor;  // only this tensor ("" = all)
  size_t jobs = 0;     // tensors read in parallel; 0 = one per core
  // inspect --distributed: the tasks that share the tensors (split by their bytes); every task
  // gathers every tensor's hashes and statistics and builds the same report.
  ByteCollective* distributed = nullptr;
};

struct InspectedTensor {
  const SourceTensor* tensor = nullptr;  // points into InspectReport::source
  std::vector<ChunkCheck> chunks;
  TensorStats stats;
};

struct InspectReport {
  TensorSource source;
  bool with_stats = false;
  std::vector<InspectedTensor> tensors;
  std::vector<std::string> hash_errors;       // a chunk whose bytes contradict a recorded hash
  std::vector<std::string> container_errors;  // a torch.save zip member whose CRC-32 disagrees
  bool ok() const { return hash_errors.empty() && container_errors.empty(); }
};

// Reads and re-hashes what `path` holds. kNotFound naming up to three close names when
// `options.tensor` is not in it; kIoError and friends when the path cannot be read.
Result<InspectReport> inspect_checkpoint(const std::string& path, const InspectOptions& options);

// One JSON object (`inspect --json`), or the table: a verdict line, metadata, unsupported datasets,
// pickle globals with a WARNING line per dangerous one, one row per tensor.
nlohmann::json inspect_report_to_json(const InspectReport& report);
std::string inspect_report_to_text(const InspectReport& report);

}  // namespace ckpt
