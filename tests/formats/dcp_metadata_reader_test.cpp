// The typed `.metadata` reader against the restricted VM's reading: every DCP fixture, real and
// hostile, must read the same both ways wherever the typed reader reads it, and the shapes torch
// writes must be read by the typed reader (else the million-chunk checkpoints fall to the VM's
// bounds again).
#include "formats/dcp_metadata_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/byte_source.h"
#include "base/file_io.h"
#include "formats/dcp_metadata.h"
#include "formats/pickle_reader.h"
#include "tests/support/pickle_ops.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::TempDir;

std::string source(const std::string& rel) {
  return std::string(CKPTCHECK_SOURCE_DIR) + "/" + rel;
}

// The `.metadata` files torch wrote (1.13 by Debian's torch, 2.x by torch 2.11 on a GPU machine,
// Megatron-Core's torch_dist layout, DCP's safetensors serialization).
const std::vector<std::string> kTorchWritten = {
    "tests/data/dcp/torch113/.metadata",
    "tests/data/dcp/dcp2_storage_meta/.metadata",
    "tests/data/dcp/safetensors_v28/.metadata",
    "tests/data/dcp/megatron_torch_dist/.metadata",
    "tests/data/dcp/megatron_2rank_planner/.metadata",
    "tests/data/torch211/dcp_ddp/.metadata",
    "tests/data/torch211/dcp_fsdp2/.metadata",
    "tests/data/torch211/dcp_fsdp2_2rank/.metadata",
};
// Hand-made hostile pickles: os.system, pathlib's unlink, a REDUCE in planner_data, invalid UTF-8.
const std::vector<std::string> kHostile = {
    "tests/data/dcp/profile_hostile/os_system.metadata",
    "tests/data/dcp/profile_hostile/path_unlink.metadata",
    "tests/data/dcp/profile_hostile/planner_reduce_call.metadata",
    "tests/data/dcp/fuzz-invalid-utf8-global.metadata",
};
const std::string kRealSample = "../shared/realworld-samples/dcp-lightning-2rank/.metadata";
// The fixtures, and the real Lightning sample where ../shared is beside the checkout.
std::vector<std::string> torch_written() {
  std::vector<std::string> files = kTorchWritten;
  if (is_regular_file(source(kRealSample))) files.push_back(kRealSample);
  return files;
}

// Part by part, so that a failure names the tensor, item or global that differs.
void expect_same_records(const DcpMetadata& a, const DcpMetadata& b) {
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.metadata_class, b.metadata_class);
  EXPECT_EQ(a.mcore_data, b.mcore_data);
  EXPECT_EQ(a.planner_data, b.planner_data);
  EXPECT_EQ(a.storage_meta, b.storage_meta);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t t = 0; t < a.tensors.size(); ++t) EXPECT_TRUE(a.tensors[t] == b.tensors[t]) << a.tensors[t].fqn;
  ASSERT_EQ(a.bytes.size(), b.bytes.size());
  for (size_t i = 0; i < a.bytes.size(); ++i) EXPECT_TRUE(a.bytes[i] == b.bytes[i]) << a.bytes[i].fqn;
  ASSERT_EQ(a.items.size(), b.items.size());
  for (size_t i = 0; i < a.items.size(); ++i) EXPECT_TRUE(a.items[i] == b.items[i]) << a.items[i].label();
  ASSERT_EQ(a.globals.size(), b.globals.size());
  for (size_t i = 0; i < a.globals.size(); ++i)
    EXPECT_TRUE(same_listing(a.globals[i], b.globals[i])) << a.globals[i].name;
  EXPECT_TRUE(a == b);
}

// The typed reading of `bytes`, finished, or nullopt when the typed reader left it to the VM; and
// the VM's. Where the typed reader reads, both must agree: the same records or the same message.
struct BothReadings {
  std::optional<Result<DcpMetadata>> typed;
  Result<DcpMetadata> vm;
};

BothReadings read_both(const std::vector<uint8_t>& bytes, const std::string& where) {
  BothReadings r{read_dcp_metadata_typed(bytes.data(), bytes.size(), where),
                 read_dcp_metadata_with_vm(bytes.data(), bytes.size(), where)};
  if (r.typed && r.typed->is_ok()) {
    const Status st = finish_dcp_metadata(where, **r.typed);
    if (!st.is_ok()) *r.typed = st;
  }
  if (r.vm.is_ok()) {
    const Status st = finish_dcp_metadata(where, *r.vm);
    if (!st.is_ok()) r.vm = st;
  }
  return r;
}

