// Shared test scaffolding: temp dirs, tensors made of deterministic bytes, running the CLI.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "shards/tensor_view.h"
#include "tests/support/test_paths.h"

namespace ckpt::testing {

// A fresh empty directory under $TMPDIR, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  // Writes `contents` to path()/name and returns the full path.
  std::string write(const std::string& name, const std::string& contents) const;

 private:
  std::string path_;
};

// The DCP checkpoint that Debian's torch 1.13 wrote (tests/data/dcp/torch113, README there).
inline const std::string kDcpTorch113Dir = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/dcp/torch113";

// The workload's pilot config and the example PyTorch program that keeps the drill contract.
inline const std::string kPilotConfig = std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/configs/pilot.yaml";
inline const std::string kExampleTrainScript =
    std::string(CKPTCHECK_SOURCE_DIR) + "/examples/pytorch/train.py";

// A tensor whose bytes are a deterministic function of (name, index).
LoadedTensor patterned_tensor(const std::string& name, const std::string& component, DType dtype,
                              std::vector<int64_t> shape);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs a shell command line, capturing output; exit_code is the process's exit status.
CommandResult run_command(const std::string& command_line);
// Debian's torch writes `expr` (Python, `imports` imported) to `path` with torch.save: a fixture made at
// test time by the PyTorch the tests run against. The command's result, so a test can assert on it.
CommandResult torch_save_with_python(const std::string& expr, const std::string& path,
                                     const std::string& imports = "torch");
// Runs build/ckptcheck with the given arguments (already shell-quoted where needed).
CommandResult run_ckptcheck(const std::string& args);

// Runs `body` in a forked child and returns the child's exit code (its return value), or -1 when
// it did not exit (a signal ended it). For what is the whole process's (rlimits, malloc's
// settings): the test process itself stays as it was. The child ends with _exit.
int exit_code_in_child(const std::function<int()>& body);

std::vector<uint8_t> read_file_bytes(const std::string& path);
// n bytes that differ from one position to the next and with `seed`, for writers under test.
std::vector<uint8_t> byte_pattern(size_t n, uint8_t seed);
// `text` with the first `from` replaced by `to`; a test failure (and `text` unchanged) when there
// is no `from`: a hostile variant that silently equals the original would test nothing.
std::string replaced_once(const std::string& text, const std::string& from, const std::string& to);
// A whole file as text; "" when it cannot be read (the assertion on its content then fails).
std::string read_text_file(const std::string& path);
void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
// A JSON file the test's program wrote; a discarded value (is_discarded()) when it is missing or
// does not parse, so the assertion on its content fails with the path in the message.
nlohmann::json read_json_file(const std::string& path);

// `text` as a gtest parameter name, which may hold only letters, digits and '_': every other
// character becomes '_' ("skip-rng-restore" -> "skip_rng_restore", "rng.cpu_state" -> "rng_cpu_state").
std::string gtest_param_name(std::string text);

// The bytes of `values` as they lie in memory, for tensor payloads built in a test.
template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace ckpt::testing
