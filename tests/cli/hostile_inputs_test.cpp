// The hostile-input suite: one file of every class that once crashed, hung or exhausted a reader,
// handed to the built `ckptcheck` as a user would, under a 2 GiB address-space limit and a 30 s
// timeout. Each must be answered (exit 0, 1 or 2 with a one-line error naming the file), never by a
// signal, an abort trace or the timeout: damage is exit 1, an unreadable or foreign file exit 2. The readers'
// own tests check the messages in detail; this proves the promise holds for the whole program, allocator and
// exit path included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "tests/support/pickle_ops.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"
#include "tests/support/training_state_fixture.h"
#include "tests/support/zip_builder.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
using namespace ckpt::pk;

constexpr int kTimeoutSeconds = 30;
constexpr long kAddressSpaceKiB = 2L << 20;  // 2 GiB

std::vector<uint8_t> bytes_of(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string deep_json(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

std::vector<uint8_t> safetensors_with_header(std::string header) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<uint8_t> out;
  put_le(out, header.size(), 8);
  out.insert(out.end(), header.begin(), header.end());
  return out;
}

std::vector<uint8_t> torch_zip_with_pickle(const std::string& pickle, const std::string& storage = "") {
  std::vector<std::pair<std::string, std::string>> entries = {{"archive/data.pkl", pickle},
                                                              {"archive/byteorder", "little"}};
  if (!storage.empty()) entries.push_back({"archive/data/0", storage});
  return build_zip(entries);
}

std::string a_tensor() {
  return tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1);
}

struct HostileCase {
  std::string name;
  std::string command;  // "inspect" or "verify"
  // Writes the input under `dir` and returns the path to hand to the command.
  std::function<std::string(const std::string& dir)> make;
  std::vector<int> allowed_exits;
  std::string expected;  // a substring of the answer
};

std::string write(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = dir + "/" + name;
  write_file_bytes(path, bytes);
  return path;
}