void expect_agreement(const BothReadings& r) {
  ASSERT_TRUE(r.typed.has_value());
  ASSERT_EQ(r.typed->is_ok(), r.vm.is_ok())
      << (r.typed->is_ok() ? r.vm.status() : r.typed->status()).to_string();
  if (!r.vm.is_ok()) {
    EXPECT_EQ(r.typed->status().message(), r.vm.status().message());
    EXPECT_EQ(r.typed->status().code(), r.vm.status().code());
    return;
  }
  expect_same_records(**r.typed, *r.vm);
}

TEST(DcpMetadataReader, ReadsEveryTorchWrittenFixtureAsTheVmDoes) {
  for (const std::string& rel : torch_written()) {
    SCOPED_TRACE(rel);
    const std::vector<uint8_t> bytes = testing::read_file_bytes(source(rel));
    const BothReadings r = read_both(bytes, rel);
    ASSERT_TRUE(r.typed.has_value()) << "the typed reader left a pickle torch wrote to the VM";
    ASSERT_TRUE(r.vm.is_ok()) << r.vm.status().to_string();
    expect_agreement(r);
    EXPECT_FALSE((*r.typed)->tensors.empty());
  }
}

// The file read a window at a time, down to a byte: every opcode, string and number split across
// reads, the same records as the bytes read whole. read_dcp_metadata_file (what `inspect` and
// `verify` open) gives what parse_dcp_metadata gives.
TEST(DcpMetadataReader, ReadsAFileAWindowAtATimeAsItReadsTheWholeBytes) {
  for (const std::string& rel : torch_written()) {
    SCOPED_TRACE(rel);
    const std::vector<uint8_t> bytes = testing::read_file_bytes(source(rel));
    std::optional<Result<DcpMetadata>> whole = read_dcp_metadata_typed(bytes.data(), bytes.size(), rel);
    ASSERT_TRUE(whole.has_value() && whole->is_ok());
    auto file = FileByteSource::open(source(rel));
    ASSERT_TRUE(file.is_ok()) << file.status().to_string();
    for (size_t window : {size_t{1}, size_t{7}, size_t{300}, kDcpMetadataWindowBytes}) {
      SCOPED_TRACE("window " + std::to_string(window));
      std::optional<Result<DcpMetadata>> windowed = read_dcp_metadata_typed(**file, rel, window);
      ASSERT_TRUE(windowed.has_value()) << "left to the VM";
      ASSERT_TRUE(windowed->is_ok()) << windowed->status().to_string();
      expect_same_records(**windowed, **whole);
    }
    auto opened = read_dcp_metadata_file(source(rel));
    auto parsed = parse_dcp_metadata(bytes.data(), bytes.size(), source(rel));
    ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
    ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
    expect_same_records(*opened, *parsed);
  }
}

// The file's own read errors and limits reach the user as read_small_file words them.
TEST(DcpMetadataReader, AFileThatCannotBeReadIsNamedAsBefore) {
  TempDir dir;
  const std::string missing = dir / "none/.metadata";
  auto md = read_dcp_metadata_file(missing);
  ASSERT_FALSE(md.is_ok());
  EXPECT_EQ(md.status().message(), read_small_file(missing, kDcpMaxMetadataBytes).status().message());
}

TEST(DcpMetadataReader, HostilePicklesReadTheSameOrGoToTheVm) {
  size_t typed = 0;
  for (const std::string& rel : kHostile) {
    SCOPED_TRACE(rel);
    const BothReadings r = read_both(testing::read_file_bytes(source(rel)), rel);
    if (!r.typed) continue;
    ++typed;
    expect_agreement(r);
  }
  // Inert globals are names to both readers: os.system in a class position reads the same way.
  EXPECT_GE(typed, 1u);
}

