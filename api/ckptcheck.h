// ckptcheck's public C++ API, torch-free part: verify, inspect and seal a checkpoint, and keep the
// restore drill's contract from inside a training program. Installed as <ckptcheck/ckptcheck.h>; link
// `ckptcheck::ckptcheck` (find_package(ckptcheck)). Nothing here throws: every call that can fail
// returns a Status or a Result whose message is one line naming the file.
//
// The LibTorch part (save and load training state) is <ckptcheck/ckptcheck_torch.h>.
//
// A training program keeps the drill contract (README, "The restore drill") in a few lines:
//
//   ckptcheck::DrillRun run = ckptcheck::drill_run_from_environment().value();
//   ckptcheck::MetricsLog log(run.metrics);
//   ... after each optimizer step:  log.step(step, {{"loss", loss}, {"lr", lr}});
//   ... after each committed save:  log.checkpoint(step, saved.dir);
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ckptcheck {

// "0.1.0": the version of the installed library and programs.
std::string version();

// Success, or why not: a one-line message naming the file (and offset or tensor) and whether the
// bytes themselves are damaged (a corrupt or torn checkpoint) rather than absent or refused.
class Status {
 public:
  Status() = default;
  static Status error(std::string message, bool damage = false) { return Status(std::move(message), damage); }
  // The caller asked for something the call cannot do (an option a checkpoint's kind cannot honour, a
  // seal that already exists): the CLI's usage errors, a ValueError in Python.
  static Status invalid_argument(std::string message) {
    Status s(std::move(message), false);
    s.invalid_argument_ = true;
    return s;
  }

  bool ok() const { return message_.empty(); }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }
  bool damage() const { return damage_; }
  bool invalid_argument() const { return invalid_argument_; }
  // The exit code ckptcheck's programs use for it: 0 ok, 1 damage, 2 any other error.
  int exit_code() const { return ok() ? 0 : damage_ ? 1 : 2; }

 private:
  Status(std::string message, bool damage) : message_(std::move(message)), damage_(damage) {}
  std::string message_;
  bool damage_ = false;
  bool invalid_argument_ = false;
};

// A value, or the Status that says why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }
  // Only when ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// ---- verify ---------------------------------------------------------------------------------

// The options of `ckptcheck verify`, for every kind of checkpoint (docs/verify-guarantees.md); an
// option a kind cannot honour is refused (a Status with exit code 2), never ignored.
struct VerifyOptions {
  size_t jobs = 0;            // shards, tensors or sealed pieces read in parallel; 0 = one per core
  bool quick = false;         // structure, headers, pickles and sizes only: no payload is read
  std::string pubkey_path;    // when set, manifest.json.sig (or the seal's .sig) must verify under this key
  bool weights_only = false;  // a foreign checkpoint may hold model weights only
  std::vector<std::string> allowed_globals;  // pickle globals ("module.name") reviewed and accepted
};

// One finding; `code` is one of the stable codes `ckptcheck verify` prints (README, "Verify").
struct VerifyIssue {
  std::string code;
  std::string shard;   // "" when the finding is about no one shard
  std::string tensor;  // "" when the finding is about no one tensor
  std::string message;
};

struct VerifyResult {
  bool ok = false;    // no errors (warnings never fail a checkpoint)
  std::string path;   // the checkpoint directory that was verified
  int64_t step = -1;  // -1 when the manifest could not be read
  std::vector<VerifyIssue> errors;
  std::vector<VerifyIssue> warnings;
  size_t shards = 0;
  size_t tensors = 0;
  uint64_t bytes_hashed = 0;
  double seconds = 0;
  std::string json;  // the object `ckptcheck verify --json` prints for the same checkpoint
};

// What `ckptcheck verify PATH` checks: every shard and chunk hash, coverage, and that the state a
// restart needs is present and agrees. `path` is a checkpoint directory or a root (its `latest`).
// A damaged checkpoint is a result with ok == false; the Status fails only when the check cannot
// run at all (no such path, an unreadable public key).
Result<VerifyResult> verify(const std::string& path, const VerifyOptions& options = {});

// ---- inspect and seal --------------------------------------------------------------------------

// One global tensor as `ckptcheck inspect PATH` lists it.
struct TensorInfo {
  std::string name;
  std::string component;  // model | optimizer | scheduler | scaler | rng | data | progress | other
  std::string dtype;      // "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  size_t chunks = 0;  // pieces it is stored in (shards, DCP items)
};

// The tensors of any checkpoint ckptcheck reads: its own, a torch.save file (legacy too), a DCP
// directory, safetensors (or an index), HDF5. Read by ckptcheck's own parsers: nothing from the
// file is executed. Sorted by name.
Result<std::vector<TensorInfo>> list_tensors(const std::string& path);

struct InspectOptions {
  bool stats = false;  // min, max, mean, L2 norm and NaN/Inf counts per tensor
  std::string tensor;  // only this tensor ("" = all)
};

struct InspectResult {
  bool ok = false;   // every recorded hash and CRC-32 agrees with the bytes
  std::string json;  // the object `ckptcheck inspect --json` prints
  std::string text;  // the table `ckptcheck inspect` prints
};

