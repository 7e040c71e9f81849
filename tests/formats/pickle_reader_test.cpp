#include "formats/pickle_reader.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "tests/support/byte_mutations.h"
#include "tests/support/pickle_ops.h"
#include "tests/support/test_paths.h"

namespace ckpt {
namespace {

using namespace pk;

Result<PickledStateDict> run(const std::string& p) {
  return read_tensor_pickle(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "x.pt: data.pkl");
}

void expect_pickle_error(const std::string& p, StatusCode code, const std::string& needle) {
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

std::string weight();  // a 2x2 F32 tensor, defined below

const PickleGlobal* find_global(const PickledStateDict& d, const std::string& name) {
  for (const auto& g : d.globals) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

std::string newobj() {
  return "\x81";
}
std::string build() {
  return "b";
}
std::string tuple1() {
  return "\x85";
}
std::string short_bytes(const std::string& b) {
  return "C" + std::string(1, static_cast<char>(b.size())) + b;
}

TEST(PickleReader, OsSystemIsAnInertPlaceholderAndTheTensorsAroundItAreRead) {
  // {'w': tensor, 'x': os.system('touch ...')}: the call is recorded, never made.
  const std::string p = proto() + empty_dict() + mark() + str("w") + weight() + str("x") +
                        global("os", "system") + mark() + str("touch /tmp/ckptcheck_pickle_sentinel") +
                        tuple() + reduce() + setitems() + stop();
  auto r = run(p);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].name, "w");
  EXPECT_EQ(r->metadata["x"]["__call__"], "os.system");
  EXPECT_EQ(r->metadata["x"]["__args__"][0], "touch /tmp/ckptcheck_pickle_sentinel");
  const PickleGlobal* g = find_global(*r, "os.system");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->risk, PickleGlobalRisk::kDangerous);
  EXPECT_EQ(g->count, 1u);
  EXPECT_EQ(g->first_offset, p.find("cos\nsystem"));
  EXPECT_EQ(find_global(*r, "torch._utils._rebuild_tensor_v2")->risk, PickleGlobalRisk::kSafe);
}

TEST(PickleReader, GlobalsAreClassifiedByWhatTorchLoadWouldDo) {
  const std::pair<std::pair<const char*, const char*>, PickleGlobalRisk> cases[] = {
      {{"os", "system"}, PickleGlobalRisk::kDangerous},
      {{"posix", "system"}, PickleGlobalRisk::kDangerous},
      {{"nt", "system"}, PickleGlobalRisk::kDangerous},
      {{"builtins", "eval"}, PickleGlobalRisk::kDangerous},
      {{"__builtin__", "exec"}, PickleGlobalRisk::kDangerous},
      {{"builtins", "compile"}, PickleGlobalRisk::kDangerous},
      {{"builtins", "__import__"}, PickleGlobalRisk::kDangerous},
      {{"builtins", "getattr"}, PickleGlobalRisk::kDangerous},
      {{"builtins", "open"}, PickleGlobalRisk::kDangerous},
      {{"subprocess", "Popen"}, PickleGlobalRisk::kDangerous},
      {{"commands", "check_call"}, PickleGlobalRisk::kDangerous},  // subprocess, as protocol 2 spells it
      {{"pty", "spawn"}, PickleGlobalRisk::kDangerous},
      {{"runpy", "_run_code"}, PickleGlobalRisk::kDangerous},
      {{"importlib", "import_module"}, PickleGlobalRisk::kDangerous},
      {{"torch.storage", "_load_from_bytes"}, PickleGlobalRisk::kDangerous},
      {{"torch", "load"}, PickleGlobalRisk::kDangerous},
      {{"torch.nn.functional", "cross_entropy"}, PickleGlobalRisk::kExecutes},
      {{"argparse", "Namespace"}, PickleGlobalRisk::kExecutes},
      {{"transformers.training_args", "TrainingArguments"}, PickleGlobalRisk::kExecutes},
      {{"osmosis", "Model"}, PickleGlobalRisk::kExecutes},  // a module merely starting with "os"
      {{"collections", "OrderedDict"}, PickleGlobalRisk::kSafe},
      {{"torch._utils", "_rebuild_tensor_v2"}, PickleGlobalRisk::kSafe},
      {{"torch", "BFloat16Storage"}, PickleGlobalRisk::kSafe},
      {{"torch", "float32"}, PickleGlobalRisk::kSafe},
      {{"numpy.core.multiarray", "_reconstruct"}, PickleGlobalRisk::kSafe},
      {{"numpy", "dtype"}, PickleGlobalRisk::kSafe},
      {{"_codecs", "encode"}, PickleGlobalRisk::kSafe},
      {{"torch.serialization", "_get_layout"}, PickleGlobalRisk::kSafe},  // in DCP's .metadata
      {{"torch.serialization", "load"}, PickleGlobalRisk::kDangerous},
  };
  for (const auto& [g, risk] : cases) {
    EXPECT_EQ(classify_pickle_global(g.first, g.second), risk) << g.first << "." << g.second;
  }
}

TEST(PickleReader, StackGlobalAndEvalAreInertToo) {
  auto r = run(proto() + empty_list() + mark() + str("subprocess") + str("Popen") + "\x93" + str("sh") +
               tuple1() + reduce() + global("builtins", "eval") + str("1+1") + tuple1() + reduce() +
               global("torch.storage", "_load_from_bytes") + short_bytes("\x80\x02N.") + tuple1() + reduce() +
               appends() + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->metadata["value"][0]["__call__"], "subprocess.Popen");
  EXPECT_EQ(r->metadata["value"][1]["__call__"], "builtins.eval");
  EXPECT_EQ(r->metadata["value"][2]["__call__"], "torch.storage._load_from_bytes");
  ASSERT_EQ(r->globals.size(), 3u);
  for (const auto& g : r->globals) EXPECT_EQ(g.risk, PickleGlobalRisk::kDangerous) << g.name;
}

TEST(PickleReader, NewobjAndBuildMakeAnObjectCarryingItsState) {
  // A dataclass as protocol 2 writes it (a DCP .metadata entry, HF TrainingArguments).
  auto r = run(proto() + global("pkg.meta", "Chunk") + empty_tuple() + newobj() + empty_dict() + mark() +
               str("offsets") + int1(0) + int1(4) + tuple2() + str("name") + str("w") + setitems() + build() +
               stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->metadata["value"],
            (nlohmann::json{{"__class__", "pkg.meta.Chunk"}, {"offsets", {0, 4}}, {"name", "w"}}));
  EXPECT_EQ(r->globals[0].risk, PickleGlobalRisk::kExecutes);
}

TEST(PickleReader, NamespaceIsItsDictAndTensorsInsideObjectsAreNamedByTheirKeys) {
  const std::string ns = global("argparse", "Namespace") + empty_tuple() + newobj() + empty_dict() +
                         str("lr") + int1(3) + "s" + build();
  const std::string holder = global("my.module", "Holder") + empty_tuple() + newobj() + empty_dict() +
                             str("w") + weight() + "s" + build();
  auto r =
      run(proto() + empty_dict() + mark() + str("hparams") + ns + str("obj") + holder + setitems() + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->metadata["hparams"], (nlohmann::json{{"lr", 3}}));
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].name, "obj.w");
}