// Found by dcp_fuzz (fuzz/crashes/README.md, opcode-past-frame): a `.metadata` whose last frame
// ends inside an opcode. The VM refuses it as ambiguous (CPython and a frame-unaware reader could
// read it differently); the typed reader read on and passed it. It must hand it to the VM.
TEST(DcpMetadataReader, FuzzFoundOpcodePastItsFrameGoesToTheVm) {
  const BothReadings r =
      read_both(testing::read_file_bytes(source("tests/data/dcp/fuzz-opcode-past-frame.metadata")), "x");
  EXPECT_FALSE(r.typed.has_value()) << "the typed reader must decline it";
  ASSERT_FALSE(r.vm.is_ok());
  EXPECT_EQ(r.vm.status().code(), StatusCode::kAmbiguous) << r.vm.status().to_string();
  EXPECT_NE(r.vm.status().message().find("past the end of its frame"), std::string::npos);
}

// Bytes of the torch 2.x fixture with one chunk's size changed: the chunk at (0, 0) sized (2, 6)
// of a (4, 6) tensor becomes (2, 200). Both readings name it with the same line.
TEST(DcpMetadataReader, AChunkOutsideItsTensorIsTheSameErrorBothWays) {
  std::vector<uint8_t> bytes = testing::read_file_bytes(source("tests/data/dcp/dcp2_storage_meta/.metadata"));
  ASSERT_GT(bytes.size(), 493u);
  ASSERT_EQ(bytes[489], 'K');
  ASSERT_EQ(bytes[490], 2);
  ASSERT_EQ(bytes[491], 'K');
  ASSERT_EQ(bytes[492], 6);
  bytes[492] = 200;
  const BothReadings r = read_both(bytes, "damaged/.metadata");
  expect_agreement(r);
  ASSERT_FALSE(r.vm.is_ok());
  EXPECT_NE(r.vm.status().message().find("sized [2, 200]"), std::string::npos) << r.vm.status().message();
  auto parsed = parse_dcp_metadata(bytes.data(), bytes.size(), "damaged/.metadata");
  ASSERT_FALSE(parsed.is_ok());
  EXPECT_EQ(parsed.status().message(), r.vm.status().message());
}

// Every prefix and every single-byte change of a torch-written pickle: wherever the typed reader
// reads, it agrees with the VM (a truncated or corrupted pickle is never read differently).
TEST(DcpMetadataReader, DamagedPicklesNeverReadDifferently) {
  const std::vector<uint8_t> good =
      testing::read_file_bytes(source("tests/data/dcp/dcp2_storage_meta/.metadata"));
  size_t typed = 0, left = 0;
  for (size_t n = 0; n < good.size(); n += 7) {
    const std::vector<uint8_t> prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    const BothReadings r = read_both(prefix, "prefix");
    EXPECT_FALSE(r.typed.has_value() && r.typed->is_ok()) << n;  // a pickle cut short has no STOP
  }
  for (size_t at = 0; at < good.size(); at += 3) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x40}}) {
      std::vector<uint8_t> bytes = good;
      bytes[at] ^= flip;
      const BothReadings r = read_both(bytes, "flipped");
      if (!r.typed) {
        ++left;
        continue;
      }
      ++typed;
      SCOPED_TRACE("byte " + std::to_string(at) + " ^ " + std::to_string(flip));
      expect_agreement(r);
    }
  }
  EXPECT_GT(typed, 100u);  // most changes (a digit, a name) still read
  EXPECT_GT(left, 100u);   // opcodes and lengths changed send it to the VM
}

// A Metadata whose one tensor's chunk list names one ChunkStorageMetadata `repeats` more times by
// memo reference (BINGET + APPEND, three bytes each).
std::string metadata_repeating_a_chunk(size_t repeats) {
  using namespace pk;
  const std::string m = "torch.distributed.checkpoint.metadata";
  auto size_of = [&](uint8_t a, uint8_t b) {
    return global("torch", "Size") + mark() + mark() + int1(a) + int1(b) + tuple() + tuple() + reduce();
  };
  const std::string chunk = global(m, "ChunkStorageMetadata") + empty_tuple() + newobj() + empty_dict() +
                            mark() + str("offsets") + size_of(0, 0) + str("sizes") + size_of(4, 4) +
                            setitems() + build();
  const std::string props = global(m, "TensorProperties") + empty_tuple() + newobj() + mark() +
                            global("torch", "float32") + tuple() + build();
  std::string repeated;
  for (size_t k = 0; k < repeats; ++k) repeated += binget(0) + "a";
  const std::string tensor = global(m, "TensorStorageMetadata") + empty_tuple() + newobj() + empty_dict() +
                             mark() + str("properties") + props + str("size") + size_of(4, 4) +
                             str("chunks") + empty_list() + mark() + chunk + binput(0) + appends() +
                             repeated + setitems() + build();
  return proto() + global(m, "Metadata") + empty_tuple() + newobj() + empty_dict() + mark() +
         str("state_dict_metadata") + empty_dict() + mark() + str("w") + tensor + setitems() +
         str("storage_data") + empty_dict() + setitems() + build() + stop();
}