// What `ckptcheck inspect PATH` does: every tensor re-hashed against what was recorded for it, the
// pickle globals a file names with their risk (never imported or called). The Status fails when the
// path cannot be read or `tensor` is not in it (exit code 2).
Result<InspectResult> inspect(const std::string& path, const InspectOptions& options = {});

struct DiffOptions {
  double rtol = 0;  // relative tolerance (floating tensors)
  double atol = 0;  // absolute tolerance
};

struct DiffResult {
  bool identical = false;  // every tensor on both sides, within tolerance
  std::string json;        // the object `ckptcheck diff --json` prints
  std::string text;
};

// What `ckptcheck diff A B` does: tensor by tensor by name, whatever the formats and shardings.
Result<DiffResult> diff(const std::string& a, const std::string& b, const DiffOptions& options = {});

struct SealResult {
  std::string seal_path;  // DIR/ckptcheck.seal.json, or FILE.ckptcheck.seal.json
  size_t files = 0;
  size_t tensors = 0;
  uint64_t bytes = 0;
  std::vector<std::string> unread;  // "file: why" for each file whose tensors no reader could list
};

// A new, empty file that another writer fills front to back by name (torch.save(obj, path): torch's
// zip writer never goes back), hashed from the page cache as it grows, so that seal() of it reads
// nothing back afterwards: ckptcheck.torch.save's path. create() makes the file (never an existing
// one: O_EXCL); once the writer has closed it, finish() fsyncs it while the hashing catches up and
// each tensor the readers list is hashed. Only a writer that appends may fill it.
class HashingFileTail {
 public:
  static Result<std::unique_ptr<HashingFileTail>> create(const std::string& path);
  HashingFileTail(const HashingFileTail&) = delete;
  HashingFileTail& operator=(const HashingFileTail&) = delete;
  ~HashingFileTail();

  Status finish();

  struct State;  // internal
  const State& state() const { return *state_; }

 private:
  explicit HashingFileTail(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

struct SealOptions {
  size_t jobs = 0;       // files hashed in parallel; 0 = one per core
  std::string key_path;  // when set, the seal is signed with this PEM Ed25519 private key (`<seal>.sig`)
  // Finished tails of files under the sealed path: their digests are used instead of reading the
  // files back, for each file that is still the one hashed (same inode, size and modification time).
  std::vector<const HashingFileTail*> written;
};

// What `ckptcheck seal PATH` does: records every file's and tensor's SHA-256 beside a checkpoint
// this library did not write (call it after each torch.save), so verify(PATH) can later name the
// file, tensor and byte range that changed. Never replaces an existing seal. With `key_path`, what
// `ckptcheck seal PATH && ckptcheck sign PATH --key KEY` does.
Result<SealResult> seal(const std::string& path);
Result<SealResult> seal(const std::string& path, const SealOptions& options);

// ---- the drill contract: the program's side --------------------------------------------------

// The run `ckptcheck drill -- COMMAND` asked for, from the CKPTCHECK_* environment.
struct DrillRun {
  bool under_drill = false;  // CKPTCHECK_CKPT_DIR is set; otherwise every field keeps its default
  std::string role;          // reference | subject | resumed | control (for logs only)
  std::string ckpt_dir;      // CKPTCHECK_CKPT_DIR: where checkpoints go
  int64_t steps = 0;         // CKPTCHECK_STEPS: train until this global step
  int64_t save_every = 0;    // CKPTCHECK_SAVE_EVERY: save after each step that is a multiple of it
  std::string metrics;       // CKPTCHECK_METRICS: the JSON-lines file MetricsLog appends to
  std::string resume;        // CKPTCHECK_RESUME: "" on a fresh start, else the checkpoint to load
};

// Reads the CKPTCHECK_* variables. Fails, naming the variable, on a malformed number or when
// CKPTCHECK_CKPT_DIR is set without CKPTCHECK_STEPS / CKPTCHECK_SAVE_EVERY / CKPTCHECK_METRICS.
Result<DrillRun> drill_run_from_environment();

// Appends the contract's JSON lines to the metrics file, flushed after each line so a SIGKILL
// loses nothing already logged. A default-constructed or "" path logs nothing.
class MetricsLog {
 public:
  MetricsLog() = default;
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Fails when the file could not be opened for appending.
  const Status& status() const { return status_; }

  // {"step": step, "<name>": value, ...} after each optimizer step. Every field is compared
  // between the reference and the resumed run, except timings (names ending in _ms or _seconds)
  // and peak_memory_bytes. Optional fields the drill's report uses: tokens (this step's tokens),
  // peak_memory_bytes (one full step, optimizer step included), data_wait_ms
  // (verifier/drill/program_contract.h). NaN and infinities are written as Python's json module writes them.
  Status step(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // {"event": "checkpoint", "step": step, "path": path} once the checkpoint is durable.
  Status checkpoint(int64_t step, const std::string& path);

 private:
  Status append(const std::string& line);
  std::string path_;
  std::FILE* file_ = nullptr;
  Status status_;
};

}  // namespace ckptcheck
