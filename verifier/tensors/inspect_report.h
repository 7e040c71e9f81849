// `inspect`: what a checkpoint or tensor file holds (tensors, their chunks and hashes, the file's
// metadata, every global a pickle names and its risk), with every chunk's bytes re-hashed against the
// hashes recorded for it and a torch.save zip's member CRC-32s checked. The engine behind the
// `inspect` command and api/ckptcheck.h inspect(); it never imports or calls a pickle's globals.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
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
  // The tensor whose chunks were read: `tensor`, or for an alias the tensor it is a second name of.
  const SourceTensor* read = nullptr;
  // The SHA-256 of each chunk of `read` as read. Only the digests are kept: each chunk's report
  // record (InspectReport::chunk_check) is rebuilt from the source when printed, where keeping it
  // (label, path, two hex digests) was ~400 bytes a chunk, 130 MB of a 320k-chunk inspect.
  std::vector<Sha256Digest> chunk_sha256;
  TensorStats stats;
};

// One finding, with verify's code and wording (verifier/tensors/integrity_codes.h): printed as
// verify prints it, "[code] file tensor: message".
struct InspectIssue {
  std::string code;    // chunk_sha256_mismatch | zip_crc_mismatch | zip_header_mismatch
  std::string file;    // relative to the inspected checkpoint dir; the path itself for one file
  std::string tensor;  // "" when the finding is about a whole file
  std::string message;
};

struct InspectReport {
  TensorSource source;
  bool with_stats = false;
  std::vector<InspectedTensor> tensors;
  // Container findings (a zip member's CRC-32 or header) first, then chunks whose bytes contradict
  // a recorded hash, in tensor order.
  std::vector<InspectIssue> issues;
  // Tensors whose bytes lie in a damaged container member (a zip member's CRC-32): their rows are
  // marked and their chunks read "ok": false, though no stored hash of theirs differs.
  std::set<std::string> damaged_tensors;
  // What verify warns of and inspect shows without failing: a sharded index's strays
  // (TensorSource::findings).
  std::vector<InspectIssue> warnings;
  bool ok() const { return issues.empty(); }
  // Chunk `chunk` of `t` as read, against every hash recorded for it.
  ChunkCheck chunk_check(const InspectedTensor& t, size_t chunk) const {
    return source.check_chunk(*t.read, chunk, t.chunk_sha256[chunk]);
  }
};

// Reads and re-hashes what `path` holds. kNotFound naming up to three close names when
// `options.tensor` is not in it; kIoError and friends when the path cannot be read.
Result<InspectReport> inspect_checkpoint(const std::string& path, const InspectOptions& options);

// One JSON object (`inspect --json`), or the table: a verdict line, the errors (when any) right
// below it, metadata (the pins summarised on one line: --json has them whole), unsupported
// datasets, pickle globals with a WARNING line per dangerous one, one row per tensor (a damaged
// one marked at its end), and a last line that counts the errors. `errors_only` (`--errors`): the
// verdict line and the errors alone (JSON: path, kind, ok, errors, issues).
nlohmann::json inspect_report_to_json(const InspectReport& report, bool errors_only = false);
std::string inspect_report_to_text(const InspectReport& report, bool errors_only = false);

}  // namespace ckpt