// The pieces of a Metadata of one [4, 4] tensor "w" in one chunk, for the region cases below.
namespace region_case {
const std::string kM = "torch.distributed.checkpoint.metadata";
std::string size_of(uint8_t a, uint8_t b) {
  using namespace pk;
  return global("torch", "Size") + mark() + mark() + int1(a) + int1(b) + tuple() + tuple() + reduce();
}
// The chunk's state dict is remembered in memo slot `state_slot` (this reader, like pickle, numbers
// the memo in order: the slot is the count of earlier BINPUTs); `inside` runs within its region,
// between the sizes and the SETITEMS.
std::string chunk(uint8_t state_slot, const std::string& inside) {
  using namespace pk;
  return global(kM, "ChunkStorageMetadata") + empty_tuple() + newobj() + empty_dict() + binput(state_slot) +
         mark() + str("offsets") + size_of(0, 0) + str("sizes") + size_of(4, 4) + inside + setitems() +
         build();
}
std::string tensor(const std::string& chunk) {
  using namespace pk;
  const std::string props = global(kM, "TensorProperties") + empty_tuple() + newobj() + mark() +
                            global("torch", "float32") + tuple() + build();
  return global(kM, "TensorStorageMetadata") + empty_tuple() + newobj() + empty_dict() + mark() +
         str("properties") + props + str("size") + size_of(4, 4) + str("chunks") + empty_list() + mark() +
         chunk + appends() + setitems() + build();
}
// Metadata(<before>, state_dict_metadata={"w": tensor}, storage_data={<pairs>}, <after>)
std::string metadata(const std::string& fields_before, const std::string& chunk,
                     const std::string& fields_after, const std::string& storage_pairs = "") {
  using namespace pk;
  return proto() + global(kM, "Metadata") + empty_tuple() + newobj() + empty_dict() + mark() + fields_before +
         str("state_dict_metadata") + empty_dict() + mark() + str("w") + tensor(chunk) + setitems() +
         str("storage_data") + empty_dict() +
         (storage_pairs.empty() ? "" : mark() + storage_pairs + setitems()) + fields_after + setitems() +
         build() + stop();
}
// MetadataIndex("w", (row, 0), index) -> _StorageInfo("a.distcp", 0, length)
std::string storage_pair(uint8_t row, uint8_t length) {
  using namespace pk;
  return global(kM, "MetadataIndex") + empty_tuple() + newobj() + empty_dict() + mark() + str("fqn") +
         str("w") + str("offset") + size_of(row, 0) + str("index") + int1(0) + setitems() + build() +
         global("torch.distributed.checkpoint.filesystem", "_StorageInfo") + empty_tuple() + newobj() +
         empty_dict() + mark() + str("relative_path") + str("a.distcp") + str("offset") + int1(0) +
         str("length") + int1(length) + setitems() + build();
}
std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}
}  // namespace region_case

// The typed reader lets go of what a chunk's NEWOBJ..BUILD made once the chunk is a record. A later
// BINGET of such a value (here the chunk's state dict, as planner_data) cannot be answered from what
// is left: the pickle goes to the VM, which reads the dict. Reading it from what was let go would
// give planner_data a wrong value, and the readings would disagree.
TEST(DcpMetadataReader, AValueLetGoWithItsChunkSendsThePickleToTheVm) {
  using namespace pk;
  using namespace region_case;
  const std::vector<uint8_t> bytes = bytes_of(metadata("", chunk(0, ""), str("planner_data") + binget(0)));
  const BothReadings r = read_both(bytes, "reused/.metadata");
  EXPECT_FALSE(r.typed.has_value());
  ASSERT_TRUE(r.vm.is_ok()) << r.vm.status().to_string();
  EXPECT_EQ(r.vm->planner_data, nlohmann::json::parse(R"({"offsets": [0, 0], "sizes": [4, 4]})"));
  auto parsed = parse_dcp_metadata(bytes.data(), bytes.size(), "reused/.metadata");
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_EQ(parsed->planner_data, r.vm->planner_data);
  ASSERT_EQ(parsed->tensors.size(), 1u);
  ASSERT_EQ(parsed->tensors[0].chunks.size(), 1u);
}

