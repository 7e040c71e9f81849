#include "verifier/tensors/source_conversion.h"

#include <algorithm>

namespace ckpt {

Result<SourceConversion> SourceConversion::check(const TensorSource& source) {
  SourceConversion conversion(source);
  // Stamped before the check, so that any write after it shows at the commit.
  std::vector<bool> stamped(source.files().size(), false);
  for (size_t f = 0; f < source.files().size(); ++f) {
    const std::string& path = source.files()[f]->path();
    Result<FileStamp> stamp = stamp_file(path);
    stamped[f] = stamp.is_ok() && stamp->regular;
    if (stamped[f]) conversion.stamps_.emplace_back(path, *stamp);
  }
  CKPT_RETURN_IF_ERROR(source.check_tensors().status());
  for (size_t i = 0; i < source.tensors().size(); ++i) {
    const SourceTensor& t = source.tensors()[i];
    bool streamed = source.reads_in_place(t);
    for (const SourceChunk& c : t.chunks) streamed = streamed && stamped[c.file];
    if (streamed) {
      conversion.views_.push_back({t.name, t.component, t.dtype, t.shape, nullptr, t.bytes});
      conversion.streamed_bytes_ += t.bytes;
      continue;
    }
    CKPT_ASSIGN_OR_RETURN(LoadedTensor whole, source.read_tensor(t));
    conversion.held_.push_back(std::move(whole));
    conversion.views_.push_back(conversion.held_.back().view());
  }
  return conversion;
}

Status SourceConversion::read(size_t tensor, uint64_t byte_begin, uint8_t* out, size_t length) const {
  CKPT_RETURN_IF_ERROR(source_->read_tensor_bytes(source_->tensors()[tensor], byte_begin, out, length));
  if (report_progress_) {
    std::lock_guard<std::mutex> lock(copied_->mu);
    copied_->bytes += length;
    const uint64_t step = std::max<uint64_t>(1, streamed_bytes_ / 200);
    if (copied_->bytes - copied_->reported >= step || copied_->bytes == streamed_bytes_) {
      copied_->reported = copied_->bytes;
      report_progress_(copied_->bytes, streamed_bytes_);
    }
  }
  return Status::ok();
}

void SourceConversion::on_progress(std::function<void(uint64_t done, uint64_t total)> report) {
  report_progress_ = std::move(report);
}

Status SourceConversion::unchanged() const {
  for (const auto& [path, stamp] : stamps_) {
    Result<FileStamp> now = stamp_file(path);
    if (!now.is_ok()) return now.status().with_context("source file gone while it was copied");
    if (*now != stamp)
      return Status::io_error(path +
                              ": changed while it was copied (written, replaced or resized since its "
                              "chunks were checked); nothing was committed");
  }
  return Status::ok();
}

Result<CommittedCheckpoint> SourceConversion::write(const std::string& root,
                                                    const CheckpointMetadata& metadata,
                                                    CheckpointWriteOptions options) const {
  options.payload_reader = this;
  options.before_commit = [this] { return unchanged(); };
  return write_checkpoint(root, views_, metadata, options);
}

}  // namespace ckpt