std::vector<HostileCase> hostile_cases() {
  return {
      {"SafetensorsHeader200kDeep",
       "inspect",
       [](const std::string& d) {
         return write(d, "deep.safetensors", safetensors_with_header("{\"x\":" + deep_json(200000) + "}"));
       },
       {1},
       "nests deeper"},
      {"SafetensorsMetadataStringHoldingDeepJson",
       "inspect",
       [](const std::string& d) {
         const std::string inner = nlohmann::json(deep_json(200000)).dump();  // JSON text inside a string
         return write(d, "meta.safetensors",
                      safetensors_with_header("{\"__metadata__\":{\"config\":" + inner + "}}"));
       },
       {0, 1, 2},
       "meta.safetensors"},
      {"ManifestConfig200kDeep",
       "verify",
       [](const std::string& d) {
         const std::string dir = save_training_state(d, full_training_state());
         std::string text = *read_small_file(dir + "/manifest.json", 64 << 20);
         const std::string key = "\"config\": ";
         const size_t at = text.find(key);
         const size_t value_end = text.find("\n \"", at);  // the next top-level key
         text.replace(at + key.size(), value_end - (at + key.size()), "{\"x\": " + deep_json(200000) + "},");
         write_file_bytes(dir + "/manifest.json", bytes_of(text));
         return dir;
       },
       {1},
       "nests deeper"},
      {"PickleMemoChainOfInts2To30",
       "inspect",
       [](const std::string& d) {
         const std::string p = proto() + empty_dict() + mark() + str("w") + a_tensor() + str("chain") +
                               memo_chain(int1(7), 30) + setitems() + stop();
         return write(d, "chain.pt", torch_zip_with_pickle(p, std::string(16, '\0')));
       },
       {1},
       "flattening emits more than"},
      {"PickleMemoChainWithTensorLeaf2To30",
       "inspect",
       [](const std::string& d) {
         return write(
             d, "leaf.pt",
             torch_zip_with_pickle(proto() + memo_chain(a_tensor(), 30) + stop(), std::string(16, '\0')));
       },
       // Every one of its 2^30 paths is a name torch.load gives: listed until the output budget
       // refuses the file (a check failure), never cut silently.
       {1},
       "flattening emits more than"},
      {"OneMiBStringReferenced3000Times",
       "inspect",
       [](const std::string& d) {
         std::string vocab = empty_list() + mark() + str(std::string(1 << 20, 'v')) + binput(0);
         for (int k = 1; k < 3000; ++k) vocab += binget(0);
         const std::string p = proto() + empty_dict() + mark() + str("w") + a_tensor() + str("vocab") +
                               vocab + appends() + setitems() + stop();
         return write(d, "vocab.pt", torch_zip_with_pickle(p, std::string(16, '\0')));
       },
       {1},
       "flattening emits more than"},
      {"FuzzFoundMemoChain1_4MB",
       "inspect",
       [](const std::string& d) {
         auto pkl = read_small_file(
             std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pickle/memo-chain-fuzz.pkl", 8 << 20);
         return write(d, "fuzz.pt", torch_zip_with_pickle(pkl.is_ok() ? *pkl : std::string()));
       },
       {1},
       "flattening emits more than"},
      {"SelfContainingList",
       "inspect",
       [](const std::string& d) {
         const std::string p =
             proto() + "]" + "q\x01" + a_tensor() + "a" + "h\x01" + "a" + stop();  // l = [T]; l.append(l)
         return write(d, "cycle.pt", torch_zip_with_pickle(p, std::string(16, '\0')));
       },
       {1},
       "nests deeper"},
      {"TruncatedZip",
       "inspect",
       [](const std::string& d) {
         auto b = torch_zip_with_pickle(proto() + empty_dict() + stop());
         b.resize(b.size() / 2);
         return write(d, "half.pt", b);
       },
       {1},
       "half.pt"},
      {"EmptyFile", "inspect", [](const std::string& d) { return write(d, "empty.bin", {}); }, {2}, "empty"},
      {"GitLfsPointer",
       "inspect",
       [](const std::string& d) {
         return write(d, "lfs.bin",
                      bytes_of("version https://git-lfs.github.com/spec/v1\noid sha256:" +
                               std::string(64, 'a') + "\nsize 123\n"));
       },
       {2},
       "LFS"},
  };
}

void PrintTo(const HostileCase& c, std::ostream* os) {
  *os << c.name;
}

class HostileInput : public ::testing::TestWithParam<HostileCase> {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0)
        << CKPTCHECK_BIN << " is not built (make build): these tests run it";
  }
  TempDir dir_;
};

TEST_P(HostileInput, IsAnsweredWithinBoundsNeverBySignal) {
  const HostileCase& c = GetParam();
  const std::string path = c.make(dir_.path());
  const std::string line = "ulimit -v " + std::to_string(kAddressSpaceKiB) +
                           "; CKPTCHECK_NO_PROGRESS=1 timeout -s KILL " + std::to_string(kTimeoutSeconds) +
                           " " + CKPTCHECK_BIN + " " + c.command + " '" + path + "'";
  const CommandResult r = run_command(line);
  EXPECT_LT(r.exit_code, 128) << "killed by signal " << r.exit_code - 128 << " (9 = the timeout):\n"
                              << r.output.substr(0, 2000);
  bool allowed = false;
  for (int e : c.allowed_exits) allowed = allowed || r.exit_code == e;
  EXPECT_TRUE(allowed) << "exit " << r.exit_code << ":\n" << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find(c.expected), std::string::npos) << r.output.substr(0, 2000);
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output.substr(0, 2000);
  EXPECT_EQ(r.output.find("Aborted"), std::string::npos) << r.output.substr(0, 2000);
}

INSTANTIATE_TEST_SUITE_P(EveryClass, HostileInput, ::testing::ValuesIn(hostile_cases()),
                         [](const ::testing::TestParamInfo<HostileCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ckpt