// A value made inside a chunk's NEWOBJ..BUILD and appended to an older list (planner_data's): the
// region cannot be let go without taking that value from the list, so the chunk stays an object
// and the VM reads the pickle. The shared tuples a region leaves (the chunk's offsets, remembered
// and used again by BINGET) read the same both ways.
TEST(DcpMetadataReader, AValueThatEscapesItsChunkKeepsTheChunkWhole) {
  using namespace pk;
  using namespace region_case;
  const std::string planner = str("planner_data") + empty_list() + binput(0);
  const std::string escape = binget(0) + size_of(9, 9) + "a" + pop();
  const std::vector<uint8_t> escaped = bytes_of(metadata(planner, chunk(1, escape), ""));
  const BothReadings r = read_both(escaped, "escaped/.metadata");
  EXPECT_FALSE(r.typed.has_value());
  ASSERT_TRUE(r.vm.is_ok()) << r.vm.status().to_string();
  EXPECT_EQ(r.vm->planner_data, nlohmann::json::parse("[[9, 9]]"));

  // The same chunk without the escape, its sizes tuple remembered (slot 0) and named again after
  // the chunk in storage_meta: the typed reader reads it, as the VM does.
  const std::vector<uint8_t> sizes_again = bytes_of(metadata(
      "",
      global(kM, "ChunkStorageMetadata") + empty_tuple() + newobj() + empty_dict() + mark() + str("offsets") +
          size_of(0, 0) + str("sizes") + size_of(4, 4) + binput(0) + setitems() + build(),
      str("storage_meta") + binget(0)));
  const BothReadings same = read_both(sizes_again, "kept/.metadata");
  ASSERT_TRUE(same.typed.has_value()) << "a remembered tuple sent the pickle to the VM";
  expect_agreement(same);
  ASSERT_TRUE(same.vm.is_ok()) << same.vm.status().to_string();
  EXPECT_EQ(same.vm->storage_meta, nlohmann::json::parse("[4, 4]"));
}

// Items are tied to chunks by sorting both by key: an item whose key an earlier one has is named,
// the first such in pickle order, the same way by both readers; distinct keys tie each chunk to its own.
TEST(DcpMetadataReader, AStorageItemListedTwiceIsNamedBothWays) {
  using namespace region_case;
  const std::vector<uint8_t> twice = bytes_of(
      metadata("", chunk(0, ""), "",
               storage_pair(2, 10) + storage_pair(0, 11) + storage_pair(0, 12) + storage_pair(0, 13)));
  const BothReadings r = read_both(twice, "twice/.metadata");
  expect_agreement(r);
  ASSERT_FALSE(r.vm.is_ok());
  EXPECT_EQ(r.vm.status().message(), "twice/.metadata: storage item w at [0, 0] is listed twice");

  const std::vector<uint8_t> distinct =
      bytes_of(metadata("", chunk(0, ""), "", storage_pair(2, 10) + storage_pair(0, 11)));
  const BothReadings d = read_both(distinct, "distinct/.metadata");
  expect_agreement(d);
  ASSERT_TRUE(d.vm.is_ok()) << d.vm.status().to_string();
  ASSERT_EQ(d.vm->tensors.size(), 1u);
  ASSERT_EQ(d.vm->tensors[0].chunks.size(), 1u);
  ASSERT_EQ(d.vm->tensors[0].chunks[0].item, 1u);  // the chunk at (0, 0) is the second item
  EXPECT_EQ(d.vm->items[1].length, 11u);
}

