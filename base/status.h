// Errors are values at format boundaries. A reader never throws: it returns a Status that says
// what kind of failure it was (so the CLI can map it to an exit code) and a one-line message that
// names the file, the offset or tensor, what was expected and what was found.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace ckpt {

enum class StatusCode {
  kOk = 0,
  kCorruption,       // bytes on disk contradict themselves or their manifest (data loss)
  kTruncated,        // the file stops before its own header says it ends (a torn tail)
  kIoError,          // the OS refused: missing file, permission, short read, disk full
  kNotSupported,     // a valid file we do not handle: unknown version, dtype, pickle global
  kInvalidArgument,  // the caller's input is malformed: bad flag, bad config key
  kNotFound,         // a named thing (tensor, checkpoint, key) does not exist
  // Bytes that the loader a file is meant for and our reader could read differently (two zip end
  // records, names equal ignoring case, a pickle ending inside its frame, a tar that is also a
  // pickle stream): refused, since a gate must read what the loader reads (docs/verify-guarantees.md).
  kAmbiguous,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status corruption(std::string msg) { return Status(StatusCode::kCorruption, std::move(msg)); }
  static Status truncated(std::string msg) { return Status(StatusCode::kTruncated, std::move(msg)); }
  static Status io_error(std::string msg) { return Status(StatusCode::kIoError, std::move(msg)); }
  static Status not_supported(std::string msg) { return Status(StatusCode::kNotSupported, std::move(msg)); }
  static Status invalid_argument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status not_found(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status ambiguous(std::string msg) { return Status(StatusCode::kAmbiguous, std::move(msg)); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corruption: shard-00001.cks @0x40: ..." — the form printed by the CLI.
  std::string to_string() const;
  // Adds context in front of the message, keeping the code: "file.cks: <message>".
  Status with_context(const std::string& context) const;
  // Adds what happened next after the message, keeping the code: "<message>; <note>".
  Status with_note(const std::string& note) const;

 private:
  Status(StatusCode code, std::string msg) : code_(code), message_(std::move(msg)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Damage to the bytes themselves (corruption or a torn tail), or bytes readers would read differently
// (kAmbiguous: hostile, so a check failure like damage), as opposed to a refusal to read them.
bool is_damage(const Status& status);

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace ckpt

// Propagates a failed Status out of the enclosing function.
#define CKPT_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::ckpt::Status ckpt_status_ = (expr);           \
    if (!ckpt_status_.is_ok()) return ckpt_status_; \
  } while (0)

#define CKPT_CONCAT_INNER(a, b) a##b
#define CKPT_CONCAT(a, b) CKPT_CONCAT_INNER(a, b)
// Evaluates a Result-returning expression; on failure returns its Status, else moves the value
// into `lhs` (which may be a declaration: CKPT_ASSIGN_OR_RETURN(auto x, f());).
#define CKPT_ASSIGN_OR_RETURN(lhs, expr) \
  CKPT_ASSIGN_OR_RETURN_IMPL(CKPT_CONCAT(ckpt_result_, __LINE__), lhs, expr)
#define CKPT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