TEST(PickleReader, DictWithObjectKeysBecomesPairs) {
  // DCP's storage_data: {MetadataIndex(...): _StorageInfo(...)}.
  const std::string key = global("pkg", "Index") + empty_tuple() + newobj() + empty_dict() + str("fqn") +
                          str("w") + "s" + build();
  auto r = run(proto() + empty_dict() + key + int1(5) + "s" + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->metadata["value"]["__pairs__"][0][0]["fqn"], "w");
  EXPECT_EQ(r->metadata["value"]["__pairs__"][0][1], 5);
}

TEST(PickleReader, NumpyArrayBecomesAnInlineTensor) {
  // _reconstruct(ndarray, (0,), b'b') then BUILD (1, (2,), dtype('f4') with state (3, '<', ...), False, raw).
  const std::string dtype = global("numpy", "dtype") + str("f4") + newfalse() + "\x88" + "\x87" + reduce() +
                            mark() + int1(3) + str("<") + "NNN" + int1(0) + tuple() + build();
  const std::string arr = global("numpy.core.multiarray", "_reconstruct") + global("numpy", "ndarray") +
                          int1(0) + tuple1() + short_bytes("b") + "\x87" + reduce() + mark() + int1(1) +
                          int1(2) + tuple1() + dtype + newfalse() +
                          short_bytes(std::string("\0\0\x80?\0\0\0@", 8)) + tuple() + build();
  auto r = run(proto() + empty_dict() + str("a") + arr + "s" + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 1u);
  const PickledTensor& t = r->tensors[0];
  EXPECT_EQ(t.name, "a");
  EXPECT_EQ(t.dtype, DType::kF32);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2}));
  EXPECT_TRUE(t.inline_payload);
  EXPECT_EQ(t.inline_bytes, std::string("\0\0\x80?\0\0\0@", 8));
}