// Half a million records from three bytes each: the typed reader charges every record to a budget that
// grows with the pickle's size, so it steps aside and the VM refuses the file with its own budget.
// Two repeats read the same both ways (the budget is no guess at torch's shapes).
TEST(DcpMetadataReader, RepeatedReferencesCannotMultiplyRecords) {
  const std::string few = metadata_repeating_a_chunk(2);
  const std::vector<uint8_t> few_bytes(few.begin(), few.end());
  const BothReadings r = read_both(few_bytes, "few/.metadata");
  expect_agreement(r);
  ASSERT_TRUE(r.vm.is_ok()) << r.vm.status().to_string();
  ASSERT_EQ(r.vm->tensors.size(), 1u);
  EXPECT_EQ(r.vm->tensors[0].chunks.size(), 3u);

  const std::string many = metadata_repeating_a_chunk(500'000);
  const auto* data = reinterpret_cast<const uint8_t*>(many.data());
  EXPECT_FALSE(read_dcp_metadata_typed(data, many.size(), "many/.metadata").has_value());
  auto parsed = parse_dcp_metadata(data, many.size(), "many/.metadata");
  ASSERT_FALSE(parsed.is_ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kCorruption);
  EXPECT_NE(parsed.status().message().find("flattening emits more than"), std::string::npos)
      << parsed.status().message();
}

// 102,400 chunks, past the VM's bounds (a million memo entries at ~13 a chunk; the VM stops near
// 77,000, and the bench's 256k row shows its error), read by the typed reader and checked against
// what the writer put there. The VM is not run here: reaching its bound takes ten seconds in a debug
// build.
TEST(DcpMetadataReader, ReadsMoreChunksThanTheVmCan) {
  TempDir dir;
  const std::string path = dir / ".metadata";
  const auto made = testing::run_command("/usr/bin/python3 " + source("bench/metadata_inputs.py") +
                                         " dcp-metadata " + path + " 6400 16");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::vector<uint8_t> bytes = testing::read_file_bytes(path);
  std::optional<Result<DcpMetadata>> typed = read_dcp_metadata_typed(bytes.data(), bytes.size(), path);
  ASSERT_TRUE(typed.has_value()) << "left to the VM";
  ASSERT_TRUE(typed->is_ok()) << typed->status().to_string();
  auto md = parse_dcp_metadata(bytes.data(), bytes.size(), path);
  ASSERT_TRUE(md.is_ok()) << md.status().to_string();
  EXPECT_EQ(md->layout, "torch-2.4");
  EXPECT_EQ(md->version, "1.0.0");
  ASSERT_EQ(md->tensors.size(), 6400u);
  ASSERT_EQ(md->items.size(), 102400u);
  // Tensor t is "model.layers.{t/4}.mlp.w{t%4}", [64, 64] F32 in 16 row chunks; chunk k of every
  // tensor lies in __k_0.distcp, each item 2048 bytes after the last of that file.
  const DcpTensor& t = md->tensors[0];
  EXPECT_EQ(t.fqn, "model.layers.0.mlp.w0");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{64, 64}));
  ASSERT_EQ(t.chunks.size(), 16u);
  const DcpChunk& c = t.chunks[5];
  EXPECT_EQ(c.offsets, (std::vector<int64_t>{20, 0}));
  EXPECT_EQ(c.sizes, (std::vector<int64_t>{4, 64}));
  ASSERT_LT(c.item, md->items.size());
  const DcpItem& it = md->items[c.item];
  EXPECT_EQ(it.fqn, t.fqn);
  EXPECT_EQ(it.relative_path, "__5_0.distcp");
  EXPECT_EQ(it.offset, 0u);
  EXPECT_EQ(it.length, 2048u);
  const DcpTensor& last = md->tensors.back();
  EXPECT_EQ(last.fqn, "model.layers.999.mlp.w3");
  // model.layers.999.mlp.w3 is tensor 3999, so each of its items starts 3999 items into its file.
  EXPECT_EQ(md->items[last.chunks[15].item].offset, 3999u * 2048u);
  EXPECT_EQ(md->items[last.chunks[15].item].length, 2048u);
  EXPECT_EQ(md->items[last.chunks[15].item].relative_path, "__15_0.distcp");
  for (const DcpTensor& x : md->tensors)
    for (const DcpChunk& k : x.chunks) ASSERT_LT(k.item, md->items.size()) << x.fqn;
}

}  // namespace
}  // namespace ckpt
