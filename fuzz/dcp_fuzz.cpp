// parse_dcp_metadata (formats/dcp_checkpoint.h) on arbitrary `.metadata` bytes: it must return a
// Status, never crash, leak or hang, and what it accepts must keep the promises DcpCheckpoint and
// the verifier build on (checked below; a broken one aborts so libFuzzer keeps the input). No file
// system access: the data files are not opened. Same flags and pickle mutator as pickle_fuzz.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "formats/dcp_checkpoint.h"
#include "formats/dcp_metadata_reader.h"
#include "fuzz/fuzz_checks.h"
#include "fuzz/pickle_mutator.h"

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return ckpt::fuzz::mutate_pickle(data, size, max_size, seed);
}

namespace {

using ckpt::fuzz::invariant_broken;

void check_metadata(const ckpt::DcpMetadata& md) {
  if (md.layout != "torch-1.13" && md.layout != "torch-2.0" && md.layout != "torch-2.4")
    invariant_broken("unknown layout");
  std::set<std::pair<std::string, std::vector<int64_t>>> tensor_items;
  std::set<std::string> bytes_items;
  for (const ckpt::DcpItem& it : md.items) {
    if (it.offset > UINT64_MAX - it.length) invariant_broken("an item's offset + length overflows");
    if (it.is_bytes && !it.offsets.empty()) invariant_broken("a bytes item has offsets");
    const bool fresh = it.is_bytes ? bytes_items.insert(it.fqn).second
                                   : tensor_items.insert({it.fqn, it.offsets.to_vector()}).second;
    if (!fresh) invariant_broken("an item is listed twice");
  }
  nlohmann::json names = nlohmann::json::array();  // inspect --json dumps these; must be valid UTF-8
  std::string previous;
  for (size_t ti = 0; ti < md.tensors.size(); ++ti) {
    const ckpt::DcpTensor& t = md.tensors[ti];
    if (ti > 0 && t.fqn < previous) invariant_broken("tensors are not sorted by fqn");
    previous = t.fqn;
    if (!ckpt::checked_nbytes(t.shape, t.dtype)) invariant_broken("an accepted shape overflows");
    names.push_back(t.fqn);
    names.push_back(t.torch_dtype);
    for (size_t ci = 0; ci < t.chunks.size(); ++ci) {
      const ckpt::DcpChunk& c = t.chunks[ci];
      if (c.offsets.size() != t.shape.size() || c.sizes.size() != t.shape.size())
        invariant_broken("a chunk's rank differs from its tensor's");
      for (size_t d = 0; d < t.shape.size(); ++d) {
        if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] > t.shape[d] ||
            c.sizes[d] > t.shape[d] - c.offsets[d])
          invariant_broken("a chunk leaves its tensor");
      }
      if (ci > 0 && c.offsets < t.chunks[ci - 1].offsets) invariant_broken("chunks are not sorted");
      if (c.item == SIZE_MAX) continue;
      if (c.item >= md.items.size()) invariant_broken("a chunk's item index is out of range");
      const ckpt::DcpItem& it = md.items[c.item];
      if (it.is_bytes || it.fqn != t.fqn || it.offsets != c.offsets)
        invariant_broken("a chunk names another item");
    }
  }
  for (const ckpt::DcpBytesEntry& b : md.bytes) {
    names.push_back(b.fqn);
    if (b.item == SIZE_MAX) continue;
    if (b.item >= md.items.size()) invariant_broken("a bytes entry's item index is out of range");
    if (!md.items[b.item].is_bytes || md.items[b.item].fqn != b.fqn)
      invariant_broken("a bytes entry names another item");
  }
  for (const ckpt::DcpItem& it : md.items) {
    names.push_back(it.label());
    names.push_back(it.relative_path);
    for (const std::string& t : it.transforms) names.push_back(t);
  }
  for (const ckpt::PickleGlobal& g : md.globals) names.push_back(g.name);
  names.push_back(md.version);
  (void)names.dump();
  (void)md.planner_data.dump();
  (void)md.storage_meta.dump();
}

// Wherever the typed reader reads a pickle, the VM's reading of it is the same: the same records, or
// the same error (formats/dcp_metadata_reader.h).
void check_typed_reading_agrees(const uint8_t* data, size_t size) {
  const std::string where = "<fuzz>/.metadata";
  std::optional<ckpt::Result<ckpt::DcpMetadata>> typed = ckpt::read_dcp_metadata_typed(data, size, where);
  if (!typed) return;
  ckpt::Result<ckpt::DcpMetadata> vm = ckpt::read_dcp_metadata_with_vm(data, size, where);
  if (typed->is_ok()) {
    const ckpt::Status st = ckpt::finish_dcp_metadata(where, **typed);
    if (!st.is_ok()) *typed = st;
  }
  if (vm.is_ok()) {
    const ckpt::Status st = ckpt::finish_dcp_metadata(where, *vm);
    if (!st.is_ok()) vm = st;
  }
  if (typed->is_ok() != vm.is_ok()) invariant_broken("the typed reader and the VM disagree on success");
  if (!vm.is_ok() && typed->status().message() != vm.status().message())
    invariant_broken("the typed reader and the VM give different errors");
  if (vm.is_ok() && !(**typed == *vm)) invariant_broken("the typed reader and the VM read different records");
}

// The typed reader over a file, a few bytes at a time, reads what it reads from the whole bytes.
void check_windowed_reading_agrees(const uint8_t* data, size_t size) {
  const std::string where = "<fuzz>/.metadata";
  std::optional<ckpt::Result<ckpt::DcpMetadata>> whole = ckpt::read_dcp_metadata_typed(data, size, where);
  const ckpt::MemoryByteSource source(std::vector<uint8_t>(data, data + size));
  std::optional<ckpt::Result<ckpt::DcpMetadata>> windowed =
      ckpt::read_dcp_metadata_typed(source, where, 1 + size % 13);
  if (whole.has_value() != windowed.has_value())
    invariant_broken("the typed reader reads the bytes whole and a window at a time differently");
  if (!whole) return;
  if (whole->is_ok() != windowed->is_ok() ||
      (whole->is_ok() ? !(**whole == **windowed) : whole->status().message() != windowed->status().message()))
    invariant_broken("the typed reader reads the bytes whole and a window at a time differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto result = ckpt::parse_dcp_metadata(data, size, "<fuzz>/.metadata");
  if (result.is_ok()) check_metadata(result.value());
  check_typed_reading_agrees(data, size);
  check_windowed_reading_agrees(data, size);
  return 0;
}
