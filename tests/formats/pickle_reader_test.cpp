#include "formats/pickle_reader.h"

#include <gtest/gtest.h>

#include "tests/support/byte_mutations.h"
#include "tests/support/pickle_ops.h"

namespace ckpt {
namespace {

using namespace pk;

Result<PickledStateDict> run(const std::string& p) {
  return read_tensor_pickle(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "x.pt: data.pkl");
}

void expect_error(const std::string& p, StatusCode code, const std::string& needle) {
  auto r = run(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
}

std::string state_dict() {
  return proto() + global("collections", "OrderedDict") + empty_tuple() + reduce() + std::string("q\0", 2) +
         mark() + str("w") + tensor2d(storage("FloatStorage", "0", 6), 2, 2, 2, 2, 1) + str("epoch") +
         int1(3) + setitems() + stop();
}

TEST(PickleReader, ReadsOrderedDictOfTensors) {
  auto r = run(state_dict());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 1u);
  const PickledTensor& t = r->tensors[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.dtype, DType::kF32);
  EXPECT_EQ(t.storage_key, "0");
  EXPECT_EQ(t.location, "cpu");
  EXPECT_EQ(t.storage_numel, 6);
  EXPECT_EQ(t.storage_offset, 2);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.stride, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r->metadata["epoch"], 3);
}

TEST(PickleReader, FlattensNestedOptimizerState) {
  // {'state': {0: {'exp_avg': T, 'step': 5}}, 'param_groups': [{'lr': 0.5}]}
  const std::string lr("G\x3f\xe0\0\0\0\0\0\0", 9);
  std::string p = proto() + empty_dict() + mark() + str("state") + empty_dict() + int1(0) + empty_dict() +
                  mark() + str("exp_avg") + tensor2d(storage("HalfStorage", "7", 4), 0, 2, 2, 2, 1) +
                  str("step") + int1(5) + setitems() + "s" + str("param_groups") + "]" + empty_dict() +
                  str("lr") + lr + "s" + "a" + setitems() + stop();
  auto r = run(p);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].name, "state.0.exp_avg");
  EXPECT_EQ(r->tensors[0].dtype, DType::kF16);
  EXPECT_EQ(r->metadata["state.0.step"], 5);
  EXPECT_EQ(r->metadata["param_groups"][0]["lr"], 0.5);
}

TEST(PickleReader, RefusesOsSystemNamingItAndTheOffset) {
  auto r = run(proto() + global("os", "system") + mark() + str("echo hi") + tuple() + reduce() + stop());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(
      r.status().message(),
      "x.pt: data.pkl: refusing pickle global 'os.system' at offset 0x2 (only tensor state dicts are read)");
}

TEST(PickleReader, RefusesBuiltinsEval) {
  expect_error(proto() + global("builtins", "eval"), StatusCode::kNotSupported, "'builtins.eval'");
}

TEST(PickleReader, RefusesLoadFromBytes) {
  expect_error(proto() + global("torch.storage", "_load_from_bytes"), StatusCode::kNotSupported, "nested");
}

TEST(PickleReader, RefusesStackGlobal) {
  expect_error(proto() + str("subprocess") + str("Popen") + "\x93", StatusCode::kNotSupported,
               "'subprocess.Popen'");
}

TEST(PickleReader, RefusesUnknownTorchName) {
  expect_error(proto() + global("torch", "load"), StatusCode::kNotSupported, "'torch.load'");
}

TEST(PickleReader, BadPersistentId) {
  std::string pid = mark() + str("module") + global("torch", "FloatStorage") + str("0") + str("cpu") +
                    int1(4) + tuple() + binpersid();
  expect_error(proto() + pid + stop(), StatusCode::kCorruption, "bad persistent id: tag is not 'storage'");
  std::string escape = mark() + str("storage") + global("torch", "FloatStorage") + str("../x") + str("cpu") +
                       int1(4) + tuple() + binpersid();
  expect_error(proto() + escape + stop(), StatusCode::kCorruption, "key is not a plain name");
}

TEST(PickleReader, UnsupportedOpcode) {
  expect_error(proto() + "i", StatusCode::kNotSupported, "opcode 69");
}

TEST(PickleReader, MissingStop) {
  expect_error(proto() + empty_dict(), StatusCode::kTruncated, "without STOP");
}

TEST(PickleReader, TruncatedOperand) {
  expect_error(proto() + "X\x10\x00\x00\x00ab", StatusCode::kTruncated, "ends inside");
}

TEST(PickleReader, StackUnderflow) {
  expect_error(proto() + "s", StatusCode::kCorruption, "underflow");
}

TEST(PickleReader, MemoKeyNeverStored) {
  expect_error(proto() + "h\x05", StatusCode::kCorruption, "memo key 5");
}

TEST(PickleReader, RebuildTensorWithWrongArguments) {
  expect_error(
      proto() + global("torch._utils", "_rebuild_tensor_v2") + mark() + int1(1) + tuple() + reduce() + stop(),
      StatusCode::kCorruption, "expects 6 or 7 arguments");
}

TEST(PickleReader, SelfContainingListHitsTheDepthBound) {
  // l = [T]; l.append(l) — the tensor makes flatten() descend into the cycle.
  std::string p = proto() + "]" + "q\x01" + tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1) + "a" +
                  "h\x01" + "a" + stop();
  expect_error(p, StatusCode::kCorruption, "nests deeper");
}

TEST(PickleReader, MutationsNeverCrash) {
  const auto valid = to_bytes(state_dict());
  std::mt19937_64 rng(7);
  int ok = 0;
  for (int i = 0, n = fuzz_iterations(); i < n; ++i) {
    const auto m = mutate(valid, rng);
    auto r = read_tensor_pickle(m.data(), m.size(), "fuzz");
    ok += r.is_ok();
    if (r.is_ok()) (void)r->metadata.dump();
  }
  EXPECT_LT(ok, fuzz_iterations());
}

}  // namespace
}  // namespace ckpt
