#include "base/status.h"

namespace ckpt {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kTruncated: return "truncated";
    case StatusCode::kIoError: return "io error";
    case StatusCode::kNotSupported: return "not supported";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kAmbiguous: return "ambiguous";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& context) const {
  if (is_ok()) return *this;
  return Status(code_, context + ": " + message_);
}

Status Status::with_note(const std::string& note) const {
  if (is_ok()) return *this;
  return Status(code_, message_ + "; " + note);
}

bool is_damage(const Status& status) {
  return status.code() == StatusCode::kCorruption || status.code() == StatusCode::kTruncated ||
         status.code() == StatusCode::kAmbiguous;
}

}  // namespace ckpt
