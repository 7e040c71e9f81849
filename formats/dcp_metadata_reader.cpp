#include "formats/dcp_metadata_reader.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/byte_coding.h"
#include "base/mapped_allocator.h"
#include "formats/pickle_reader.h"
#include "formats/tensor_file.h"

namespace ckpt {
// A named namespace as well: unity batches compile this file with pickle_reader.cpp, whose
// unnamed namespace has its own Kind, Ref and kNoneRef.
namespace dcp_typed_reader {
namespace {

// kChunk, kIndex and kStorage are the records a ChunkStorageMetadata, a MetadataIndex and a
// _StorageInfo become once BUILD gave them their state (see Region below); kDead is what the memo
// holds for a value that was let go with its region.
enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kObject,
  kChunk,
  kIndex,
  kStorage,
  kDead
};

// A value: an index into the cells, or (top bit set) a non-negative int below 2^31 itself, which is
// what almost every int in a `.metadata` is (offsets, sizes, lengths), so those take no cell.
using Ref = uint32_t;
constexpr Ref kSmallInt = 0x80000000u;
// Shared cells, made first. Every NEWOBJ pickles an empty tuple (three a chunk), never memoized.
constexpr Ref kNoneRef = 0, kFalseRef = 1, kTrueRef = 2, kEmptyTupleRef = 3, kDeadRef = 4;

// The machine's large arrays are mapped on their own (base/mapped_allocator.h): what is freed
// before the records are made (the memo, the window, the items' records) goes back to the system.
template <class T>
using Array = std::vector<T, MappedAllocator<T>>;

// One value in 8 bytes: the kind in the low 4 bits, above it a payload that depends on the kind:
//   kInt: the value (60-bit two's complement)     kString: offset (32 bits) and length (28 bits) in
//   kTuple: start (32) and count (28) in pool_      strings_, where every string's bytes are copied
//   kFloat / kList / kDict / kGlobal / kObject: an index into floats_ / containers_ / globals_ / objects_
//   kChunk / kIndex / kStorage: an index into chunks_ / indexes_ / storages_
struct Cell {
  uint64_t bits;
  Kind kind() const { return static_cast<Kind>(bits & 15); }
  uint64_t payload() const { return bits >> 4; }
  uint32_t low() const { return static_cast<uint32_t>(bits >> 4); }
  uint32_t high() const { return static_cast<uint32_t>(bits >> 36); }
};
constexpr int64_t kMaxCellInt = (int64_t{1} << 59) - 1;
// What a record (a chunk, an item, a tensor) is charged besides its strings and dims, as the VM's
// flattening charges a value: the records a pickle makes are bounded by its size. The budget is the
// VM's, or twice the pickle's size where that is more: 1M chunks charge ~250 MB for a 143 MB file.
constexpr size_t kChunkRecordCost = 64;
constexpr uint64_t kMaxCount = (uint64_t{1} << 28) - 1;

// A list or dict (key, value, key, value...): a run of pool_ that grows in place at the pool's end
// and moves to the end (doubling) otherwise.
struct Container {
  uint32_t start = 0, count = 0, capacity = 0;
};

// NEWOBJ(cls, args) or REDUCE(callable, args) on an inert global, and the state BUILD gave it.
struct Object {
  uint32_t name;  // index into globals_
  Ref args;
  Ref state;
  bool called;
};

// The records BUILD makes of the three classes a `.metadata` holds by the million. Their fields are
// checked as extract() checks them; the values they name outlived their region (see Region).
// A record keeps every field its object had (an object with any other field stays an object), so
// that one named elsewhere than extract() reads it (a Megatron cached plan in planner_data) still
// reads as the VM's JSON of the object.
struct ChunkRecord {  // ChunkStorageMetadata(offsets, sizes): two tuples of non-negative ints
  Ref offsets, sizes;
  uint32_t name;  // the class, an index into globals_
};
struct IndexRecord {  // MetadataIndex(fqn[, offset][, index]): a string, a tuple or None, an int or None
  Ref fqn, offsets, index;  // offsets: kNoneRef for a bytes item
  uint32_t name;
  bool has_offset, has_index;
};
struct StorageRecord {  // _StorageInfo(relative_path, offset, length[, transform_descriptors])
  Ref path;
  uint32_t transforms;  // 0: None; else 1 + an index into transforms_
  uint64_t offset, length;
  uint32_t name;
  bool has_transforms;
};
// What make_record found, before the region is let go.
struct RecordFields {
  Kind kind = Kind::kNone;
  Ref refs[3] = {kNoneRef, kNoneRef, kNoneRef};  // the values it names, kept past the region
  ChunkRecord chunk{};
  IndexRecord index{};
  StorageRecord storage{};
};

// What the machine made after NEWOBJ of one of those three classes, until its BUILD. Once BUILD has
// given the object its state, the object becomes a record, and everything made in between (its state
// dict, the torch.Size calls, their argument tuples: ~10 values a chunk) is let go, so the machine
// holds a few values a chunk instead of every value the pickle made. What outlives the region: the
// values the record names, and the values the memo names that a later BINGET can use (strings,
// numbers, globals, tuples of them: the shared torch.Size of a chunk's offsets, a key string). Any
// other value the memo names (a dict, a list, an object) is dead: a BINGET of it sends the pickle to
// the VM. The region is let go only if nothing older came to hold a value made in it: no append to
// an older list or dict, no BUILD of an older object, and the stack never went below the object.
struct Region {
  bool open = false;
  Ref object = 0;
  Kind record = Kind::kNone;  // what the object becomes: kChunk, kIndex or kStorage
  size_t cells = 0, pool = 0, containers = 0, objects = 0, strings = 0, stack = 0;
};

// What a global does in this reader. Every other interpreted global sends the pickle to the VM.
enum class Special : uint8_t { kInert, kSize, kDict, kGetattr };

// RFC 3629 UTF-8, as nlohmann::json checks it: a string that is not would be cleaned by the VM's
// reading (U+FFFD), so this reader leaves such a pickle to it.
bool valid_utf8(const char* text, size_t n) {
  const auto* s = reinterpret_cast<const uint8_t*>(text);
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

std::string_view class_tail(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

// The record a class's objects become (kNone: none), by the class's last name, whichever of DCP's
// modules (torch 1.13's, 2.x's) names it.
Kind record_kind(std::string_view class_name) {
  const std::string_view tail = class_tail(class_name);
  if (tail == "ChunkStorageMetadata") return Kind::kChunk;
  if (tail == "MetadataIndex") return Kind::kIndex;
  if (tail == "_StorageInfo") return Kind::kStorage;
  return Kind::kNone;
}

class TypedReader {
 public:
  // Over bytes in memory: the window is all of them.
  TypedReader(const uint8_t* data, size_t size, const std::string& where) : TypedReader(size, where) {
    base_ = data;
    window_end_ = size;
  }
  // Over a file, read window_bytes at a time: strings are copied out as they are read, so the
  // pickle's bytes are never all held (at 1M chunks they are 143 MB, a third of the memory bound).
  TypedReader(const ByteSource& source, const std::string& where, size_t window_bytes)
      : TypedReader(source.size(), where) {
    source_ = &source;
    window_bytes_ = window_bytes;
  }

  std::optional<Result<DcpMetadata>> read() {
    Ref root = 0;
    if (!run(&root)) return std::nullopt;
    // The memo and the stacks serve only the machine: let go before the records are made (the memo
    // alone is ~13 M entries, 52 MB, at 1M chunks, and goes back to the system: see Array).
    Array<Ref>().swap(memo_);
    std::vector<Ref>().swap(stack_);
    std::vector<size_t>().swap(marks_);
    Array<uint8_t>().swap(window_);
    return extract(root);
  }

 private:
  TypedReader(size_t size, const std::string& where)
      : n_(size), where_(where), budget_(std::max(pickle_output_limit(size), 2 * size + (size_t{16} << 20))) {
    // Bounds from the pickle's size: a cell or pool entry costs the writer at least one opcode byte,
    // and torch's `.metadata` spends ~11 bytes a cell and ~6 a pool entry. A pickle denser than
    // these is no `.metadata` torch wrote; the VM, with its own limits, reads it.
    max_cells_ = size / 4 + 4096;
    max_pool_ = size / 2 + 4096;
    max_state_bytes_ = size / 2 * 7 + (size_t{64} << 20);
    // Reserved up front: the arrays are mapped on their own, so what is reserved costs nothing until
    // it is used, and none of them is copied as it grows (fresh pages are a fifth of the parse's
    // time on a VM). torch's `.metadata` at 1M chunks: 13.9M memo entries, 3.9M cells and 4.9M pool
    // entries after the regions are let go, 1M records of each kind, in 143 MB.
    memo_.reserve(size / 10 + 16);
    cells_.reserve(size / 16 + 16);
    pool_.reserve(size / 16 + 16);
    chunks_.reserve(size / 64 + 16);
    indexes_.reserve(size / 64 + 16);
    storages_.reserve(size / 64 + 16);
    cells_.push_back({static_cast<uint64_t>(Kind::kNone)});
    cells_.push_back({static_cast<uint64_t>(Kind::kBool)});
    cells_.push_back({static_cast<uint64_t>(Kind::kBool) | (1u << 4)});
    cells_.push_back({static_cast<uint64_t>(Kind::kTuple)});
    cells_.push_back({static_cast<uint64_t>(Kind::kDead)});
  }

  // ---- the machine: every failure is "not torch's shape" (false), judged again by the VM ----
  bool run(Ref* root);
  bool step(uint8_t op);

  // The k bytes at pos_, in the window (read more of the file if they are not), or false at the end.
  bool need(size_t k) {
    if (k > n_ - pos_) return false;
    return pos_ + k <= window_end_ || refill(k);
  }
  bool refill(size_t k);
  const uint8_t* at(size_t pos) const { return base_ + (pos - window_start_); }
  // What the machine holds. torch's `.metadata` needs ~1.2x its size (1M chunks: 175 MB for 143 MB,
  // a third of it the memo);
  // a pickle that needs more (a million empty dicts, one byte each) is the VM's to read.
  size_t state_bytes() const {
    return cells_.size() * sizeof(Cell) + pool_.size() * sizeof(Ref) + memo_.size() * sizeof(Ref) +
           containers_.size() * sizeof(Container) + objects_.size() * sizeof(Object) +
           floats_.size() * sizeof(double) + stack_.size() * sizeof(Ref) + marks_.size() * sizeof(size_t) +
           strings_.size() + chunks_.size() * sizeof(ChunkRecord) + indexes_.size() * sizeof(IndexRecord) +
           storages_.size() * sizeof(StorageRecord) + region_memo_keys_.size() * sizeof(uint32_t);
  }
  uint64_t take_le(size_t k) {
    const uint64_t v = decode_le(at(pos_), k);
    pos_ += k;
    return v;
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  bool push(Ref r) {
    if (stack_.size() >= kPickleMaxStack) return false;
    stack_.push_back(r);
    return true;
  }
  bool pop(Ref* r) {
    if (stack_.size() <= floor()) return false;
    *r = stack_.back();
    shrink_stack(stack_.size() - 1);
    return true;
  }
  // Every way the stack gets shorter: below an open region's object, the region is given up.
  void shrink_stack(size_t size) {
    stack_.resize(size);
    if (region_.open && size <= region_.stack) region_.open = false;
  }
  bool top(Ref* r) const {
    if (stack_.size() <= floor()) return false;
    *r = stack_.back();
    return true;
  }
  bool make(Kind kind, uint64_t payload, Ref* r) {
    if (cells_.size() >= max_cells_) return false;
    cells_.push_back({static_cast<uint64_t>(kind) | (payload << 4)});
    *r = static_cast<Ref>(cells_.size() - 1);
    return true;
  }
  bool push_new(Kind kind, uint64_t payload) {
    Ref r;
    return make(kind, payload, &r) && push(r);
  }
  bool push_int(int64_t v) {
    if (v >= 0 && v < int64_t{kSmallInt}) return push(kSmallInt | static_cast<Ref>(v));
    if (v > kMaxCellInt || v < -kMaxCellInt) return false;
    return push_new(Kind::kInt, static_cast<uint64_t>(v) & ((uint64_t{1} << 60) - 1));
  }
  bool push_string(uint64_t len) {
    if (len > kMaxCount || !need(len)) return false;
    const char* text = reinterpret_cast<const char*>(at(pos_));
    if (!valid_utf8(text, len)) return false;
    const uint64_t start = strings_.size();
    strings_.append(text, len);
    pos_ += len;
    return push_new(Kind::kString, start | (len << 32));
  }
  // The items above the last MARK, and the mark, removed; [*first, stack end) before the resize.
  bool pop_mark(size_t* first) {
    if (marks_.empty()) return false;
    *first = marks_.back();
    marks_.pop_back();
    return true;
  }
  bool make_tuple(const Ref* items, size_t k, Ref* r) {
    if (pool_.size() + k > max_pool_ || k > kMaxCount) return false;
    const uint64_t start = pool_.size();
    pool_.insert(pool_.end(), items, items + k);
    return make(Kind::kTuple, start | (uint64_t{k} << 32), r);
  }
  bool append(uint32_t container, const Ref* items, size_t k);
  // An empty dict or list (EMPTY_DICT, EMPTY_LIST, OrderedDict(), defaultdict(f)).
  bool push_container(Kind kind) {
    containers_.push_back({static_cast<uint32_t>(pool_.size()), 0, 0});
    return push_new(kind, containers_.size() - 1);
  }
  // What NEWOBJ or REDUCE made of global `name`, with no state yet.
  bool push_object(uint32_t name, Ref args, bool called) {
    objects_.push_back({name, args, kNoneRef, called});
    return push_new(Kind::kObject, objects_.size() - 1);
  }
  bool memo_put(uint64_t key) {
    Ref r;
    if (!top(&r)) return false;
    if (key == memo_.size()) {
      memo_.push_back(r);
    } else if (key < memo_.size()) {
      memo_[key] = r;
    } else {
      return false;
    }
    // The key is below the memo's size, which the state bound keeps far below 2^32.
    if (region_.open && in_region(r)) region_memo_keys_.push_back(static_cast<uint32_t>(key));
    return true;
  }
  bool global(const std::string& module, const std::string& name);
  void note_use(Ref r, uint32_t use) {
    if (kind(r) != Kind::kGlobal) return;
    PickleGlobal& g = globals_[cells_[r].low()];
    g.uses |= use;
    if (use == kPickleUseOtherCall) ++g.other_calls;
  }
  bool reduce(Ref fn, Ref args);
  bool new_object(Ref cls, Ref args);
  bool build(Ref obj, Ref state);

  // ---- regions (see Region) ----
  bool in_region(Ref r) const { return !(r & kSmallInt) && r >= region_.cells; }
  bool close_region();
  bool make_record(const Object& o, RecordFields* f);
  size_t field_slot(Ref key, const char* const* fields, Ref* refs);
  // The field names of the three record classes as make_record last matched them (kDeadRef: not yet).
  Ref field_refs_[3][4] = {{kDeadRef, kDeadRef, kDeadRef, kDeadRef},
                           {kDeadRef, kDeadRef, kDeadRef, kDeadRef},
                           {kDeadRef, kDeadRef, kDeadRef, kDeadRef}};
  bool let_region_go(Ref* refs, size_t count);

  // ---- reading values ----
  Kind kind(Ref r) const { return r & kSmallInt ? Kind::kInt : cells_[r].kind(); }
  int64_t int_of(Ref r) const {
    if (r & kSmallInt) return r & ~kSmallInt;
    return static_cast<int64_t>(cells_[r].bits) >> 4;
  }
  std::string_view str_of(Ref r) const {
    const Cell& c = cells_[r];
    return {strings_.data() + c.low(), c.high()};
  }
  // A tuple's or a container's items.
  std::pair<const Ref*, size_t> items_of(Ref r) const {
    const Cell& c = cells_[r];
    if (c.kind() == Kind::kTuple) return {pool_.data() + c.low(), c.high()};
    const Container& k = containers_[c.low()];
    return {pool_.data() + k.start, k.count};
  }
  const Object* object_of(Ref r) const {
    return kind(r) == Kind::kObject ? &objects_[cells_[r].low()] : nullptr;
  }
  const std::string& name_of(const Object& o) const { return globals_[o.name].name; }
  // The class NEWOBJ made `o` of ("" for a REDUCE result), as the VM's "__class__" names it.
  std::string_view class_of(const Object& o) const { return o.called ? std::string_view() : name_of(o); }
  // The value BUILD gave `o` under `key` (its state is a dict with string keys), or false.
  bool field(const Object& o, std::string_view key, Ref* out) const;
  bool has_plain_state(const Object& o) const;
  std::optional<Dims> dims(Ref r) const;
  bool are_dims(Ref r) const;  // what dims() accepts, without making the vector
  bool spend(size_t bytes) {
    if (bytes > budget_ - spent_) return false;
    spent_ += bytes;
    return true;
  }
  std::optional<nlohmann::json> to_json(Ref r, size_t depth);
  // A record as the VM's JSON of its object: {"__class__": name, field: value...}.
  std::optional<nlohmann::json> record_json(Ref r, size_t depth) {
    nlohmann::json o = nlohmann::json::object();
    std::pair<const char*, Ref> fields[4];
    size_t n = 0;
    const uint32_t at = cells_[r].low();
    if (kind(r) == Kind::kChunk) {
      const ChunkRecord& c = chunks_[at];
      o["__class__"] = globals_[c.name].name;
      fields[n++] = {"offsets", c.offsets};
      fields[n++] = {"sizes", c.sizes};
    } else if (kind(r) == Kind::kIndex) {
      const IndexRecord& c = indexes_[at];
      o["__class__"] = globals_[c.name].name;
      fields[n++] = {"fqn", c.fqn};
      if (c.has_offset) fields[n++] = {"offset", c.offsets};
      if (c.has_index) fields[n++] = {"index", c.index};
    } else {
      const StorageRecord& c = storages_[at];
      o["__class__"] = globals_[c.name].name;
      fields[n++] = {"relative_path", c.path};
      o["offset"] = static_cast<int64_t>(c.offset);
      o["length"] = static_cast<int64_t>(c.length);
      if (c.has_transforms) {
        if (!c.transforms) {
          o["transform_descriptors"] = nullptr;
        } else {
          nlohmann::json names = nlohmann::json::array();
          for (const std::string& t : transforms_[c.transforms - 1]) names.push_back(t);
          o["transform_descriptors"] = std::move(names);
        }
      }
    }
    for (size_t k = 0; k < n; ++k) {
      auto v = to_json(fields[k].second, depth + 1);
      if (!v) return std::nullopt;
      o[fields[k].first] = std::move(*v);
    }
    return o;
  }
  std::optional<nlohmann::json> field_json(const Object& o, const char* key) {
    Ref v;
    if (!field(o, key, &v)) return nlohmann::json();
    return to_json(v, 1);
  }

  // ---- the records ----
  std::optional<Result<DcpMetadata>> extract(Ref root);
  std::optional<Result<DcpTensor>> tensor(const std::string& fqn, const Object& t, std::string& layout);
  std::optional<DcpItem> item(Ref key, Ref value);
  std::optional<Status> read_items(const Object& m, std::vector<DcpItem>* items);
  size_t entry_count(Ref dict) const { return items_of(dict).second / 2; }
  // The string `r` as the items share it: one copy for every item naming the same string value
  // (regions already made equal strings one value).
  SharedText shared(Ref r) {
    auto [it, added] = shared_.emplace(r, SharedText());
    if (added) it->second = SharedText(std::string(str_of(r)));
    return it->second;
  }
  std::unordered_map<Ref, SharedText> shared_;
  // The same for extents (nullopt: `r` is not what dims() reads): regions made equal tuples one
  // value, so a million chunks of one shape hold a few distinct offsets and sizes. Bounded as the
  // regions' sharing is; past it, each record holds its own.
  std::optional<SharedDims> shared_dims(Ref r) {
    if (const auto it = shared_dims_.find(r); it != shared_dims_.end()) return it->second;
    const std::optional<Dims> d = dims(r);
    if (!d) return std::nullopt;
    SharedDims out(*d);
    if (shared_dims_.size() < kMaxInterned) shared_dims_.emplace(r, out);
    return out;
  }
  std::unordered_map<Ref, SharedDims> shared_dims_;

  const ByteSource* source_ = nullptr;  // null: the bytes are in memory, all in the window
  const uint8_t* base_ = nullptr;       // the window: bytes [window_start_, window_end_) of the pickle
  size_t window_start_ = 0, window_end_ = 0;
  Array<uint8_t> window_;
  size_t window_bytes_ = 0;
  size_t n_;
  const std::string& where_;
  size_t pos_ = 0, op_pos_ = 0;
  size_t frame_end_ = 0;  // just past the current FRAME (0: none)
  size_t max_cells_ = 0, max_pool_ = 0, max_state_bytes_ = 0;
  const size_t budget_;
  size_t spent_ = 0;
  Array<Cell> cells_;
  Array<Ref> pool_;
  Array<Container> containers_;
  Array<Object> objects_;
  std::vector<double> floats_;
  // Every global named, in order of first use, listed as the VM lists them; a kGlobal cell's payload
  // is its index here and in specials_.
  std::vector<PickleGlobal> globals_;
  std::vector<Special> specials_;
  std::unordered_map<std::string, uint32_t> global_index_;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  Array<Ref> memo_;
  std::string strings_;
  Array<ChunkRecord> chunks_;
  Array<IndexRecord> indexes_;
  Array<StorageRecord> storages_;
  std::vector<std::vector<std::string>> transforms_;
  Region region_;
  std::vector<uint32_t> region_memo_keys_;  // the memo keys given a value while the region is open
  // let_region_go's scratch, kept to reuse its memory: the values kept, what they were, their remade refs
  std::vector<Ref> keep_, kept_items_, kept_refs_;
  std::vector<Cell> kept_cells_;
  std::vector<std::pair<uint32_t, uint32_t>> kept_spans_;  // a string's bytes or a tuple's items
  std::string kept_text_;
  // The strings and tuples that outlived a region, by content: values that cannot change, so one
  // made again can be one already made (a `.metadata` names a few thousand distinct ones a million
  // times: the sizes of a chunk, the offsets of a rank's shard, a file's name).
  using Interned = std::unordered_map<std::string_view, Ref>;
  Ref interned(const Interned& map, std::string_view key) const {
    const auto it = map.find(key);
    return it == map.end() ? kDeadRef : it->second;
  }
  void intern(Interned& map, std::string_view key, Ref r) {
    if (map.size() >= kMaxInterned || key.size() > 256) return;  // a pickle of distinct values: no sharing
    interned_keys_.emplace_back(key);
    map.emplace(interned_keys_.back(), r);
  }
  static constexpr size_t kMaxInterned = 1 << 16;
  Interned interned_strings_, interned_tuples_;
  std::deque<std::string> interned_keys_;  // what the maps' keys view: a deque never moves them
};

bool TypedReader::refill(size_t k) {
  if (!source_) return false;  // in memory: the window is every byte
  const size_t kept = window_end_ - pos_;
  const size_t want = std::min<size_t>(n_ - pos_, std::max(k, window_bytes_));
  if (window_.size() < want) {
    Array<uint8_t> bigger(want);
    if (kept) std::memcpy(bigger.data(), at(pos_), kept);
    window_.swap(bigger);
  } else if (kept) {
    std::memmove(window_.data(), at(pos_), kept);
  }
  // A read that fails (a file cut short since it was opened) sends the pickle to the VM's reading,
  // whose own read of the file reports it.
  if (!source_->read_at(window_end_, window_.data() + kept, want - kept).is_ok()) return false;
  base_ = window_.data();
  window_start_ = pos_;
  window_end_ = pos_ + want;
  return true;
}

bool TypedReader::run(Ref* root) {
  for (size_t ops = 0; pos_ < n_; ++ops) {
    op_pos_ = pos_;
    if (!need(1)) return false;
    const uint8_t op = *at(pos_++);
    if (op == '.') return frame_end_ <= pos_ && pop(root);  // STOP, not inside a frame
    if (!step(op)) return false;
    // An opcode that crosses its frame's end: the VM refuses it as ambiguous (Machine::run), so the
    // typed reading hands it there rather than reading on.
    if (frame_end_ > op_pos_ && pos_ > frame_end_) return false;
    if (ops % 4096 == 0 && state_bytes() > max_state_bytes_) return false;
  }
  return false;
}

bool TypedReader::step(uint8_t op) {
  Ref a = 0, b = 0;
  size_t first = 0;
  switch (op) {
    case 0x80:  // PROTO
      if (!need(1) || *at(pos_) > 5) return false;
      ++pos_;
      return true;
    case 0x95: {  // FRAME: a frame inside another, or one the STOP ends early, goes to the VM (Machine::run)
      if (frame_end_ > op_pos_ || !need(8)) return false;
      const uint64_t length = take_le(8);
      if (length > n_ - pos_) return false;
      frame_end_ = pos_ + length;
      return true;
    }
    case '(':  // MARK
      if (marks_.size() >= kPickleMaxStack) return false;
      marks_.push_back(stack_.size());
      return true;
    case '0': return pop(&a);  // POP
    case '1':                  // POP_MARK
      if (!pop_mark(&first)) return false;
      shrink_stack(first);
      return true;
    case '2': return top(&a) && push(a);  // DUP
    case 0x94: return memo_put(memo_.size());
    case 'q':
    case 'r':
      if (!need(op == 'q' ? 1 : 4)) return false;
      return memo_put(take_le(op == 'q' ? 1 : 4));
    case 'h':
    case 'j': {
      if (!need(op == 'h' ? 1 : 4)) return false;
      const uint64_t key = take_le(op == 'h' ? 1 : 4);
      return key < memo_.size() && memo_[key] != kDeadRef && push(memo_[key]);
    }
    case 'J':  // BININT is signed; BININT1 and BININT2 are not
      if (!need(4)) return false;
      return push_int(static_cast<int32_t>(static_cast<uint32_t>(take_le(4))));
    case 'K':
    case 'M':
      if (!need(op == 'K' ? 1 : 2)) return false;
      return push_int(static_cast<int64_t>(take_le(op == 'K' ? 1 : 2)));
    case 0x8a: {  // LONG1: little-endian two's complement
      if (!need(1)) return false;
      const uint64_t k = take_le(1);
      if (k > 8 || !need(k)) return false;
      uint64_t raw = take_le(k);
      if (k > 0 && k < 8 && (raw >> (8 * k - 1)) & 1) raw |= ~uint64_t{0} << (8 * k);
      return push_int(static_cast<int64_t>(raw));
    }
    case 'G': {  // BINFLOAT, big-endian
      if (!need(8)) return false;
      const uint64_t bits = decode_be(at(pos_), 8);
      pos_ += 8;
      double f;
      std::memcpy(&f, &bits, 8);
      floats_.push_back(f);
      return push_new(Kind::kFloat, floats_.size() - 1);
    }
    case 0x88: return push(kTrueRef);
    case 0x89: return push(kFalseRef);
    case 'N': return push(kNoneRef);
    case 0x8c:  // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8
    case 'X':
    case 0x8d: {
      const size_t k = op == 0x8c ? 1 : op == 'X' ? 4 : 8;
      if (!need(k)) return false;
      return push_string(take_le(k));
    }
    case '}':
    case ']': return push_container(op == '}' ? Kind::kDict : Kind::kList);
    case ')': return push(kEmptyTupleRef);
    case 't':
      if (!pop_mark(&first) || !make_tuple(stack_.data() + first, stack_.size() - first, &a)) return false;
      shrink_stack(first);
      return push(a);
    case 0x85:
    case 0x86:
    case 0x87: {
      const size_t k = op - 0x84;
      if (stack_.size() < floor() + k || !make_tuple(stack_.data() + stack_.size() - k, k, &a)) return false;
      shrink_stack(stack_.size() - k);
      return push(a);
    }
    case 's':
    case 'u':
    case 'a':
    case 'e': {  // SETITEM(S), APPEND(S)
      const bool dict = op == 's' || op == 'u';
      if (op == 's' || op == 'a') {
        const size_t k = dict ? 2 : 1;
        if (stack_.size() < floor() + k) return false;
        first = stack_.size() - k;
      } else if (!pop_mark(&first)) {
        return false;
      }
      if (first == 0 || first - 1 < floor()) return false;  // the dict or list sits below the items
      const Ref target = stack_[first - 1];
      if (kind(target) != (dict ? Kind::kDict : Kind::kList) || (dict && (stack_.size() - first) % 2))
        return false;
      if (!append(cells_[target].low(), stack_.data() + first, stack_.size() - first)) return false;
      shrink_stack(first);
      return true;
    }
    case 'c': {  // GLOBAL "module\nname\n"
      std::string parts[2];
      for (std::string& part : parts) {
        const size_t scan = std::min<size_t>(n_ - pos_, 257);
        if (!need(scan)) return false;
        const void* nl = std::memchr(at(pos_), '\n', scan);
        if (!nl) return false;
        const size_t len = static_cast<const uint8_t*>(nl) - at(pos_);
        if (len > 256) return false;
        part.assign(reinterpret_cast<const char*>(at(pos_)), len);
        pos_ += len + 1;
      }
      return valid_utf8(parts[0].data(), parts[0].size()) && valid_utf8(parts[1].data(), parts[1].size()) &&
             global(parts[0], parts[1]);
    }
    case 0x93:  // STACK_GLOBAL
      if (!pop(&b) || !pop(&a) || kind(a) != Kind::kString || kind(b) != Kind::kString) return false;
      return global(std::string(str_of(a)), std::string(str_of(b)));
    case 'R':
    case 0x81:
      if (!pop(&b) || !pop(&a)) return false;
      return op == 'R' ? reduce(a, b) : new_object(a, b);
    case 'b':
      if (!pop(&b) || !top(&a)) return false;
      return build(a, b);
    default: return false;
  }
}

bool TypedReader::append(uint32_t index, const Ref* items, size_t k) {
  if (region_.open && index < region_.containers) region_.open = false;  // an older container grows
  Container c = containers_[index];
  if (c.count + k > kMaxCount) return false;
  if (c.count + k > c.capacity) {
    if (c.start + c.capacity == pool_.size()) {  // at the pool's end: grow in place
      if (pool_.size() + (c.count + k - c.capacity) > max_pool_) return false;
      pool_.resize(c.start + c.count + k);
      c.capacity = c.count + k;
    } else {  // elsewhere: move to the end, exactly sized the first time, doubled after
      const size_t capacity = c.count == 0 ? k : 2 * (c.count + k);
      if (pool_.size() + capacity > max_pool_) return false;
      const size_t start = pool_.size();
      pool_.resize(start + capacity);
      std::copy(pool_.begin() + c.start, pool_.begin() + c.start + c.count, pool_.begin() + start);
      c.start = static_cast<uint32_t>(start);
      c.capacity = static_cast<uint32_t>(capacity);
    }
  }
  // `items` may point into stack_, never into pool_.
  std::copy(items, items + k, pool_.begin() + c.start + c.count);
  c.count += static_cast<uint32_t>(k);
  containers_[index] = c;
  return true;
}

bool TypedReader::global(const std::string& module, const std::string& name) {
  const std::string full = module + "." + name;
  auto [it, added] = global_index_.emplace(full, static_cast<uint32_t>(globals_.size()));
  if (added) {
    Special special = Special::kInert;
    if (full == "torch.Size") {
      special = Special::kSize;
    } else if (full == "collections.OrderedDict" || full == "collections.defaultdict") {
      special = Special::kDict;
    } else if (full == "builtins.getattr" || full == "__builtin__.getattr") {
      special = Special::kGetattr;
    } else if (pickle_global_is_interpreted(module, name)) {
      return false;  // a tensor, storage, numpy array, set...: none belongs in a `.metadata`
    }
    PickleGlobal listed;
    listed.name = full;  // valid UTF-8 (checked when read), so the VM's cleaning leaves it as is
    listed.risk = classify_pickle_global(module, name);
    listed.first_offset = op_pos_;
    globals_.push_back(std::move(listed));
    specials_.push_back(special);
  }
  ++globals_[it->second].count;
  return push_new(Kind::kGlobal, it->second);
}

// As the VM records it (formats/pickle_reader.cpp, Machine::reduce): getattr(<global>, <str>) is an
// attribute read, any other call is classified by its arguments' shapes.
bool TypedReader::reduce(Ref fn, Ref args) {
  if (kind(fn) != Kind::kGlobal || kind(args) != Kind::kTuple) return false;
  const uint32_t g = cells_[fn].low();
  const Special special = specials_[g];
  const auto [a, count] = items_of(args);
  if (special == Special::kGetattr) {
    PickleGlobal& listed = globals_[g];
    if (count == 2 && kind(a[0]) == Kind::kGlobal && kind(a[1]) == Kind::kString &&
        listed.attribute_lookups.size() < 1024) {
      listed.attribute_lookups.push_back(globals_[cells_[a[0]].low()].name + "." + std::string(str_of(a[1])));
      listed.uses |= kPickleUseAttributeRead;
      note_use(a[0], kPickleUseAttributeRead);
    } else {
      listed.uses |= kPickleUseOtherCall;
      ++listed.other_calls;
    }
  } else {
    std::vector<PickleArgShape> shapes;
    for (size_t k = 0; k < count; ++k) {
      const Kind ak = kind(a[k]);
      // A global or a made object passed as an argument may be called by the callee: the VM's
      // reading judges that (Machine::note_passed); DCP's own pickles never pass one.
      if (ak == Kind::kGlobal || ak == Kind::kObject) return false;
      shapes.push_back(ak == Kind::kString ? PickleArgShape::kString
                       : ak == Kind::kNone || ak == Kind::kBool || ak == Kind::kInt || ak == Kind::kFloat
                           ? PickleArgShape::kScalar
                           : PickleArgShape::kOther);
    }
    note_use(fn, pickle_call_use(shapes));
  }
  if (special == Special::kSize && count == 1 && (kind(a[0]) == Kind::kTuple || kind(a[0]) == Kind::kList)) {
    // torch.Size(tuple) is that tuple (the VM's reading gives both the same JSON array).
    if (kind(a[0]) == Kind::kTuple) return push(a[0]);
    const auto [items, k] = items_of(a[0]);
    const std::vector<Ref> copy(items, items + k);
    Ref r;
    return make_tuple(copy.data(), copy.size(), &r) && push(r);
  }
  if (special == Special::kDict) {
    if (globals_[g].name == "collections.OrderedDict" && count != 0) return false;
    return push_container(Kind::kDict);
  }
  return push_object(g, args, true);
}

bool TypedReader::new_object(Ref cls, Ref args) {
  if (kind(cls) != Kind::kGlobal || kind(args) != Kind::kTuple) return false;
  const bool no_args = items_of(args).second == 0;
  const auto [a, count] = items_of(args);
  for (size_t k = 0; k < count; ++k) {  // as in reduce(): the VM judges what is passed a global
    if (kind(a[k]) == Kind::kGlobal || kind(a[k]) == Kind::kObject) return false;
  }
  note_use(cls, no_args ? kPickleUseConstructed : kPickleUseOtherCall);
  if (specials_[cells_[cls].low()] == Special::kDict) return push_container(Kind::kDict);
  if (!push_object(cells_[cls].low(), args, false)) return false;
  if (!region_.open && no_args) {
    const Kind record = record_kind(globals_[cells_[cls].low()].name);
    if (record != Kind::kNone) {
      region_ = {true,
                 static_cast<Ref>(cells_.size() - 1),
                 record,
                 cells_.size(),
                 pool_.size(),
                 containers_.size(),
                 objects_.size(),
                 strings_.size(),
                 stack_.size() - 1};
      region_memo_keys_.clear();
    }
  }
  return true;
}

bool TypedReader::build(Ref obj, Ref state) {
  const Kind k = kind(obj);
  if (k == Kind::kDict || k == Kind::kList) return true;  // an OrderedDict's attributes: no data
  if (k != Kind::kObject) return false;
  Object& o = objects_[cells_[obj].low()];
  if (o.state != kNoneRef) return false;  // a second BUILD: the VM merges the states
  o.state = state;
  if (region_.open) {
    if (obj == region_.object) return close_region();
    if (obj < region_.cells) region_.open = false;  // an older object holds a value of the region now
  }
  return true;
}

bool TypedReader::close_region() {
  region_.open = false;
  const Ref obj = region_.object;
  const Object& o = objects_[cells_[obj].low()];
  // The state must be the region's own (an older dict could change after this BUILD), and the
  // object alone on the stack above what was there before it.
  if (stack_.size() != region_.stack + 1 || stack_.back() != obj || !in_region(o.state)) return true;
  // Fields extract() would refuse, or others besides, leave the object as it is.
  RecordFields f;
  f.kind = region_.record;
  if (!make_record(o, &f)) return true;
  if (!let_region_go(f.refs, 3)) return false;
  uint64_t index = 0;
  if (f.kind == Kind::kChunk) {
    index = chunks_.size();
    chunks_.push_back({f.refs[0], f.refs[1], f.chunk.name});
  } else if (f.kind == Kind::kIndex) {
    index = indexes_.size();
    f.index.fqn = f.refs[0];
    f.index.offsets = f.refs[1];
    f.index.index = f.refs[2];
    indexes_.push_back(f.index);
  } else {
    index = storages_.size();
    f.storage.path = f.refs[0];
    storages_.push_back(f.storage);
  }
  cells_[obj] = {static_cast<uint64_t>(f.kind) | (index << 4)};
  return true;
}

// Which of `fields` the string `key` names (SIZE_MAX: none). In a pickle torch wrote a field name
// is one memoized string, used by reference in every object; once it is older than the region (so
// never let go), it is remembered in `refs` and matched by reference, not by its text.
size_t TypedReader::field_slot(Ref key, const char* const* fields, Ref* refs) {
  for (size_t i = 0; fields[i]; ++i)
    if (refs[i] == key) return i;
  const std::string_view text = str_of(key);
  for (size_t i = 0; fields[i]; ++i) {
    if (text == fields[i]) {
      if (!in_region(key)) refs[i] = key;
      return i;
    }
  }
  return SIZE_MAX;
}

// The record of kind f->kind that `o` makes: its fields checked as extract() checks them, and no
// field besides. One pass over the state; a repeated key keeps its last value, as field() and a
// dict do.
bool TypedReader::make_record(const Object& o, RecordFields* f) {
  static const char* const kChunkFields[] = {"offsets", "sizes", nullptr};
  static const char* const kIndexFields[] = {"fqn", "offset", "index", nullptr};
  static const char* const kStorageFields[] = {"relative_path", "offset", "length", "transform_descriptors",
                                               nullptr};
  const char* const* fields = f->kind == Kind::kChunk   ? kChunkFields
                              : f->kind == Kind::kIndex ? kIndexFields
                                                        : kStorageFields;
  Ref* known = field_refs_[f->kind == Kind::kChunk ? 0 : f->kind == Kind::kIndex ? 1 : 2];
  if (kind(o.state) != Kind::kDict) return false;
  Ref value[4] = {kNoneRef, kNoneRef, kNoneRef, kNoneRef};
  bool has[4] = {false, false, false, false};
  const auto [kv, pairs] = items_of(o.state);
  for (size_t k = 0; k < pairs; k += 2) {
    if (kind(kv[k]) != Kind::kString) return false;
    const size_t i = field_slot(kv[k], fields, known);
    if (i == SIZE_MAX) return false;
    value[i] = kv[k + 1];
    has[i] = true;
  }
  auto flat_dims = [&](Ref r) { return kind(r) == Kind::kTuple && are_dims(r); };
  if (f->kind == Kind::kChunk) {
    f->chunk.name = o.name;
    f->refs[0] = value[0];
    f->refs[1] = value[1];
    return has[0] && has[1] && flat_dims(value[0]) && flat_dims(value[1]);
  }
  if (f->kind == Kind::kIndex) {
    f->index.name = o.name;
    f->index.has_offset = has[1];
    f->index.has_index = has[2];
    for (size_t i = 0; i < 3; ++i) f->refs[i] = value[i];
    return has[0] && kind(value[0]) == Kind::kString && (value[1] == kNoneRef || flat_dims(value[1])) &&
           (value[2] == kNoneRef || kind(value[2]) == Kind::kInt);
  }
  const Ref offset = value[1], length = value[2], transforms = value[3];
  f->storage.name = o.name;
  f->refs[0] = value[0];
  if (!has[0] || kind(value[0]) != Kind::kString || !has[1] || kind(offset) != Kind::kInt ||
      int_of(offset) < 0 || !has[2] || kind(length) != Kind::kInt || int_of(length) < 0)
    return false;
  f->storage.offset = static_cast<uint64_t>(int_of(offset));
  f->storage.length = static_cast<uint64_t>(int_of(length));
  f->storage.has_transforms = has[3];
  if (transforms == kNoneRef) return true;
  if (kind(transforms) != Kind::kList && kind(transforms) != Kind::kTuple) return false;
  const auto [items, n] = items_of(transforms);
  std::vector<std::string> names;
  for (size_t d = 0; d < n; ++d) {
    if (kind(items[d]) != Kind::kString) return false;
    names.emplace_back(str_of(items[d]));
  }
  transforms_.push_back(std::move(names));
  f->storage.transforms = static_cast<uint32_t>(transforms_.size());
  return true;
}

// Lets go of everything the region made but the values refs[0..count) and the memo name (see
// Region), which are made again after the object, and rewrites the memo and refs to them.
bool TypedReader::let_region_go(Ref* refs, size_t count) {
  std::vector<Ref>& keep = keep_;
  keep.clear();
  auto consider = [&](Ref r) {
    if (in_region(r)) keep.push_back(r);
  };
  std::sort(region_memo_keys_.begin(), region_memo_keys_.end());
  region_memo_keys_.erase(std::unique(region_memo_keys_.begin(), region_memo_keys_.end()),
                          region_memo_keys_.end());
  for (uint32_t key : region_memo_keys_) consider(memo_[key]);
  for (size_t k = 0; k < count; ++k) consider(refs[k]);
  const size_t roots = keep.size();
  for (size_t k = 0; k < roots; ++k) {
    if (kind(keep[k]) != Kind::kTuple) continue;
    const auto [items, n] = items_of(keep[k]);
    for (size_t i = 0; i < n; ++i) consider(items[i]);
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());

  // What each kept value is, copied out before the region's storage is cut back: a scalar's cell
  // (and a string's bytes), a tuple's items. A tuple of anything but scalars, and every dict, list
  // and object, is dead (kDeadRef).
  auto scalar = [&](Kind k) {
    return k == Kind::kString || k == Kind::kInt || k == Kind::kFloat || k == Kind::kGlobal;
  };
  const Cell dead{static_cast<uint64_t>(Kind::kDead)};
  kept_cells_.assign(keep.size(), dead);
  kept_items_.clear();
  kept_text_.clear();
  kept_spans_.assign(keep.size(), {0, 0});
  for (size_t k = 0; k < keep.size(); ++k) {
    const Cell c = cells_[keep[k]];
    if (c.kind() == Kind::kString) {
      kept_spans_[k] = {static_cast<uint32_t>(kept_text_.size()), c.high()};
      kept_text_.append(str_of(keep[k]));
      kept_cells_[k] = c;
    } else if (scalar(c.kind())) {
      kept_cells_[k] = c;
    } else if (c.kind() == Kind::kTuple) {
      const auto [items, n] = items_of(keep[k]);
      bool flat = true;
      for (size_t i = 0; i < n && flat; ++i) flat = !in_region(items[i]) || scalar(kind(items[i]));
      if (!flat) continue;
      kept_spans_[k] = {static_cast<uint32_t>(kept_items_.size()), static_cast<uint32_t>(n)};
      kept_items_.insert(kept_items_.end(), items, items + n);
      kept_cells_[k] = c;
    }
  }

  cells_.resize(region_.cells);
  pool_.resize(region_.pool);
  containers_.resize(region_.containers);
  objects_.resize(region_.objects - 1);  // the object's own entry: it becomes a record
  strings_.resize(region_.strings);

  // Made again oldest first, so a tuple's items are remade before it.
  kept_refs_.assign(keep.size(), kDeadRef);
  auto remade = [&](Ref old) {
    if (!in_region(old)) return old;
    const size_t k = std::lower_bound(keep.begin(), keep.end(), old) - keep.begin();
    return k < keep.size() && keep[k] == old ? kept_refs_[k] : kDeadRef;
  };
  for (size_t k = 0; k < keep.size(); ++k) {
    const Cell c = kept_cells_[k];
    if (c.kind() == Kind::kDead) continue;
    Ref r = kDeadRef;
    if (c.kind() == Kind::kString) {
      const std::string_view text(kept_text_.data() + kept_spans_[k].first, kept_spans_[k].second);
      r = interned(interned_strings_, text);
      if (r == kDeadRef) {
        const uint64_t start = strings_.size();
        strings_.append(text);
        if (!make(Kind::kString, start | (uint64_t{text.size()} << 32), &r)) return false;
        intern(interned_strings_, text, r);
      }
    } else if (c.kind() == Kind::kTuple) {
      Ref* items = kept_items_.data() + kept_spans_[k].first;
      for (size_t i = 0; i < kept_spans_[k].second; ++i) items[i] = remade(items[i]);
      const std::string_view key(reinterpret_cast<const char*>(items), kept_spans_[k].second * sizeof(Ref));
      r = interned(interned_tuples_, key);
      if (r == kDeadRef) {
        if (!make_tuple(items, kept_spans_[k].second, &r)) return false;
        intern(interned_tuples_, key, r);
      }
    } else if (!make(c.kind(), c.payload(), &r)) {
      return false;
    }
    kept_refs_[k] = r;
  }
  for (uint32_t key : region_memo_keys_) memo_[key] = remade(memo_[key]);
  for (size_t k = 0; k < count; ++k) refs[k] = remade(refs[k]);
  region_memo_keys_.clear();
  return true;
}

bool TypedReader::has_plain_state(const Object& o) const {
  if (kind(o.state) != Kind::kDict) return false;
  const auto [kv, count] = items_of(o.state);
  for (size_t k = 0; k < count; k += 2)
    if (kind(kv[k]) != Kind::kString || str_of(kv[k]).compare(0, 2, "__") == 0) return false;
  return true;
}

bool TypedReader::field(const Object& o, std::string_view key, Ref* out) const {
  if (kind(o.state) != Kind::kDict) return false;
  const auto [kv, count] = items_of(o.state);
  bool found = false;
  for (size_t k = 0; k < count; k += 2) {  // the last of a repeated key, as a dict keeps it
    if (kind(kv[k]) == Kind::kString && str_of(kv[k]) == key) {
      *out = kv[k + 1];
      found = true;
    }
  }
  return found;
}

bool TypedReader::are_dims(Ref r) const {
  const Kind k = kind(r);
  if (k != Kind::kTuple && k != Kind::kList) return false;
  const auto [items, count] = items_of(r);
  if (count > 64) return false;
  for (size_t d = 0; d < count; ++d)
    if (kind(items[d]) != Kind::kInt || int_of(items[d]) < 0) return false;
  return true;
}

std::optional<Dims> TypedReader::dims(Ref r) const {
  if (!are_dims(r)) return std::nullopt;
  const auto [items, count] = items_of(r);
  Dims out;
  for (size_t d = 0; d < count; ++d) out.push_back(int_of(items[d]));
  return out;
}

// The JSON the VM's flattening gives the same value (formats/pickle_reader.h, PickledStateDict):
// objects as {"__class__" or "__call__": name, "__args__", state keys}, globals as "global:name",
// a dict with keys JSON cannot hold as {"__pairs__": [[key, value], ...]}.
std::optional<nlohmann::json> TypedReader::to_json(Ref r, size_t depth) {
  if (depth > kPickleMaxNesting || !spend(32)) return std::nullopt;
  switch (kind(r)) {
    case Kind::kNone: return nlohmann::json();
    case Kind::kBool: return nlohmann::json(r == kTrueRef);
    case Kind::kInt: return nlohmann::json(int_of(r));
    case Kind::kFloat: return nlohmann::json(floats_[cells_[r].low()]);
    case Kind::kString:
      if (!spend(str_of(r).size())) return std::nullopt;
      return nlohmann::json(std::string(str_of(r)));
    case Kind::kGlobal: return nlohmann::json("global:" + globals_[cells_[r].low()].name);
    case Kind::kTuple:
    case Kind::kList: {
      nlohmann::json a = nlohmann::json::array();
      const auto [items, count] = items_of(r);
      for (size_t k = 0; k < count; ++k) {
        auto j = to_json(items[k], depth + 1);
        if (!j) return std::nullopt;
        a.push_back(std::move(*j));
      }
      return a;
    }
    case Kind::kDict: {
      const auto [kv, count] = items_of(r);
      bool plain = true;
      for (size_t k = 0; k < count; k += 2)
        plain = plain && (kind(kv[k]) == Kind::kString || kind(kv[k]) == Kind::kInt);
      nlohmann::json o = plain ? nlohmann::json::object() : nlohmann::json::array();
      for (size_t k = 0; k < count; k += 2) {
        auto v = to_json(kv[k + 1], depth + 1);
        if (!v) return std::nullopt;
        if (!plain) {
          auto key = to_json(kv[k], depth + 1);
          if (!key) return std::nullopt;
          o.push_back(nlohmann::json::array({std::move(*key), std::move(*v)}));
        } else {
          const std::string key =
              kind(kv[k]) == Kind::kString ? std::string(str_of(kv[k])) : std::to_string(int_of(kv[k]));
          if (!spend(key.size())) return std::nullopt;
          o[key] = std::move(*v);
        }
      }
      if (!plain) return nlohmann::json{{"__pairs__", std::move(o)}};
      return o;
    }
    case Kind::kObject: {
      const Object& ob = objects_[cells_[r].low()];
      nlohmann::json o = nlohmann::json::object();
      if (name_of(ob) != "argparse.Namespace") o[ob.called ? "__call__" : "__class__"] = name_of(ob);
      if (kind(ob.args) != Kind::kTuple || items_of(ob.args).second != 0) {
        auto args = to_json(ob.args, depth + 1);
        if (!args) return std::nullopt;
        o["__args__"] = std::move(*args);
      }
      if (has_plain_state(ob)) {
        const auto [kv, count] = items_of(ob.state);
        for (size_t k = 0; k < count; k += 2) {
          auto v = to_json(kv[k + 1], depth + 1);
          if (!v || !spend(str_of(kv[k]).size())) return std::nullopt;
          o[std::string(str_of(kv[k]))] = std::move(*v);
        }
      } else if (kind(ob.state) == Kind::kDict) {
        return std::nullopt;  // keys the VM would merge differently ("__class__", ints): its call
      } else if (ob.state != kNoneRef) {
        auto state = to_json(ob.state, depth + 1);
        if (!state) return std::nullopt;
        o["__state__"] = std::move(*state);
      }
      return o;
    }
    case Kind::kChunk:
    case Kind::kIndex:
    case Kind::kStorage: return record_json(r, depth);
    case Kind::kDead: return std::nullopt;
  }
  return std::nullopt;
}

// One TensorStorageMetadata(properties, size, chunks), checked as the VM's reading checks it.
std::optional<Result<DcpTensor>> TypedReader::tensor(const std::string& fqn, const Object& t,
                                                     std::string& layout) {
  const std::string at = where_ + ": " + fqn;
  Ref props = 0, size = 0, chunks = 0;
  if (!has_plain_state(t) || !field(t, "properties", &props) || !field(t, "size", &size) ||
      !field(t, "chunks", &chunks) || kind(chunks) != Kind::kList)
    return std::nullopt;
  const Object* p = object_of(props);
  if (!p) return std::nullopt;
  if (class_of(*p).rfind("torch.distributed.checkpoint.metadata.", 0) == 0) layout = "torch-2.4";
  // TensorProperties pickles its __getstate__ tuple (dtype, layout, ...); a dict state carries "dtype".
  Ref dtype = 0;
  if (kind(p->state) == Kind::kTuple && items_of(p->state).second > 0) {
    dtype = items_of(p->state).first[0];
  } else if (!has_plain_state(*p) || !field(*p, "dtype", &dtype)) {
    return std::nullopt;
  }
  if (kind(dtype) != Kind::kGlobal) return std::nullopt;
  const std::string& dtype_name = globals_[cells_[dtype].low()].name;
  if (dtype_name.rfind("torch.", 0) != 0) return std::nullopt;
  const std::optional<DType> dt = dtype_from_torch_name(dtype_name.substr(6));
  std::optional<Dims> shape = dims(size);
  if (!dt || !shape) return std::nullopt;
  DcpTensor out;
  out.fqn = fqn;
  out.dtype = *dt;
  out.torch_dtype = dtype_name;
  out.shape = shape->to_vector();
  if (!checked_nbytes(out.shape, out.dtype))
    return Result<DcpTensor>(Status::corruption(at + ": size " + shape_to_string(out.shape) + " overflows"));
  const auto [list, count] = items_of(chunks);
  // Each record is charged to the budget before it is made: a list that names one chunk object a
  // million times (two bytes each) is a million records, which the VM's budget refuses too.
  if (!spend(count * kChunkRecordCost)) return std::nullopt;
  out.chunks.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    if (kind(list[k]) != Kind::kChunk) return std::nullopt;
    const ChunkRecord& c = chunks_[cells_[list[k]].low()];
    std::optional<SharedDims> offsets = shared_dims(c.offsets), sizes = shared_dims(c.sizes);
    if (!offsets || !sizes) return std::nullopt;
    DcpChunk chunk;
    chunk.offsets = std::move(*offsets);
    chunk.sizes = std::move(*sizes);
    if (!spend(16 * (chunk.offsets.size() + chunk.sizes.size()))) return std::nullopt;
    const Status fits = check_dcp_chunk(chunk, out.shape, at);
    if (!fits.is_ok()) return Result<DcpTensor>(fits);
    out.chunks.push_back(std::move(chunk));
  }
  return Result<DcpTensor>(std::move(out));
}

// One storage_data pair, MetadataIndex(fqn, offset, index) -> _StorageInfo(relative_path, offset,
// length[, transform_descriptors]).
std::optional<DcpItem> TypedReader::item(Ref key, Ref value) {
  if (kind(key) != Kind::kIndex || kind(value) != Kind::kStorage) return std::nullopt;
  const IndexRecord& k = indexes_[cells_[key].low()];
  const StorageRecord& v = storages_[cells_[value].low()];
  if (!spend(kChunkRecordCost + str_of(k.fqn).size() + str_of(v.path).size())) return std::nullopt;
  DcpItem out;
  out.fqn = shared(k.fqn);
  out.relative_path = shared(v.path);
  if (k.offsets == kNoneRef) {
    out.is_bytes = true;
  } else {
    std::optional<SharedDims> offsets = shared_dims(k.offsets);
    if (!offsets) return std::nullopt;
    out.offsets = std::move(*offsets);
  }
  out.offset = out.container_offset = out.recorded_offset = v.offset;
  out.length = out.recorded_length = v.length;
  if (v.transforms) out.transforms = transforms_[v.transforms - 1];
  return out;
}

std::optional<Result<DcpMetadata>> TypedReader::extract(Ref root) {
  const Object* m = object_of(root);
  if (!m || (class_tail(class_of(*m)) != "Metadata" && class_tail(class_of(*m)) != "MCoreMetadata") ||
      !has_plain_state(*m))
    return std::nullopt;
  DcpMetadata out;
  const std::string& mclass = name_of(*m);
  Ref v = 0;
  out.layout = mclass.find("._shard.checkpoint.") != std::string::npos ? "torch-1.13" : "torch-2.0";
  if (field(*m, "storage_meta", &v) || field(*m, "version", &v)) out.layout = "torch-2.4";
  if (field(*m, "version", &v) && kind(v) == Kind::kString) out.version = std::string(str_of(v));
  out.metadata_class = mclass;
  std::optional<nlohmann::json> mcore = field_json(*m, "mcore_data"),
                                planner = field_json(*m, "planner_data"),
                                storage_meta = field_json(*m, "storage_meta");
  if (!mcore || !planner || !storage_meta) return std::nullopt;
  out.mcore_data = std::move(*mcore);
  if (!out.mcore_data.is_null() && !out.mcore_data.is_object())
    return Result<DcpMetadata>(
        Status::corruption(where_ + ": mcore_data is " + out.mcore_data.type_name() + ", not a dict"));
  out.planner_data = std::move(*planner);
  out.storage_meta = std::move(*storage_meta);

  // The items are made first, and their records let go, so that the tensors' chunks reuse that
  // memory (at 1M chunks the parse peaks with both made). Their outcome still counts only after
  // the tensors', as it always has.
  const std::optional<Status> items = read_items(*m, &out.items);
  Array<IndexRecord>().swap(indexes_);
  Array<StorageRecord>().swap(storages_);
  std::unordered_map<Ref, SharedText>().swap(shared_);

  Ref sdm = 0;
  if (!field(*m, "state_dict_metadata", &sdm) || kind(sdm) != Kind::kDict) return std::nullopt;
  out.tensors.reserve(entry_count(sdm));
  const auto [entries, entry_refs] = items_of(sdm);
  for (size_t k = 0; k < entry_refs; k += 2) {
    if (kind(entries[k]) != Kind::kString) return std::nullopt;
    const std::string fqn(str_of(entries[k]));
    if (fqn == "__pairs__" || fqn == "__class__")
      return std::nullopt;  // the VM's JSON reads these as its own
    const Object* t = object_of(entries[k + 1]);
    if (!t) return std::nullopt;
    const std::string_view what = class_tail(class_of(*t));
    if (!spend(kChunkRecordCost + fqn.size())) return std::nullopt;
    if (what == "BytesStorageMetadata") {
      out.bytes.push_back({fqn, SIZE_MAX});
    } else if (what == "TensorStorageMetadata") {
      std::optional<Result<DcpTensor>> read = tensor(fqn, *t, out.layout);
      if (!read) return std::nullopt;
      if (!read->is_ok()) return Result<DcpMetadata>(read->status());
      out.tensors.push_back(std::move(**read));
    } else {
      return std::nullopt;
    }
  }
  // A repeated name: a dict keeps the last, and the VM's reading does too.
  std::vector<std::string_view> names;
  for (const DcpTensor& t : out.tensors) names.push_back(t.fqn);
  for (const DcpBytesEntry& b : out.bytes) names.push_back(b.fqn);
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) return std::nullopt;

  if (!items) return std::nullopt;
  if (!items->is_ok()) return Result<DcpMetadata>(*items);
  out.globals = std::move(globals_);
  return Result<DcpMetadata>(std::move(out));
}

// storage_data's pairs, in pickle order: nullopt where the VM is to judge.
std::optional<Status> TypedReader::read_items(const Object& m, std::vector<DcpItem>* items) {
  Ref sd = 0;
  if (!field(m, "storage_data", &sd) || kind(sd) != Kind::kDict) return std::nullopt;
  const auto [pairs, pair_refs] = items_of(sd);
  if (pair_refs / 2 > kDcpMaxItems)
    return Status::corruption(where_ + ": " + std::to_string(pair_refs / 2) +
                              " storage items, more than the limit");
  items->reserve(pair_refs / 2);
  for (size_t k = 0; k < pair_refs; k += 2) {
    std::optional<DcpItem> read = item(pairs[k], pairs[k + 1]);
    if (!read) return std::nullopt;
    items->push_back(std::move(*read));
  }
  return Status::ok();
}

}  // namespace
}  // namespace dcp_typed_reader

std::optional<Result<DcpMetadata>> read_dcp_metadata_typed(const uint8_t* data, size_t size,
                                                           const std::string& where) {
  if (size > kDcpMaxMetadataBytes) return std::nullopt;
  return dcp_typed_reader::TypedReader(data, size, where).read();
}

std::optional<Result<DcpMetadata>> read_dcp_metadata_typed(const ByteSource& source, const std::string& where,
                                                           size_t window_bytes) {
  if (source.size() > kDcpMaxMetadataBytes) return std::nullopt;
  return dcp_typed_reader::TypedReader(source, where, std::max<size_t>(window_bytes, 1)).read();
}

}  // namespace ckpt
