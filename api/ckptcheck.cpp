// Thin wrappers: each public call is one call into the layers below (verify_path, the drill
// contract in verifier/drill/program_contract.h), and an internal Status becomes a public one.
#include "api/ckptcheck.h"

#include <cerrno>
#include <cstring>
#include <optional>

#include "api/status_conversion.h"
#include "formats/dtype.h"
#include "formats/tensor_file_open.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/seal.h"
#include "verifier/check/signature.h"
#include "verifier/drill/program_contract.h"
#include "verifier/tensors/checkpoint_diff.h"
#include "verifier/tensors/inspect_report.h"
#include "verifier/tensors/tensor_source.h"

#ifndef CKPTCHECK_VERSION
#define CKPTCHECK_VERSION "unknown"
#endif

namespace ckptcheck {

std::string version() {
  return CKPTCHECK_VERSION;
}

Status public_status(const ckpt::Status& status) {
  if (status.is_ok()) return Status();
  if (status.code() == ckpt::StatusCode::kInvalidArgument)
    return Status::invalid_argument(status.to_string());
  return Status::error(status.to_string(), ckpt::is_damage(status));
}

namespace {

VerifyIssue public_issue(const ckpt::VerifyIssue& issue) {
  return {issue.code, issue.shard, issue.tensor, issue.message};
}

}  // namespace

Result<VerifyResult> verify(const std::string& path, const VerifyOptions& options) {
  ckpt::VerifyOptions internal;
  internal.jobs = options.jobs;
  internal.quick = options.quick;
  internal.pubkey_path = options.pubkey_path;
  internal.weights_only = options.weights_only;
  internal.allowed_globals = options.allowed_globals;
  auto report = ckpt::verify_path(path, internal);
  if (!report.is_ok()) return public_status(report.status());
  VerifyResult result;
  result.ok = report->ok();
  result.path = report->path;
  result.step = report->step;
  for (const auto& issue : report->errors) result.errors.push_back(public_issue(issue));
  for (const auto& issue : report->warnings) result.warnings.push_back(public_issue(issue));
  result.shards = report->shards;
  result.tensors = report->tensors;
  result.bytes_hashed = report->bytes_hashed;
  result.seconds = report->seconds;
  result.json = ckpt::report_to_json(*report).dump();
  return result;
}

Result<std::vector<TensorInfo>> list_tensors(const std::string& path) {
  auto source = ckpt::TensorSource::open(path);
  if (!source.is_ok()) return public_status(source.status());
  std::vector<TensorInfo> out;
  for (const ckpt::SourceTensor& t : source->tensors()) {
    out.push_back({t.name, t.component, ckpt::dtype_name(t.dtype), t.shape, t.bytes, t.chunks.size()});
  }
  return out;
}

Result<InspectResult> inspect(const std::string& path, const InspectOptions& options) {
  ckpt::InspectOptions internal;
  internal.stats = options.stats;
  internal.tensor = options.tensor;
  auto report = ckpt::inspect_checkpoint(path, internal);
  if (!report.is_ok()) return public_status(report.status());
  return InspectResult{report->ok(), ckpt::inspect_report_to_json(*report).dump(),
                       ckpt::inspect_report_to_text(*report)};
}

Result<DiffResult> diff(const std::string& a, const std::string& b, const DiffOptions& options) {
  ckpt::Tolerance tolerance;
  tolerance.rtol = options.rtol;
  tolerance.atol = options.atol;
  auto d = ckpt::diff_checkpoints(a, b, tolerance);
  if (!d.is_ok()) return public_status(d.status());
  return DiffResult{d->identical, ckpt::checkpoint_diff_to_json(*d).dump(),
                    ckpt::checkpoint_diff_to_text(*d)};
}

Result<SealResult> seal(const std::string& path) {
  return seal(path, SealOptions());
}

struct HashingFileTail::State {
  std::string path;
  std::unique_ptr<ckpt::HashingFileTail> tail;
  std::optional<ckpt::WrittenFileDigests> digests;  // once finished
};

HashingFileTail::HashingFileTail(std::unique_ptr<State> state) : state_(std::move(state)) {}
HashingFileTail::~HashingFileTail() = default;

Result<std::unique_ptr<HashingFileTail>> HashingFileTail::create(const std::string& path) {
  auto tail = ckpt::HashingFileTail::create_exclusive(path, ckpt::kSealMinPieceBytes);
  if (!tail.is_ok()) return public_status(tail.status());
  auto state = std::make_unique<State>();
  state->path = path;
  state->tail = std::move(*tail);
  return std::unique_ptr<HashingFileTail>(new HashingFileTail(std::move(state)));
}

Status HashingFileTail::finish() {
  // The ranges the seal will list: each tensor's bytes, by the same reader. A file no reader lists
  // is sealed whole and by pieces, which the tail hashed.
  std::vector<ckpt::WrittenRange> ranges;
  if (auto file = ckpt::open_tensor_file(state_->path); file.is_ok() && (*file)->payload_source()) {
    for (const ckpt::ChunkInfo& c : (*file)->chunks())
      if (c.alias_of.empty()) ranges.push_back({c.data_offset, c.data_bytes, ""});
  }
  auto digests = state_->tail->finish(std::move(ranges));
  if (!digests.is_ok()) return public_status(digests.status());
  state_->digests = std::move(*digests);
  return Status();
}

Result<SealResult> seal(const std::string& path, const SealOptions& options) {
  ckpt::SealOptions internal;
  internal.jobs = options.jobs;
  for (const HashingFileTail* w : options.written) {
    if (!w || !w->state().digests)
      return Status::invalid_argument("seal: `written`: a file tail that was not finished");
    internal.written.push_back(*w->state().digests);
  }
  if (!options.key_path.empty()) {
    const ckpt::Status key = ckpt::check_private_key(options.key_path);
    if (!key.is_ok()) return public_status(key);
  }
  auto summary = ckpt::seal_checkpoint(path, internal);
  if (!summary.is_ok()) return public_status(summary.status());
  if (!options.key_path.empty()) {
    ckpt::Status signed_seal = ckpt::sign_file(summary->seal_path, options.key_path);
    if (!signed_seal.is_ok()) return public_status(signed_seal);
  }
  return SealResult{summary->seal_path, summary->files, summary->tensors, summary->bytes, summary->unread};
}

Result<DrillRun> drill_run_from_environment() {
  auto run = ckpt::program_run_from_environment();
  if (!run.is_ok()) return public_status(run.status());
  DrillRun out;
  if (!run->has_value()) return out;
  const ckpt::ProgramRun& r = **run;
  out.under_drill = true;
  out.role = r.role;
  out.ckpt_dir = r.ckpt_dir;
  out.steps = r.steps;
  out.save_every = r.save_every;
  out.metrics = r.metrics;
  out.resume = r.resume;
  return out;
}

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr)
    status_ = Status::error(path + ": cannot open for appending: " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

Status MetricsLog::append(const std::string& line) {
  if (!status_.ok()) return status_;
  if (file_ == nullptr) return Status();
  if (std::fputs((line + "\n").c_str(), file_) < 0 || std::fflush(file_) != 0)
    return Status::error(path_ + ": write failed: " + std::strerror(errno));
  return Status();
}

Status MetricsLog::step(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  return append(ckpt::metrics_line(step, values));
}

Status MetricsLog::checkpoint(int64_t step, const std::string& path) {
  return append(ckpt::checkpoint_event_line(step, path));
}

}  // namespace ckptcheck
