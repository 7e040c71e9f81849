#include "tests/support/test_support.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "tests/support/test_paths.h"

namespace ckpt::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base ? base : "/tmp") + "/ckptcheck-test-XXXXXX";
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  if (std::getenv("CKPTCHECK_KEEP_TEMP")) return;
  std::error_code error;
  std::filesystem::remove_all(path_, error);
  if (error) std::fprintf(stderr, "could not remove %s: %s\n", path_.c_str(), error.message().c_str());
}

std::string TempDir::write(const std::string& name, const std::string& contents) const {
  const std::string full = *this / name;
  std::ofstream(full, std::ios::binary) << contents;
  return full;
}

std::string gtest_param_name(std::string text) {
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return text;
}

LoadedTensor patterned_tensor(const std::string& name, const std::string& component, DType dtype,
                              std::vector<int64_t> shape) {
  LoadedTensor t{name, component, dtype, shape, {}};
  t.bytes.resize(static_cast<size_t>(*checked_nbytes(shape, dtype)));
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  for (size_t i = 0; i < t.bytes.size(); ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    t.bytes[i] = static_cast<uint8_t>(h >> 56);
  }
  if (dtype == DType::kBool) {
    for (auto& b : t.bytes) b &= 1;
  }
  return t;
}

namespace {

// Every program a test starts gets a TMPDIR of its own, removed when the test's process exits
// (ctest runs each test in its own). Drills and pilots keep their work dirs for the user to read,
// so without it each test run left a few hundred of them in /tmp.
void give_children_their_own_tmpdir() {
  static const TempDir scratch;  // made under the test's own TMPDIR
  static const bool exported = ::setenv("TMPDIR", scratch.path().c_str(), 1) == 0;
  (void)exported;
}

}  // namespace

CommandResult run_command(const std::string& command_line) {
  give_children_their_own_tmpdir();
  CommandResult result;
  FILE* pipe = ::popen((command_line + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

CommandResult torch_save_with_python(const std::string& expr, const std::string& path,
                                     const std::string& imports) {
  return run_command("/usr/bin/python3 -c \"import " + imports + "; torch.save(" + expr + ", '" + path +
                     "')\"");
}

CommandResult run_ckptcheck(const std::string& args) {
  return run_command(std::string("CKPTCHECK_NO_PROGRESS=1 ") + CKPTCHECK_BIN + " " + args);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<uint8_t> byte_pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 9));
  return bytes;
}

std::string replaced_once(const std::string& text, const std::string& from, const std::string& to) {
  std::string t = text;
  const size_t at = t.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? t : t.replace(at, from.size(), to);
}

int exit_code_in_child(const std::function<int()>& body) {
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t child = ::fork();
  if (child < 0) {
    ADD_FAILURE() << "fork failed";
    return -1;
  }
  if (child == 0) ::_exit(body());
  int status = 0;
  if (::waitpid(child, &status, 0) != child) {
    ADD_FAILURE() << "waitpid failed";
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

nlohmann::json read_json_file(const std::string& path) {
  return nlohmann::json::parse(read_text_file(path), nullptr, false);
}

}  // namespace ckpt::testing