TEST(PickleReader, LegacyViewOffsetAddsToTheTensorOffset) {
  // A legacy persistent id with a sixth item: a view 3 elements into root storage "1".
  const std::string pid = mark() + str("storage") + global("torch", "FloatStorage") + str("1") + str("cpu") +
                          int1(10) + mark() + str("9") + int1(3) + int1(4) + tuple() + tuple() + binpersid();
  auto r = run(proto() + empty_dict() + str("w") + tensor2d(pid, 1, 1, 2, 2, 1) + "s" + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].storage_key, "1");
  EXPECT_EQ(r->tensors[0].storage_offset, 4);
  ASSERT_EQ(r->storages.size(), 1u);
  EXPECT_EQ(r->storages[0].numel, 10);
}

TEST(PickleReader, IntegersWiderThan64BitsAreKeptAsHex) {
  auto r = run(proto() + std::string("\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 12) + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->metadata["value"], "int:0x1950a86a20f9469cfc6c");
  EXPECT_EQ(r->end_offset, 15u);
}

TEST(PickleReader, BadPersistentId) {
  std::string pid = mark() + str("module") + global("torch", "FloatStorage") + str("0") + str("cpu") +
                    int1(4) + tuple() + binpersid();
  expect_pickle_error(proto() + pid + stop(), StatusCode::kCorruption,
                      "bad persistent id: tag is not 'storage'");
  std::string escape = mark() + str("storage") + global("torch", "FloatStorage") + str("../x") + str("cpu") +
                       int1(4) + tuple() + binpersid();
  expect_pickle_error(proto() + escape + stop(), StatusCode::kCorruption, "key is not a plain name");
}

TEST(PickleReader, UnsupportedOpcode) {
  expect_pickle_error(proto() + "\xff", StatusCode::kNotSupported, "opcode ff");
}

TEST(PickleReader, MissingStop) {
  expect_pickle_error(proto() + empty_dict(), StatusCode::kTruncated, "without STOP");
}

TEST(PickleReader, TruncatedOperand) {
  expect_pickle_error(proto() + "X\x10\x00\x00\x00ab", StatusCode::kTruncated, "ends inside");
}

TEST(PickleReader, StackUnderflow) {
  expect_pickle_error(proto() + "s", StatusCode::kCorruption, "underflow");
}

TEST(PickleReader, MemoKeyNeverStored) {
  expect_pickle_error(proto() + "h\x05", StatusCode::kCorruption, "memo key 5");
}

TEST(PickleReader, RebuildTensorWithWrongArguments) {
  expect_pickle_error(
      proto() + global("torch._utils", "_rebuild_tensor_v2") + mark() + int1(1) + tuple() + reduce() + stop(),
      StatusCode::kCorruption, "expects 6 or 7 arguments");
}

TEST(PickleReader, SelfContainingListHitsTheDepthBound) {
  // l = [T]; l.append(l) — the tensor makes flatten() descend into the cycle.
  std::string p = proto() + "]" + "q\x01" + tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1) + "a" +
                  "h\x01" + "a" + stop();
  expect_pickle_error(p, StatusCode::kCorruption, "nests deeper");
}

std::string weight() {
  return tensor2d(storage("FloatStorage", "0", 4), 0, 2, 2, 2, 1);
}

TEST(PickleReader, MemoChainOfMetadataHitsTheOutputLimit) {
  // 2^30 ints behind ~300 bytes: expanding them all ran out of memory.
  const std::string p = proto() + empty_dict() + mark() + str("w") + weight() + str("chain") +
                        memo_chain(int1(7), 30) + setitems() + stop();
  ASSERT_LT(p.size(), 1000u);
  auto r = run(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().to_string();
  const std::string& msg = r.status().message();
  EXPECT_EQ(msg.rfind("x.pt: data.pkl: 'chain': flattening emits more than " +
                          std::to_string(pickle_output_limit(p.size())) + " bytes",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find("for a " + std::to_string(p.size()) + "-byte pickle"), std::string::npos) << msg;
}

TEST(PickleReader, MemoChainWithATensorLeafHitsTheOutputLimit) {
  // Same shape with a tensor leaf: 2^30 paths reach it. Every path is a name torch.load would give,
  // so each is listed (an alias of the first) until the budget refuses the pickle: a second, not
  // gigabytes, and never a silent cut. Shallow sharing lists every name (next tests).
  constexpr int kLevels = 30;
  auto r = run(proto() + memo_chain(weight(), kLevels) + stop());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("flattening emits more than"), std::string::npos)
      << r.status().to_string();
  auto few = run(proto() + memo_chain(weight(), 4) + stop());
  ASSERT_TRUE(few.is_ok()) << few.status().to_string();
  EXPECT_EQ(few->tensors.size(), 16u) << "2^4 paths, every one listed";
  size_t aliases = 0;
  for (const auto& t : few->tensors) aliases += t.alias_of.empty() ? 0 : 1;
  EXPECT_EQ(aliases, 15u);
}

TEST(PickleReader, LargeStringReferencedThousandsOfTimesHitsTheOutputLimit) {
  // One 1 MiB string in the pickle, 3000 paths to it in the result: 3 GiB if each were copied.
  std::string vocab = empty_list() + mark() + str(std::string(1 << 20, 'v')) + binput(0);
  for (int k = 1; k < 3000; ++k) vocab += binget(0);
  const std::string p = proto() + empty_dict() + mark() + str("w") + weight() + str("vocab") + vocab +
                        appends() + setitems() + stop();
  ASSERT_LT(pickle_output_limit(p.size()), size_t{3000} << 20);
  auto r = run(p);
  ASSERT_FALSE(r.is_ok()) << r->metadata["vocab"].size() << " copies of the string";
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().to_string();
  EXPECT_NE(r.status().message().find("'vocab': flattening emits more than " +
                                      std::to_string(pickle_output_limit(p.size()))),
            std::string::npos)
      << r.status().to_string();
}

TEST(PickleReader, MillionSmallIntsFitTheOutputLimit) {
  // A sampler's index list kept as plain ints: two pickle bytes per value must stay readable.
  // Python's pickler appends in batches of 1000, as here.
  std::string ints;
  for (int batch = 0; batch < 1000; ++batch) {
    ints += mark();
    for (int k = 0; k < 1000; ++k) ints += int1(static_cast<uint8_t>(k));
    ints += appends();
  }
  const std::string p = proto() + empty_dict() + mark() + str("w") + weight() + str("order") + empty_list() +
                        ints + setitems() + stop();
  auto r = run(p);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->metadata["order"].size(), 1'000'000u);
}

TEST(PickleReader, FuzzFoundMemoChainIsRefusedByTheOutputLimit) {
  // Found by fuzz/ (pytorch_fuzz): 1.4 MB, a chain of lists each holding the previous one twice and no
  // tensor. It used to expand to ~12 million JSON values (376 MB, 44 s under ASan) before the limit.
  const std::string path = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/pickle/memo-chain-fuzz.pkl";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  const std::string p((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(p.size(), 1'000'000u);
  auto r = run(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().to_string();
  EXPECT_NE(r.status().message().find("flattening emits more than " +
                                      std::to_string(pickle_output_limit(p.size())) + " bytes"),
            std::string::npos)
      << r.status().to_string();
  EXPECT_LT(pickle_output_limit(p.size()), size_t{32} << 20);
}

TEST(PickleReader, SharedTensorIsListedUnderEveryNameAndAliased) {
  // torch.load gives both names one tensor (tied weights): both are listed, the second marked.
  auto r = run(proto() + empty_dict() + mark() + str("a") + weight() + binput(1) + str("b") + binget(1) +
               setitems() + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[0].name, "a");
  EXPECT_TRUE(r->tensors[0].alias_of.empty());
  EXPECT_EQ(r->tensors[1].name, "b");
  EXPECT_EQ(r->tensors[1].alias_of, "a");
  EXPECT_EQ(r->tensors[1].storage_key, r->tensors[0].storage_key);
  EXPECT_EQ(r->tensors[1].shape, r->tensors[0].shape);
  EXPECT_TRUE(r->metadata.empty()) << r->metadata.dump();
}

TEST(PickleReader, SharedContainerOfTensorsListsEveryName) {
  // A dict holding a tensor, reached twice (blocks sharing one submodule): both names are listed,
  // the second an alias of the first, as torch.load's state gives both (issue 64).
  auto r = run(proto() + empty_dict() + mark() + str("a") + empty_dict() + binput(1) + mark() + str("w") +
               weight() + setitems() + str("b") + binget(1) + setitems() + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->tensors.size(), 2u);
  EXPECT_EQ(r->tensors[0].name, "a.w");
  EXPECT_EQ(r->tensors[1].name, "b.w");
  EXPECT_EQ(r->tensors[1].alias_of, "a.w");
  EXPECT_TRUE(r->metadata.empty()) << r->metadata.dump();
}

TEST(PickleReader, SharedMetadataIsWrittenAtEveryPath) {
  // torch.optim shares one betas tuple among param groups; the metadata shows it in each.
  auto r = run(proto() + empty_dict() + mark() + str("w") + weight() + str("g0") + int1(9) + int1(99) +
               tuple2() + binput(1) + str("g1") + binget(1) + setitems() + stop());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->metadata["g0"], nlohmann::json({9, 99}));
  EXPECT_EQ(r->metadata["g1"], nlohmann::json({9, 99}));
}

TEST(PickleReader, SharedTensorReachedTooDeepHitsTheDepthBound) {
  // The alias does not walk the second path, but that path still nests 33 deep.
  std::string deep = binget(1);
  for (size_t k = 0; k < kPickleMaxNesting; ++k) deep = empty_list() + mark() + deep + appends();
  expect_pickle_error(proto() + empty_dict() + mark() + str("a") + weight() + binput(1) + str("b") + deep +
                          setitems() + stop(),
                      StatusCode::kCorruption, "nests deeper than 32");
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

// Protocols 0 and 1 as CPython's pickle writes them (Python 2's and `pickle_protocol=0/1` files):
// text numbers, quoted and raw-unicode-escape strings, PUT/GET by decimal key, DICT and LIST.
TEST(PickleReaderOldProtocols, ReadsTextOpcodes) {
  const std::string p =
      "(dp0\nVw\np1\nI3\nsVx\np2\nF0.5\nsVbig\np3\nL119547037146038801333356L\nsVb\np4\nI01\nsVs\np5\n"
      "S'a\\x41\\n\\'q'\np6\nsVu\np7\nV\\u00e9t\\u00e9\np8\nsVl\np9\n(lp10\nI-7\nag1\nas.";
  auto r = run(p);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const nlohmann::json& v = r->metadata["value"];
  EXPECT_EQ(v["w"], 3);
  EXPECT_EQ(v["x"], 0.5);
  EXPECT_EQ(v["big"], "int:0x1950a86a20f9469cfc6c");
  EXPECT_EQ(v["b"], true);
  EXPECT_EQ(v["s"], "aA\n'q");
  EXPECT_EQ(v["u"], "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(v["l"], nlohmann::json::parse("[-7, \"w\"]"));
}

TEST(PickleReaderOldProtocols, LegacyMagicInEverySpelling) {
  const std::string binary("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
  for (const std::string& p :
       {binary, std::string("L119547037146038801333356L\n."), std::string("I119547037146038801333356\n.")}) {
    auto r = run(p);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(is_legacy_magic(*r)) << p;
  }
  EXPECT_FALSE(is_legacy_magic(*run("I1001\n.")));
}

// Text that CPython's C and Python readers could take differently is refused, not guessed.
TEST(PickleReaderOldProtocols, NonCanonicalOperandsAreAmbiguous) {
  for (const char* p : {"I010\n.", "I0x1f\n.", "I1_0\n.", "I 1\n.", "L+5L\n.", "F1_0.5\n.", "F 1.0\n.",
                        "V\\x41\n.", "Vab\\\n.", "N(p01\n."}) {
    auto r = run(p);
    ASSERT_FALSE(r.is_ok()) << p;
    EXPECT_EQ(r.status().code(), StatusCode::kAmbiguous) << p << ": " << r.status().to_string();
  }
}

// CPython reads a whole FRAME before running it: a STOP before the frame's end leaves the next pickle
// of a stream at the frame's end for CPython, not after the STOP. Refused; a frame the STOP ends is read.
TEST(PickleReaderFrames, StopInsideItsFrameIsAmbiguous) {
  const auto frame = [](uint64_t n) {
    std::string f("\x95", 1);
    for (int k = 0; k < 8; ++k) f += static_cast<char>((n >> (8 * k)) & 0xff);
    return f;
  };
  const std::string body = "K\x05.";  // BININT1 5, STOP
  auto whole = run("\x80\x04" + frame(body.size()) + body);
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();
  EXPECT_EQ(whole->end_offset, 2 + 9 + body.size());
  expect_pickle_error("\x80\x04" + frame(body.size() + 4) + body + "cos\n", StatusCode::kAmbiguous,
                      "STOP inside a frame");
  expect_pickle_error("\x80\x04" + frame(1) + body, StatusCode::kAmbiguous, "past the end of its frame");
  expect_pickle_error("\x80\x04" + frame(12) + frame(1) + body, StatusCode::kAmbiguous,
                      "FRAME inside a frame");
}

// INST and OBJ call their class; EXT names a global from the loading process's registry.
TEST(PickleReaderOldProtocols, InstObjAndExtensionCodesAreCalls) {
  auto inst = run("(S'touch x'\niposix\nsystem\np0\n.");
  ASSERT_TRUE(inst.is_ok()) << inst.status().to_string();
  ASSERT_EQ(inst->globals.size(), 1u);
  EXPECT_EQ(inst->globals[0].name, "posix.system");
  EXPECT_NE(inst->globals[0].uses & kPickleUseCalledWithStrings, 0u);
  auto obj = run("(cposix\nsystem\nS'x'\no.");
  ASSERT_TRUE(obj.is_ok()) << obj.status().to_string();
  EXPECT_EQ(obj->globals.at(0).name, "posix.system");
  auto ext = run(std::string("\x80\x02\x82\x05)R.", 7));
  ASSERT_TRUE(ext.is_ok()) << ext.status().to_string();
  EXPECT_EQ(ext->globals.at(0).name, "copyreg._extension_registry[5]");
  EXPECT_EQ(ext->globals.at(0).risk, PickleGlobalRisk::kExecutes);
  expect_pickle_error(std::string("\x80\x05\x97.", 4), StatusCode::kNotSupported, "out-of-band buffer");
}

// What a loader calls counts as a call wherever it sits: _rebuild_from_type_v2 calls its first
// argument, so a getattr result or a global there is no attribute read or named value.
TEST(PickleReaderCalls, ArgumentsALoaderCallsAreCalls) {
  const std::string lookup =
      global("builtins", "getattr") + global("torch", "Tensor") + str("__init__") + tuple2() + reduce();
  const std::string p = proto() + global("torch._tensor", "_rebuild_from_type_v2") + mark() + lookup +
                        global("torch", "Tensor") + empty_tuple() + empty_dict() + tuple() + reduce() +
                        stop();
  auto r = run(p);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  bool saw_getattr = false;
  for (const PickleGlobal& g : r->globals) {
    if (g.name != "builtins.getattr") continue;
    saw_getattr = true;
    EXPECT_GT(g.other_calls, 0u) << "a getattr result passed where the loader calls it";
  }
  EXPECT_TRUE(saw_getattr);
  const std::string q = proto() + global("torch._tensor", "_rebuild_from_type_v2") + mark() +
                        global("pathlib", "PosixPath") + global("torch", "Tensor") + empty_tuple() +
                        empty_dict() + tuple() + reduce() + stop();
  auto s = run(q);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  for (const PickleGlobal& g : s->globals) {
    if (g.name == "pathlib.PosixPath") {
      EXPECT_NE(g.uses & kPickleUseOtherCall, 0u);
    }
  }
}

// An unpickler imports (and may call) what a pickle names before it fails: the failure says so.
TEST(PickleReaderCalls, AFailingPickleNamesItsCallsFirst) {
  const std::string p = std::string("cposix\nsystem\n(S'x'\ntR") + std::string("\x00\x00", 2);
  auto r = run(p);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("posix.system (dangerous"), std::string::npos)
      << r.status().to_string();
  const auto named = pickle_globals_before_error(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].name, "posix.system");
}

}  // namespace
}  // namespace ckpt
