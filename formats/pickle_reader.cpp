#include "formats/pickle_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/byte_coding.h"
#include "base/sha256.h"
#include "base/text.h"

namespace ckpt {

namespace {

std::string utf8_clean(const std::string& s);  // below: invalid UTF-8 sequences become U+FFFD

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kBigInt,  // wider than int64: `s` is "0x…" or "-0x…", its magnitude in hex (py_value.h)
  kFloat,
  kString,
  kBytes,
  kTuple,
  kList,
  kSet,  // set, or frozenset when `i` is 1
  kDict,
  kGlobal,
  kStorage,
  kTensor,
  kObject  // an inert placeholder: what REDUCE / NEWOBJ / BUILD on a global would have made
};

// The globals the machine interprets; kNone is every other one (an inert name).
enum class Callable : uint8_t {
  kNone,
  kOrderedDict,
  kDefaultDict,
  kRebuildTensor,
  kRebuildParameter,
  kRebuildFromType,
  kStorageType,
  kSize,
  kSet,
  kCodecsEncode,
  kNumpyReconstruct,
  kNumpyDtype,
  kNumpyScalar,
  kReconstructor
};

using Ref = uint32_t;

// One value in the VM's arena. Values refer to each other by index, so a pickle that builds a
// cycle (a list appended to itself) cannot leak or loop: traversal is depth-bounded.
// Indices also let two paths share one value (memo GET), which the Flattener accounts for.
struct Value {
  Kind kind = Kind::kNone;
  Callable callable = Callable::kNone;  // kGlobal; kObject: the global that made it
  DType dtype = DType::kF32;            // for kGlobal storage types, kStorage, kTensor
  int64_t i = 0;            // kInt, kBool; storage numel; tensor storage offset; kObject: 1 if made by REDUCE
  int64_t view_offset = 0;  // kStorage: a legacy view's first element in its root storage
  // kGlobal storage type, kStorage: torch.UntypedStorage, whose numel counts bytes (torch >= 2.1
  // saves the dtypes torch.storage._new_dtypes() names this way, each tensor naming its dtype).
  bool untyped = false;
  double f = 0;
  std::string s;         // kString, kBytes; global name; storage key; kObject: class or callable
  std::string location;  // kStorage
  // kTuple, kList; kTensor: {storage}; kStorage: {} or {bytes} for a numpy array's inline data;
  // kObject: {args, state, appended list, set dict}, unset slots pointing at the shared None.
  std::vector<Ref> items;
  std::vector<std::pair<Ref, Ref>> dict;
  std::vector<int64_t> shape, stride;  // kTensor
};

constexpr size_t kObjectArgs = 0, kObjectState = 1, kObjectList = 2, kObjectDict = 3;
constexpr Ref kNoneRef = 0;  // the machine's first value, shared by every unset object slot

// LONG1/LONG4's operand wider than 8 bytes (little-endian two's complement) as the value Python
// reads: a wide int as sign and magnitude, the one spelling wide_decimal gives protocol 0's LONG too,
// so one number read from two encodings compares equal; a non-minimal encoding that fits int64 is
// that int.
Value wide_twos_complement(const uint8_t* le, size_t k) {
  std::vector<uint8_t> be(le, le + k);
  std::reverse(be.begin(), be.end());
  const bool negative = (be[0] & 0x80) != 0;
  if (negative) {  // magnitude = ~x + 1
    for (uint8_t& b : be) b = static_cast<uint8_t>(~b);
    for (size_t j = be.size(); j-- > 0;) {
      if (++be[j] != 0) break;
    }
  }
  size_t lead = 0;
  while (lead + 1 < be.size() && be[lead] == 0) ++lead;
  be.erase(be.begin(), be.begin() + static_cast<std::ptrdiff_t>(lead));
  Value v;
  if (be.size() <= 8) {
    uint64_t magnitude = 0;
    for (uint8_t b : be) magnitude = magnitude << 8 | b;
    if (magnitude <= static_cast<uint64_t>(INT64_MAX) || (negative && magnitude == uint64_t{1} << 63)) {
      v.kind = Kind::kInt;
      v.i = negative ? static_cast<int64_t>(~magnitude + 1) : static_cast<int64_t>(magnitude);
      return v;
    }
  }
  v.kind = Kind::kBigInt;
  v.s = std::string(negative ? "-" : "") + "0x" + to_hex(be.data(), be.size());
  return v;
}

struct StorageType {
  const char* name;
  DType dtype;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::kF32},        {"HalfStorage", DType::kF16},
    {"BFloat16Storage", DType::kBF16},    {"DoubleStorage", DType::kF64},
    {"LongStorage", DType::kI64},         {"IntStorage", DType::kI32},
    {"ShortStorage", DType::kI16},        {"CharStorage", DType::kI8},
    {"ByteStorage", DType::kU8},          {"BoolStorage", DType::kBool},
    {"ComplexFloatStorage", DType::kC64}, {"ComplexDoubleStorage", DType::kC128},
};

class Machine {
 public:
  Machine(const uint8_t* data, size_t size, std::string where)
      : p_(data), n_(size), where_(std::move(where)) {
    values_.emplace_back();  // kNoneRef
  }

  Result<Ref> run();
  const std::vector<Value>& values() const { return values_; }
  size_t position() const { return pos_; }
  std::vector<PickleGlobal> take_globals() { return std::move(globals_); }
  std::vector<PickledStorage> take_storages() { return std::move(storages_); }

 private:
  // One handler per opcode family; each reads its operands from pos_ (the opcode byte is consumed).
  using Handler = Status (Machine::*)(uint8_t op);
  struct OpTable {
    Handler at[256] = {};
  };
  static constexpr void on(OpTable* t, const char* ops, Handler h) {
    for (; *ops; ++ops) t->at[static_cast<uint8_t>(*ops)] = h;
  }
  static constexpr OpTable op_table();

  Status framing_op(uint8_t op);
  Status stack_op(uint8_t op);
  Status memo_op(uint8_t op);
  Status scalar_op(uint8_t op);
  Status string_op(uint8_t op);
  Status new_container_op(uint8_t op);
  Status set_item_op(uint8_t op);
  Status append_op(uint8_t op);
  Status global_op(uint8_t op);
  Status call_op(uint8_t op);
  Status persistent_id_op(uint8_t op);
  Status set_op(uint8_t op);
  // Protocols 0 and 1 (text operands, one per line) and the rest of what CPython's unpickler reads.
  Status text_number_op(uint8_t op);
  Status text_string_op(uint8_t op);
  Status text_memo_op(uint8_t op);
  Status mark_container_op(uint8_t op);
  Status instantiate_op(uint8_t op);
  Status extension_op(uint8_t op);
  Status buffer_op(uint8_t op);
  Status instantiate(Ref cls, std::vector<Ref> args);
  Result<Ref> make_global(const std::string& module, const std::string& name);
  // A value passed as argument `k` to `fn`: where a loader calls it, that is a call of the value.
  void note_passed(Ref fn, size_t k, Ref arg);

  Status fail(const std::string& what) const {
    return Status::corruption(where_ + " @" + hex_offset(op_pos_) + ": " + what);
  }
  // Where CPython's unpickler and this reading could differ: refused (StatusCode::kAmbiguous).
  Status ambiguous(const std::string& what) const {
    return Status::ambiguous(where_ + " @" + hex_offset(op_pos_) + ": " + what);
  }
  Status need(size_t k) const {
    if (k > n_ - pos_)
      return Status::truncated(where_ + " @" + hex_offset(op_pos_) + ": pickle ends inside an opcode");
    return Status::ok();
  }
  uint64_t take_le(size_t k) {
    const uint64_t v = decode_le(p_ + pos_, k);
    pos_ += k;
    return v;
  }
  Result<Ref> make(Value v) {
    if (values_.size() >= kPickleMaxValues)
      return fail("more than " + std::to_string(kPickleMaxValues) + " values");
    values_.push_back(std::move(v));
    return static_cast<Ref>(values_.size() - 1);
  }
  Status push(Ref r) {
    if (stack_.size() >= kPickleMaxStack) return fail("stack deeper than " + std::to_string(kPickleMaxStack));
    stack_.push_back(r);
    return Status::ok();
  }
  Status push_new(Value v) {
    CKPT_ASSIGN_OR_RETURN(Ref r, make(std::move(v)));
    return push(r);
  }
  Result<Ref> pop() {
    if (stack_.size() <= floor()) return fail("stack underflow");
    Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Result<Ref> top() {
    if (stack_.size() <= floor()) return fail("stack underflow");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // Pops everything above the last MARK, and the mark.
  Result<std::vector<Ref>> pop_mark() {
    if (marks_.empty()) return fail("no MARK on the stack");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  Status memo_put(uint64_t key) {
    CKPT_ASSIGN_OR_RETURN(Ref r, top());
    if (memo_.size() >= kPickleMaxMemo && !memo_.count(key)) {
      return fail("memo larger than " + std::to_string(kPickleMaxMemo));
    }
    memo_[key] = r;
    return Status::ok();
  }
  Status memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return fail("memo key " + std::to_string(key) + " was never stored");
    return push(it->second);
  }
  // One text operand up to its '\n' (not included). `max` bounds names (GLOBAL, INST) and numbers;
  // a protocol 0 string may be as long as the pickle.
  Result<std::string> take_line(size_t max = 256) {
    for (size_t k = 0; pos_ + k < n_ && k <= max; ++k) {
      if (p_[pos_ + k] == '\n') {
        std::string s(reinterpret_cast<const char*>(p_ + pos_), k);
        pos_ += k + 1;
        return s;
      }
    }
    return fail("text operand longer than " + std::to_string(max) + " bytes or unterminated");
  }
  Status push_string(Kind kind, uint64_t len) {
    if (len > n_ - pos_) return need(len);
    Value v;
    v.kind = kind;
    v.s.assign(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return push_new(std::move(v));
  }
  Status push_global(const std::string& module, const std::string& name);
  // Records on a global how the pickle used it (PickleGlobal::uses); `r` that is no global is ignored.
  void note_use(Ref r, uint32_t use);
  uint32_t call_use(const std::vector<Ref>& args) const;
  void note_result_called(Ref obj);
  Status reduce(Ref callable, Ref args);
  // REDUCE of a callable the reader knows: the handler builds its value, or returns nullopt when the
  // arguments are not the shape it knows (the call then stays a placeholder, as for any global).
  struct ReduceCall {
    Ref callable;
    Ref args_ref;
    const std::vector<Ref>& args;
    const std::string& name;
  };
  using Reducer = std::optional<Status> (Machine::*)(const ReduceCall& call);
  static Reducer reducer_for(Callable c);
  std::optional<Status> reduce_dict(const ReduceCall& call);
  std::optional<Status> reduce_rebuild_tensor(const ReduceCall& call);
  std::optional<Status> reduce_rebuild_parameter(const ReduceCall& call);
  std::optional<Status> reduce_rebuild_from_type(const ReduceCall& call);
  std::optional<Status> reduce_size(const ReduceCall& call);
  std::optional<Status> reduce_set(const ReduceCall& call);
  std::optional<Status> reduce_codecs_encode(const ReduceCall& call);
  std::optional<Status> reduce_numpy_scalar(const ReduceCall& call);
  std::optional<Status> reduce_reconstructor(const ReduceCall& call);
  std::optional<Status> reduce_numpy_object(const ReduceCall& call);
  Status new_object(Ref cls, Ref args, bool keyword_args);
  Status build(Ref obj, Ref state);
  Result<Ref> make_object(const std::string& name, Callable made_by, Ref args, bool called);
  Result<Ref> content_of(Ref obj, size_t slot, Kind kind);
  bool numpy_array(Ref obj, Ref state);
  std::optional<DType> numpy_dtype(Ref dtype_obj) const;
  Status set_items(Ref dict, const std::vector<Ref>& kv);
  Status persistent_load(Ref pid);
  Result<std::vector<int64_t>> int_tuple(Ref r, const char* what) const;
  std::string describe(Ref r) const;

  const uint8_t* p_;
  size_t n_;
  std::string where_;
  size_t pos_ = 0, op_pos_ = 0;
  // Just past the current FRAME's bytes (0: no frame). CPython's unpickler reads a whole frame
  // before running it; Machine::run refuses a pickle whose reading could differ from that.
  size_t frame_end_ = 0;
  std::vector<Value> values_;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::vector<PickleGlobal> globals_;
  std::unordered_map<std::string, size_t> global_index_;
  std::vector<PickledStorage> storages_;
  std::unordered_map<std::string, size_t> storage_index_;
};

// The value a global becomes: an inert name, or one of the callables the machine interprets.
Value global_value(const std::string& module, const std::string& name) {
  const std::string full = module + "." + name;
  Value v;
  v.kind = Kind::kGlobal;
  v.s = full;
  const bool builtins = module == "builtins" || module == "__builtin__";
  const bool numpy_multiarray = module == "numpy.core.multiarray" || module == "numpy._core.multiarray";
  if (full == "collections.OrderedDict")
    v.callable = Callable::kOrderedDict;
  else if (full == "collections.defaultdict")
    v.callable = Callable::kDefaultDict;
  else if (full == "torch._utils._rebuild_tensor_v2" || full == "torch._utils._rebuild_tensor" ||
           full == "torch._utils._rebuild_tensor_v3")
    v.callable = Callable::kRebuildTensor;
  else if (full == "torch._utils._rebuild_parameter" || full == "torch._utils._rebuild_parameter_with_state")
    v.callable = Callable::kRebuildParameter;
  else if (full == "torch._tensor._rebuild_from_type_v2")
    v.callable = Callable::kRebuildFromType;
  else if (full == "torch.Size")
    v.callable = Callable::kSize;
  else if (builtins && (name == "set" || name == "frozenset"))
    v.callable = Callable::kSet;
  else if (full == "_codecs.encode")
    v.callable = Callable::kCodecsEncode;
  else if (numpy_multiarray && name == "_reconstruct")
    v.callable = Callable::kNumpyReconstruct;
  else if (numpy_multiarray && name == "scalar")
    v.callable = Callable::kNumpyScalar;
  else if (full == "numpy.dtype")
    v.callable = Callable::kNumpyDtype;
  else if (full == "copyreg._reconstructor")
    v.callable = Callable::kReconstructor;
  else if ((module == "torch" || module == "torch.storage") && name == "UntypedStorage") {
    v.callable = Callable::kStorageType;
    v.dtype = DType::kU8;
    v.untyped = true;
  } else if (module == "torch") {
    for (const auto& st : kStorageTypes) {
      if (name == st.name) {
        v.callable = Callable::kStorageType;
        v.dtype = st.dtype;
      }
    }
  }
  return v;
}

Status Machine::push_global(const std::string& module, const std::string& name) {
  CKPT_ASSIGN_OR_RETURN(Ref r, make_global(module, name));
  return push(r);
}

Result<Ref> Machine::make_global(const std::string& module, const std::string& name) {
  const std::string full = module + "." + name;
  auto [it, added] = global_index_.emplace(full, globals_.size());
  // The listed name is UTF-8-clean: inspect --json dumps it (a global spelled with invalid UTF-8
  // made it throw). It is classified by its raw spelling.
  if (added) {
    PickleGlobal g;
    g.name = utf8_clean(full);
    g.risk = classify_pickle_global(module, name);
    g.first_offset = op_pos_;
    globals_.push_back(std::move(g));
  }
  ++globals_[it->second].count;
  return make(global_value(module, name));
}

Result<std::vector<int64_t>> Machine::int_tuple(Ref r, const char* what) const {
  const Value& v = values_[r];
  if (v.kind != Kind::kTuple && v.kind != Kind::kList)
    return fail(std::string(what) + ": expected a tuple of ints");
  if (v.items.size() > 64) return fail(std::string(what) + ": more than 64 dims");
  std::vector<int64_t> out;
  for (Ref item : v.items) {
    if (values_[item].kind != Kind::kInt) return fail(std::string(what) + ": expected a tuple of ints");
    out.push_back(values_[item].i);
  }
  return out;
}

// What a value is, for messages and for the name of an object made by calling a non-global.
std::string Machine::describe(Ref r) const {
  const Value& v = values_[r];
  switch (v.kind) {
    case Kind::kGlobal: return v.s;
    case Kind::kObject: return v.s + "()";
    default: return "a value of kind " + std::to_string(static_cast<int>(v.kind));
  }
}

Result<Ref> Machine::make_object(const std::string& name, Callable made_by, Ref args, bool called) {
  Value o;
  o.kind = Kind::kObject;
  o.s = name;
  o.callable = made_by;
  o.i = called ? 1 : 0;
  o.items = {args, kNoneRef, kNoneRef, kNoneRef};
  return make(std::move(o));
}

// The list or dict an object (a list or dict subclass) got from APPEND(S) / SETITEM(S).
Result<Ref> Machine::content_of(Ref obj, size_t slot, Kind kind) {
  if (values_[obj].items[slot] == kNoneRef) {
    Value c;
    c.kind = kind;
    CKPT_ASSIGN_OR_RETURN(Ref r, make(std::move(c)));
    values_[obj].items[slot] = r;
  }
  return values_[obj].items[slot];
}

// numpy.dtype('f4', False, True) with BUILD state (3, '<', ...): the element type, when it is one
// we read and its bytes are little-endian.
std::optional<DType> Machine::numpy_dtype(Ref dtype_obj) const {
  const Value& d = values_[dtype_obj];
  if (d.kind != Kind::kObject || d.callable != Callable::kNumpyDtype) return std::nullopt;
  const Value& args = values_[d.items[kObjectArgs]];
  if (args.kind != Kind::kTuple || args.items.empty() || values_[args.items[0]].kind != Kind::kString)
    return std::nullopt;
  std::string descr = values_[args.items[0]].s;
  char order = '|';
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '=')) {
    order = descr[0];
    descr.erase(0, 1);
  }
  const Value& state = values_[d.items[kObjectState]];
  if (state.kind == Kind::kTuple && state.items.size() >= 2 &&
      values_[state.items[1]].kind == Kind::kString && values_[state.items[1]].s.size() == 1) {
    order = values_[state.items[1]].s[0];
  }
  if (order == '>') return std::nullopt;  // '=' is the writer's order; every writer we meet is little-endian
  static const std::pair<const char*, DType> kDescr[] = {
      {"f2", DType::kF16}, {"f4", DType::kF32}, {"f8", DType::kF64}, {"i1", DType::kI8},
      {"i2", DType::kI16}, {"i4", DType::kI32}, {"i8", DType::kI64}, {"u1", DType::kU8},
      {"u2", DType::kU16}, {"u4", DType::kU32}, {"u8", DType::kU64}, {"b1", DType::kBool}};
  for (const auto& [name, dtype] : kDescr) {
    if (descr == name) return dtype;
  }
  return std::nullopt;
}

// _reconstruct(ndarray, (0,), b'b') then BUILD (version, shape, dtype, is_fortran, raw bytes): the
// object becomes a tensor whose bytes are the pickle's. Anything else stays a described object.
bool Machine::numpy_array(Ref obj, Ref state_ref) {
  const Value& state = values_[state_ref];
  if (state.kind != Kind::kTuple || (state.items.size() != 5 && state.items.size() != 4)) return false;
  const size_t base = state.items.size() - 4;
  const Value& fortran = values_[state.items[base + 2]];
  const Value& data = values_[state.items[base + 3]];
  const auto dtype = numpy_dtype(state.items[base + 1]);
  auto shape = int_tuple(state.items[base], "ndarray shape");
  if (!dtype || !shape.is_ok() || data.kind != Kind::kBytes || fortran.kind != Kind::kBool) return false;
  const auto nbytes = checked_nbytes(*shape, *dtype);
  if (!nbytes || *nbytes != data.s.size()) return false;
  Value t;
  t.kind = Kind::kTensor;
  t.dtype = *dtype;
  t.shape = *shape;
  t.stride.assign(t.shape.size(), 1);
  int64_t step = 1;  // no overflow: the product of all dims is the element count, which fits
  for (size_t k = 0; k < t.shape.size(); ++k) {
    const size_t d = fortran.i ? k : t.shape.size() - 1 - k;
    t.stride[d] = step;
    step *= std::max<int64_t>(t.shape[d], 1);
  }
  Value st;
  st.kind = Kind::kStorage;
  st.dtype = *dtype;
  st.i = *checked_numel(t.shape);
  st.items = {state.items[base + 3]};
  auto storage = make(std::move(st));
  if (!storage.is_ok()) return false;
  t.items = {*storage};
  values_[obj] = std::move(t);
  return true;
}

Status Machine::reduce(Ref callable, Ref args_ref) {
  if (values_[args_ref].kind != Kind::kTuple) return fail("REDUCE arguments are not a tuple");
  const Value& fn = values_[callable];
  if (fn.kind == Kind::kObject) {  // calling an object we never made: still only a name
    note_result_called(callable);
    CKPT_ASSIGN_OR_RETURN(Ref o, make_object(describe(callable), Callable::kNone, args_ref, true));
    return push(o);
  }
  if (fn.kind != Kind::kGlobal) return fail("REDUCE on a non-callable");
  const std::vector<Ref> a = values_[args_ref].items;
  const std::string name = fn.s;
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  if (name == "builtins.getattr" || name == "__builtin__.getattr") {
    // Recorded for the gate (PickleGlobal::attribute_lookups); the call itself stays a placeholder.
    PickleGlobal& g = globals_[global_index_.at(name)];
    if (a.size() == 2 && kind_of(0) == Kind::kGlobal && kind_of(1) == Kind::kString &&
        g.attribute_lookups.size() < 1024) {
      g.attribute_lookups.push_back(utf8_clean(values_[a[0]].s + "." + values_[a[1]].s));
      g.uses |= kPickleUseAttributeRead;
      note_use(a[0], kPickleUseAttributeRead);
    } else {
      g.uses |= kPickleUseOtherCall;
      ++g.other_calls;
    }
  } else if (fn.callable == Callable::kReconstructor) {
    // copyreg._reconstructor(cls, object, None): protocol 0/1's way to rebuild an instance from its
    // fields (BUILD follows), as NEWOBJ(cls, ()) is protocol 2's.
    const bool plain = a.size() == 3 && kind_of(1) == Kind::kGlobal &&
                       (values_[a[1]].s == "builtins.object" || values_[a[1]].s == "__builtin__.object") &&
                       kind_of(2) == Kind::kNone;
    note_use(callable, call_use(a));
    if (!a.empty()) note_use(a[0], plain ? kPickleUseConstructed : kPickleUseOtherCall);
  } else if (fn.callable == Callable::kNumpyReconstruct || fn.callable == Callable::kNumpyDtype) {
    // numpy's pickler writes an array as _reconstruct(ndarray, (0,), b'b') and its dtype as
    // dtype('u4', False, True): only those shapes are kPickleUseNumpyArray.
    const bool array_shape = fn.callable == Callable::kNumpyReconstruct && a.size() == 3 &&
                             kind_of(0) == Kind::kGlobal && values_[a[0]].s == "numpy.ndarray" &&
                             kind_of(1) == Kind::kTuple && kind_of(2) == Kind::kBytes;
    const bool dtype_shape = fn.callable == Callable::kNumpyDtype && a.size() == 3 &&
                             kind_of(0) == Kind::kString && kind_of(1) == Kind::kBool &&
                             kind_of(2) == Kind::kBool;
    note_use(callable, array_shape || dtype_shape ? kPickleUseNumpyArray : call_use(a));
    if (array_shape) note_use(a[0], kPickleUseNumpyArray);
  } else {
    note_use(callable, call_use(a));
  }
  // getattr's arguments are judged above (an attribute read of a[0]); everyone else's here.
  const bool getattr_call = name == "builtins.getattr" || name == "__builtin__.getattr";
  for (size_t k = 0; k < a.size() && !getattr_call; ++k) note_passed(callable, k, a[k]);
  const ReduceCall call{callable, args_ref, a, name};
  const auto handler = reducer_for(fn.callable);
  if (handler) {
    std::optional<Status> done = (this->*handler)(call);
    if (done) return *done;
  }
  // Any other global, or a known one called with arguments of another shape: an inert placeholder.
  CKPT_ASSIGN_OR_RETURN(Ref o, make_object(name, Callable::kNone, args_ref, true));
  return push(o);
}

// The callables the reader interprets, one handler each; every other global stays a placeholder.
Machine::Reducer Machine::reducer_for(Callable c) {
  switch (c) {
    case Callable::kOrderedDict: return &Machine::reduce_dict;
    case Callable::kDefaultDict: return &Machine::reduce_dict;
    case Callable::kRebuildTensor: return &Machine::reduce_rebuild_tensor;
    case Callable::kRebuildParameter: return &Machine::reduce_rebuild_parameter;
    case Callable::kRebuildFromType: return &Machine::reduce_rebuild_from_type;
    case Callable::kSize: return &Machine::reduce_size;
    case Callable::kSet: return &Machine::reduce_set;
    case Callable::kCodecsEncode: return &Machine::reduce_codecs_encode;
    case Callable::kNumpyScalar: return &Machine::reduce_numpy_scalar;
    case Callable::kReconstructor: return &Machine::reduce_reconstructor;
    case Callable::kNumpyReconstruct: return &Machine::reduce_numpy_object;
    case Callable::kNumpyDtype: return &Machine::reduce_numpy_object;
    case Callable::kStorageType:
    case Callable::kNone: return nullptr;
  }
  return nullptr;
}

std::optional<Status> Machine::reduce_dict(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  const Value& fn = values_[call.callable];
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  // OrderedDict(), OrderedDict([(k, v), ...]), defaultdict(factory): the factory is never called.
  Value d;
  d.kind = Kind::kDict;
  if (fn.callable == Callable::kOrderedDict && !a.empty()) {
    if (a.size() != 1 || (kind_of(0) != Kind::kList && kind_of(0) != Kind::kTuple)) return std::nullopt;
    for (Ref pair : values_[a[0]].items) {
      const Value& p = values_[pair];
      if (p.kind != Kind::kTuple || p.items.size() != 2) return fail("OrderedDict item is not a pair");
      d.dict.emplace_back(p.items[0], p.items[1]);
    }
  }
  return push_new(std::move(d));
}

std::optional<Status> Machine::reduce_rebuild_tensor(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  const std::string& name = call.name;
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  // _rebuild_tensor_v2: (storage, storage_offset, size, stride, requires_grad, backward_hooks[,
  // metadata]); _rebuild_tensor, how torch < 0.4 pickled a tensor: (storage, storage_offset, size,
  // stride); _rebuild_tensor_v3 (torch >= 2.1, for float8, uint16/32/64, complex32...): (untyped
  // storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype[, metadata]), the
  // offset and strides in elements of `dtype`. torch.load(weights_only=True) accepts all three.
  const bool v1 = name == "torch._utils._rebuild_tensor";
  const bool v3 = name == "torch._utils._rebuild_tensor_v3";
  if (v1 ? a.size() != 4 : v3 ? (a.size() < 7 || a.size() > 8) : (a.size() < 6 || a.size() > 7))
    return fail(std::string(v1   ? "_rebuild_tensor expects 4"
                            : v3 ? "_rebuild_tensor_v3 expects 7 or 8"
                                 : "_rebuild_tensor_v2 expects 6 or 7") +
                " arguments, got " + std::to_string(a.size()));
  if (kind_of(0) != Kind::kStorage) return fail("_rebuild_tensor_v2: first argument is not a storage");
  if (kind_of(1) != Kind::kInt) return fail("_rebuild_tensor_v2: storage_offset is not an int");
  Value t;
  t.kind = Kind::kTensor;
  t.items = {a[0]};
  t.dtype = values_[a[0]].dtype;
  if (v3) {
    const Value& d = values_[a[6]];
    const std::string prefix = "torch.";
    std::optional<DType> dtype;
    if (d.kind == Kind::kGlobal && d.s.compare(0, prefix.size(), prefix) == 0)
      dtype = dtype_from_torch_name(d.s.substr(prefix.size()));
    if (!dtype) {
      return fail("_rebuild_tensor_v3: dtype " +
                  (d.kind == Kind::kGlobal ? utf8_clean(d.s) : describe(a[6])) +
                  " is not a dtype this reader knows");
    }
    if (!values_[a[0]].untyped) return fail("_rebuild_tensor_v3: storage is not an UntypedStorage");
    t.dtype = *dtype;
  } else if (values_[a[0]].untyped) {
    return fail(name + ": an UntypedStorage needs _rebuild_tensor_v3's dtype");
  }
  t.i = values_[a[1]].i;
  CKPT_ASSIGN_OR_RETURN(t.shape, int_tuple(a[2], "_rebuild_tensor_v2 size"));
  CKPT_ASSIGN_OR_RETURN(t.stride, int_tuple(a[3], "_rebuild_tensor_v2 stride"));
  if (t.shape.size() != t.stride.size()) return fail("_rebuild_tensor_v2: size and stride ranks differ");
  return push_new(std::move(t));
}

std::optional<Status> Machine::reduce_rebuild_parameter(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  const std::string& name = call.name;
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  if ((a.size() != 3 && a.size() != 4) || kind_of(0) != Kind::kTensor)
    return fail(name + " expects (tensor, requires_grad, hooks[, state])");
  return push(a[0]);
}

std::optional<Status> Machine::reduce_rebuild_from_type(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  // (func, type, args, state): a tensor subclass; the tensor is func(*args).
  if (a.size() == 4 && kind_of(0) == Kind::kGlobal && values_[a[0]].callable == Callable::kRebuildTensor &&
      kind_of(2) == Kind::kTuple) {
    return reduce(a[0], a[2]);
  }
  return std::nullopt;
}

std::optional<Status> Machine::reduce_size(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  if (a.size() == 1 && (kind_of(0) == Kind::kTuple || kind_of(0) == Kind::kList)) {
    Value t;
    t.kind = Kind::kTuple;
    t.items = values_[a[0]].items;
    return push_new(std::move(t));
  }
  return std::nullopt;
}

std::optional<Status> Machine::reduce_set(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  if (a.empty() || (a.size() == 1 && (kind_of(0) == Kind::kTuple || kind_of(0) == Kind::kList))) {
    Value l;
    l.kind = Kind::kSet;
    l.i = ends_with(call.name, ".frozenset");
    if (!a.empty()) l.items = values_[a[0]].items;
    return push_new(std::move(l));
  }
  return std::nullopt;
}

std::optional<Status> Machine::reduce_codecs_encode(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  // How protocol 2 writes bytes on Python 3: _codecs.encode(<latin-1 text>, 'latin1').
  if (a.size() != 2 || kind_of(0) != Kind::kString || kind_of(1) != Kind::kString) return std::nullopt;
  const std::string& enc = values_[a[1]].s;
  const std::string& text = values_[a[0]].s;
  Value b;
  b.kind = Kind::kBytes;
  if (enc == "utf-8" || enc == "utf8") {
    b.s = text;
  } else if (enc == "latin1" || enc == "latin-1" || enc == "iso-8859-1") {
    b.s.reserve(text.size());
    for (size_t k = 0; k < text.size(); ++k) {
      const auto c = static_cast<uint8_t>(text[k]);
      if (c < 0x80) {
        b.s += static_cast<char>(c);
      } else if ((c == 0xc2 || c == 0xc3) && k + 1 < text.size() &&
                 (static_cast<uint8_t>(text[k + 1]) & 0xc0) == 0x80) {
        b.s += static_cast<char>(((c & 0x03) << 6) | (static_cast<uint8_t>(text[k + 1]) & 0x3f));
        ++k;
      } else {
        return fail("_codecs.encode: text is not latin-1");
      }
    }
  } else {
    return std::nullopt;
  }
  return push_new(std::move(b));
}

std::optional<Status> Machine::reduce_numpy_scalar(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  auto kind_of = [&](size_t k) { return k < a.size() ? values_[a[k]].kind : Kind::kNone; };
  // scalar(dtype, raw bytes): a numpy number becomes a plain number.
  const auto dtype = a.size() == 2 ? numpy_dtype(a[0]) : std::nullopt;
  if (!dtype || kind_of(1) != Kind::kBytes || values_[a[1]].s.size() != dtype_size(*dtype))
    return std::nullopt;
  const auto* raw = reinterpret_cast<const uint8_t*>(values_[a[1]].s.data());
  Value v;
  if (*dtype == DType::kBool) {
    v.kind = Kind::kBool;
    v.i = raw[0] != 0;
  } else if (dtype_is_floating(*dtype)) {
    v.kind = Kind::kFloat;
    v.f = element_as_double(raw, *dtype);
  } else {
    const size_t width = dtype_size(*dtype);
    uint64_t bits = decode_le(raw, width);
    const bool is_signed =
        *dtype == DType::kI8 || *dtype == DType::kI16 || *dtype == DType::kI32 || *dtype == DType::kI64;
    if (is_signed && width < 8 && (bits >> (8 * width - 1)) & 1) bits |= ~uint64_t{0} << (8 * width);
    if (!is_signed && bits > static_cast<uint64_t>(INT64_MAX)) {
      v.kind = Kind::kFloat;  // a uint64 beyond int64: the nearest double
      v.f = static_cast<double>(bits);
    } else {
      v.kind = Kind::kInt;
      v.i = static_cast<int64_t>(bits);
    }
  }
  return push_new(std::move(v));
}

std::optional<Status> Machine::reduce_reconstructor(const ReduceCall& call) {
  const std::vector<Ref>& a = call.args;
  // copyreg._reconstructor(cls, base, state): cls.__new__ via base; BUILD sets the attributes.
  if (a.size() != 3) return std::nullopt;
  CKPT_ASSIGN_OR_RETURN(Ref o, make_object(describe(a[0]), Callable::kNone, kNoneRef, false));
  if (values_[a[2]].kind != Kind::kNone) values_[o].items[kObjectArgs] = a[2];
  return push(o);
}

std::optional<Status> Machine::reduce_numpy_object(const ReduceCall& call) {
  const Value& fn = values_[call.callable];
  const Ref args_ref = call.args_ref;
  CKPT_ASSIGN_OR_RETURN(
      Ref o, make_object(fn.callable == Callable::kNumpyDtype ? "numpy.dtype" : "numpy.ndarray", fn.callable,
                         args_ref, false));
  return push(o);
}

void Machine::note_use(Ref r, uint32_t use) {
  if (values_[r].kind != Kind::kGlobal) return;
  const auto it = global_index_.find(values_[r].s);
  if (it == global_index_.end()) return;
  PickleGlobal& g = globals_[it->second];
  g.uses |= use;
  if (use == kPickleUseOtherCall) ++g.other_calls;
}

// Loaders call some arguments: _rebuild_from_type_v2(func, new_type, args, state) runs func(*args),
// copyreg._reconstructor(cls, base, state) runs base.__init__, numpy's _reconstruct(subtype, ...)
// runs subtype.__new__, defaultdict(factory) calls factory on a missing key, and any function the
// gate does not model may call what it is given. So a global, or what getattr returned, passed as an
// argument counts as a call of it (kPickleUseOtherCall), except in the positions the reader itself
// interprets: a tensor rebuild function and tensor class given to _rebuild_from_type_v2, the class
// and `object` given to _reconstructor, ndarray given to _reconstruct. A global that torch.load's
// allowlist holds stays accepted (the loader may call it: it is harmless); what changes is that a
// profile class accepted only as data, or an attribute read, is no longer accepted when passed so.
void Machine::note_passed(Ref fn_ref, size_t k, Ref arg) {
  const Value& fn = values_[fn_ref];
  const Value& v = values_[arg];
  if (v.kind == Kind::kObject) {
    note_result_called(arg);
    return;
  }
  if (v.kind != Kind::kGlobal) return;
  const bool interpreted_position =
      (fn.callable == Callable::kRebuildFromType && k == 0 && v.callable == Callable::kRebuildTensor) ||
      (fn.callable == Callable::kRebuildFromType && k == 1 &&
       (v.s == "torch.Tensor" || v.s == "torch.nn.parameter.Parameter" || v.s == "torch.nn.Parameter")) ||
      (fn.callable == Callable::kReconstructor && k == 0) ||
      (fn.callable == Callable::kReconstructor && k == 1 &&
       (v.s == "builtins.object" || v.s == "__builtin__.object")) ||
      (fn.callable == Callable::kNumpyReconstruct && k == 0 && v.s == "numpy.ndarray");
  if (!interpreted_position) note_use(arg, kPickleUseOtherCall);
}

// What getattr returned is called (getattr(pathlib.PosixPath, 'unlink') then REDUCE): that is no
// enum member read, so the getattr is no data use.
void Machine::note_result_called(Ref obj) {
  const Value& o = values_[obj];
  if (o.i != 1 || (o.s != "builtins.getattr" && o.s != "__builtin__.getattr")) return;
  const auto it = global_index_.find(o.s);
  if (it == global_index_.end()) return;
  globals_[it->second].uses |= kPickleUseOtherCall;
  ++globals_[it->second].other_calls;
}

// The shapes of a REDUCE's arguments, for pickle_call_use (formats/pickle_globals.h).
uint32_t Machine::call_use(const std::vector<Ref>& args) const {
  std::vector<PickleArgShape> shapes;
  for (Ref a : args) {
    switch (values_[a].kind) {
      case Kind::kString: shapes.push_back(PickleArgShape::kString); break;
      case Kind::kNone:
      case Kind::kBool:
      case Kind::kInt:
      case Kind::kBigInt:
      case Kind::kFloat:
      case Kind::kBytes: shapes.push_back(PickleArgShape::kScalar); break;
      default: shapes.push_back(PickleArgShape::kOther); break;
    }
  }
  return pickle_call_use(shapes);
}

// NEWOBJ / NEWOBJ_EX: cls.__new__(cls, *args), never run; containers we know become containers.
Status Machine::new_object(Ref cls, Ref args, bool keyword_args) {
  if (values_[args].kind != Kind::kTuple) return fail("NEWOBJ arguments are not a tuple");
  const Value& c = values_[cls];
  if (c.kind != Kind::kGlobal && c.kind != Kind::kObject) return fail("NEWOBJ of a non-class");
  note_use(cls, values_[args].items.empty() && !keyword_args ? kPickleUseConstructed : kPickleUseOtherCall);
  if (c.kind == Kind::kObject) note_result_called(cls);
  for (size_t k = 0; k < values_[args].items.size(); ++k) note_passed(cls, k, values_[args].items[k]);
  if (c.kind == Kind::kGlobal) {
    if (c.callable == Callable::kOrderedDict || c.callable == Callable::kDefaultDict) {
      Value d;
      d.kind = Kind::kDict;
      return push_new(std::move(d));
    }
    if (c.callable == Callable::kSet) {
      Value l;
      l.kind = Kind::kSet;
      l.i = ends_with(c.s, ".frozenset");
      return push_new(std::move(l));
    }
  }
  CKPT_ASSIGN_OR_RETURN(Ref o, make_object(describe(cls), Callable::kNone, args, false));
  return push(o);
}

// BUILD: obj.__setstate__(state) or obj.__dict__.update(state), recorded, never run.
Status Machine::build(Ref obj, Ref state) {
  switch (values_[obj].kind) {
    case Kind::kDict:    // OrderedDict's _metadata and similar state carry no tensors
    case Kind::kList:    // a list subclass's attributes
    case Kind::kSet:     // a set subclass's attributes
    case Kind::kTensor:  // a Parameter's or tensor subclass's attributes
      return Status::ok();
    case Kind::kObject: break;
    default:
      return Status::not_supported(where_ + " @" + hex_offset(op_pos_) + ": BUILD on " + describe(obj));
  }
  if (values_[obj].callable == Callable::kNumpyReconstruct && numpy_array(obj, state)) return Status::ok();
  const Ref old = values_[obj].items[kObjectState];
  if (old != kNoneRef && values_[old].kind == Kind::kDict && values_[state].kind == Kind::kDict) {
    Value merged;  // a second BUILD updates __dict__ again; the first state may be shared, so copy
    merged.kind = Kind::kDict;
    merged.dict = values_[old].dict;
    merged.dict.insert(merged.dict.end(), values_[state].dict.begin(), values_[state].dict.end());
    CKPT_ASSIGN_OR_RETURN(Ref m, make(std::move(merged)));
    values_[obj].items[kObjectState] = m;
  } else {
    values_[obj].items[kObjectState] = state;
  }
  return Status::ok();
}

Status Machine::set_items(Ref dict, const std::vector<Ref>& kv) {
  if (kv.size() % 2) return fail("SETITEMS with an odd number of items");
  if (values_[dict].kind == Kind::kObject) {
    CKPT_ASSIGN_OR_RETURN(dict, content_of(dict, kObjectDict, Kind::kDict));
  }
  if (values_[dict].kind != Kind::kDict) return fail("SETITEM(S) on a non-dict");
  for (size_t k = 0; k < kv.size(); k += 2) values_[dict].dict.emplace_back(kv[k], kv[k + 1]);
  return Status::ok();
}

// torch.save's persistent id: ('storage', <StorageType>, key, location, numel), and in the legacy
// format a sixth item, None or (view key, offset, view numel) for a view into the root storage.
// ('module', cls, source file, source) (a legacy whole-module save) is the class, a name.
Status Machine::persistent_load(Ref pid_ref) {
  const Value& pid = values_[pid_ref];
  auto bad = [&](const std::string& why) {
    return fail("bad persistent id: " + why +
                " (expected ('storage', <Storage type>, key, location, numel[, view]))");
  };
  if (pid.kind != Kind::kTuple || pid.items.empty()) return bad("not a tuple");
  const Value& tag = values_[pid.items[0]];
  if (tag.kind == Kind::kString && tag.s == "module" && pid.items.size() == 4) return push(pid.items[1]);
  if (pid.items.size() != 5 && pid.items.size() != 6) return bad("not a 5- or 6-tuple");
  const Value& type = values_[pid.items[1]];
  const Value& key = values_[pid.items[2]];
  const Value& loc = values_[pid.items[3]];
  const Value& numel = values_[pid.items[4]];
  if (tag.kind != Kind::kString || tag.s != "storage") return bad("tag is not 'storage'");
  if (type.kind == Kind::kGlobal && type.callable != Callable::kStorageType &&
      starts_with(type.s, "torch.") && ends_with(type.s, "Storage")) {
    // A storage torch has and this reader does not (QInt8Storage, QUInt8Storage, QInt32Storage of a
    // quantized tensor): a valid file we cannot read, said so, never called damaged.
    return Status::not_supported(
        where_ + " @" + hex_offset(op_pos_) + ": storage type " + type.s +
        " (a quantized tensor's, or one this reader does not know): not read by ckptcheck");
  }
  if (type.kind != Kind::kGlobal || type.callable != Callable::kStorageType)
    return bad("second item is not a storage type");
  if (key.kind != Kind::kString || key.s.empty() || key.s.find('/') != std::string::npos || key.s == "..") {
    return bad("key is not a plain name");
  }
  if (loc.kind != Kind::kString) return bad("location is not a string");
  if (numel.kind != Kind::kInt || numel.i < 0) return bad("numel is not a non-negative int");
  Value s;
  s.kind = Kind::kStorage;
  s.dtype = type.dtype;
  s.untyped = type.untyped;
  s.s = key.s;
  s.location = loc.s;
  s.i = numel.i;
  if (pid.items.size() == 6 && values_[pid.items[5]].kind != Kind::kNone) {
    const Value& view = values_[pid.items[5]];
    if (view.kind != Kind::kTuple || view.items.size() != 3 || values_[view.items[1]].kind != Kind::kInt ||
        values_[view.items[2]].kind != Kind::kInt || values_[view.items[1]].i < 0 ||
        values_[view.items[2]].i < 0 || values_[view.items[1]].i > INT64_MAX / 2) {
      return bad("view is not (key, offset, numel)");
    }
    s.view_offset = values_[view.items[1]].i;
  }
  auto [it, added] = storage_index_.emplace(s.s, storages_.size());
  if (added) storages_.push_back(PickledStorage{s.s, s.dtype, s.i});
  return push_new(std::move(s));
}

// STOP is not in the table: it is the only opcode that ends the run.
constexpr Machine::OpTable Machine::op_table() {
  OpTable t;
  on(&t, "\x80\x95", &Machine::framing_op);
  on(&t, "(012", &Machine::stack_op);
  on(&t, "qr\x94hj", &Machine::memo_op);
  on(&t, "JKM\x8a\x8bG\x88\x89N", &Machine::scalar_op);
  on(&t, "XCB\x8c\x8d\x8e", &Machine::string_op);
  on(&t, "}])t\x85\x86\x87", &Machine::new_container_op);
  on(&t, "su", &Machine::set_item_op);
  on(&t, "ae", &Machine::append_op);
  on(&t, "c\x93", &Machine::global_op);
  on(&t, "Rb\x81\x92", &Machine::call_op);
  on(&t, "\x8f\x90\x91", &Machine::set_op);
  on(&t, "Q", &Machine::persistent_id_op);
  on(&t, "ILF", &Machine::text_number_op);
  on(&t, "STUV", &Machine::text_string_op);
  on(&t, "pgP", &Machine::text_memo_op);
  on(&t, "dl", &Machine::mark_container_op);
  on(&t, "io", &Machine::instantiate_op);
  on(&t, "\x82\x83\x84", &Machine::extension_op);
  on(&t, "\x96", &Machine::string_op);
  on(&t, "\x97\x98", &Machine::buffer_op);
  return t;
}

Result<Ref> Machine::run() {
  static constexpr OpTable kOps = op_table();
  while (pos_ < n_) {
    op_pos_ = pos_;
    const uint8_t op = p_[pos_++];
    if (op == '.') {  // STOP
      if (frame_end_ > pos_) {
        return ambiguous("STOP inside a frame that runs to " + hex_offset(frame_end_) +
                         ": CPython's unpickler has read the whole frame, so whatever follows this pickle "
                         "starts there for it, not after the STOP; refused (the readings could differ)");
      }
      return pop();
    }
    const Handler h = kOps.at[op];
    if (h == nullptr) {
      return Status::not_supported(where_ + " @" + hex_offset(op_pos_) + ": unsupported pickle opcode " +
                                   to_hex(&op, 1));
    }
    CKPT_RETURN_IF_ERROR((this->*h)(op));
    if (frame_end_ > op_pos_ && pos_ > frame_end_)
      return ambiguous("opcode runs past the end of its frame at " + hex_offset(frame_end_));
  }
  return Status::truncated(where_ + ": pickle ends without STOP after " + std::to_string(n_) + " bytes");
}

// PROTO, FRAME
Status Machine::framing_op(uint8_t op) {
  if (op == 0x95) {  // FRAME: the next `length` bytes are read whole, then run as usual
    if (frame_end_ > op_pos_) return ambiguous("FRAME inside a frame that runs to " + hex_offset(frame_end_));
    CKPT_RETURN_IF_ERROR(need(8));
    const uint64_t length = take_le(8);
    if (length > n_ - pos_)
      return Status::truncated(where_ + " @" + hex_offset(op_pos_) + ": FRAME of " + std::to_string(length) +
                               " bytes runs past the pickle's end");
    frame_end_ = pos_ + length;
    return Status::ok();
  }
  CKPT_RETURN_IF_ERROR(need(1));
  if (p_[pos_] > 5) return Status::not_supported(where_ + ": pickle protocol " + std::to_string(p_[pos_]));
  ++pos_;
  return Status::ok();
}

// MARK, POP, POP_MARK, DUP
Status Machine::stack_op(uint8_t op) {
  switch (op) {
    case '(':
      if (marks_.size() >= kPickleMaxStack) return fail("too many MARKs");
      marks_.push_back(stack_.size());
      return Status::ok();
    case '0': return pop().status();
    case '1': return pop_mark().status();
    default: {
      CKPT_ASSIGN_OR_RETURN(Ref r, top());
      return push(r);
    }
  }
}

// BINPUT, LONG_BINPUT, MEMOIZE, BINGET, LONG_BINGET. A GET pushes the stored Ref itself, so the
// value graph shares nodes; flattening has to cope (see Flattener).
Status Machine::memo_op(uint8_t op) {
  if (op == 0x94) return memo_put(memo_.size());
  const size_t k = op == 'q' || op == 'h' ? 1 : 4;
  CKPT_RETURN_IF_ERROR(need(k));
  const uint64_t key = take_le(k);
  return op == 'q' || op == 'r' ? memo_put(key) : memo_get(key);
}

// BININT, BININT1, BININT2, LONG1, BINFLOAT, NEWTRUE, NEWFALSE, NONE
Status Machine::scalar_op(uint8_t op) {
  Value v;
  switch (op) {
    case 'J':
    case 'K':
    case 'M': {  // BININT is signed; BININT1 and BININT2 are unsigned
      const size_t k = op == 'J' ? 4 : op == 'K' ? 1 : 2;
      CKPT_RETURN_IF_ERROR(need(k));
      v.kind = Kind::kInt;
      const uint64_t raw = take_le(k);
      v.i = op == 'J' ? static_cast<int32_t>(static_cast<uint32_t>(raw)) : static_cast<int64_t>(raw);
      break;
    }
    case 0x8a:
    case 0x8b: {  // LONG1, LONG4: little-endian two's complement of n bytes
      const size_t width = op == 0x8a ? 1 : 4;
      CKPT_RETURN_IF_ERROR(need(width));
      const uint64_t k = take_le(width);
      if (k > 8) {  // wider than int64: kept as sign and magnitude (py_value.h)
        if (k > n_ - pos_) return need(k);
        v = wide_twos_complement(p_ + pos_, k);
        pos_ += k;
        break;
      }
      CKPT_RETURN_IF_ERROR(need(k));
      uint64_t raw = take_le(k);
      if (k > 0 && k < 8 && (raw >> (8 * k - 1)) & 1) raw |= ~uint64_t{0} << (8 * k);
      v.kind = Kind::kInt;
      v.i = static_cast<int64_t>(raw);
      break;
    }
    case 'G': {  // big-endian, unlike every other operand
      CKPT_RETURN_IF_ERROR(need(8));
      const uint64_t bits = decode_be(p_ + pos_, 8);
      pos_ += 8;
      v.kind = Kind::kFloat;
      std::memcpy(&v.f, &bits, 8);
      break;
    }
    case 0x88:
    case 0x89:
      v.kind = Kind::kBool;
      v.i = op == 0x88;
      break;
    default: break;  // NONE: Value{} is None
  }
  return push_new(std::move(v));
}

// BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, SHORT_BINBYTES, BINBYTES, BINBYTES8
Status Machine::string_op(uint8_t op) {
  const size_t k = op == 0x8c || op == 'C' ? 1 : op == 0x8d || op == 0x8e || op == 0x96 ? 8 : 4;
  CKPT_RETURN_IF_ERROR(need(k));
  return push_string(op == 'C' || op == 'B' || op == 0x8e || op == 0x96 ? Kind::kBytes : Kind::kString,
                     take_le(k));
}

// EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, TUPLE, TUPLE1..3
Status Machine::new_container_op(uint8_t op) {
  Value v;
  v.kind = op == '}' ? Kind::kDict : op == ']' ? Kind::kList : Kind::kTuple;
  if (op == 't') {
    CKPT_ASSIGN_OR_RETURN(v.items, pop_mark());
  } else if (op >= 0x85) {
    const size_t k = op - 0x84;
    if (stack_.size() < floor() + k) return fail("stack underflow");
    v.items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
    stack_.resize(stack_.size() - k);
  }
  return push_new(std::move(v));
}

// SETITEM, SETITEMS
Status Machine::set_item_op(uint8_t op) {
  std::vector<Ref> kv;
  if (op == 's') {
    CKPT_ASSIGN_OR_RETURN(Ref v, pop());
    CKPT_ASSIGN_OR_RETURN(Ref k, pop());
    kv = {k, v};
  } else {
    CKPT_ASSIGN_OR_RETURN(kv, pop_mark());
  }
  CKPT_ASSIGN_OR_RETURN(Ref d, top());
  return set_items(d, kv);
}

// APPEND, APPENDS
Status Machine::append_op(uint8_t op) {
  std::vector<Ref> items;
  if (op == 'a') {
    CKPT_ASSIGN_OR_RETURN(Ref v, pop());
    items.push_back(v);
  } else {
    CKPT_ASSIGN_OR_RETURN(items, pop_mark());
  }
  CKPT_ASSIGN_OR_RETURN(Ref l, top());
  if (values_[l].kind == Kind::kObject) {
    CKPT_ASSIGN_OR_RETURN(l, content_of(l, kObjectList, Kind::kList));
  }
  if (values_[l].kind != Kind::kList) return fail("APPEND(S) on a non-list");
  values_[l].items.insert(values_[l].items.end(), items.begin(), items.end());
  return Status::ok();
}

// GLOBAL "module\nname\n", STACK_GLOBAL
Status Machine::global_op(uint8_t op) {
  if (op == 'c') {
    CKPT_ASSIGN_OR_RETURN(std::string module, take_line());
    CKPT_ASSIGN_OR_RETURN(std::string name, take_line());
    return push_global(module, name);
  }
  CKPT_ASSIGN_OR_RETURN(Ref name, pop());
  CKPT_ASSIGN_OR_RETURN(Ref module, pop());
  if (values_[name].kind != Kind::kString || values_[module].kind != Kind::kString) {
    return fail("STACK_GLOBAL operands are not strings");
  }
  return push_global(values_[module].s, values_[name].s);
}

// REDUCE, NEWOBJ, NEWOBJ_EX, BUILD
Status Machine::call_op(uint8_t op) {
  if (op == 'b') {
    CKPT_ASSIGN_OR_RETURN(Ref state, pop());
    CKPT_ASSIGN_OR_RETURN(Ref obj, top());
    return build(obj, state);
  }
  bool keyword_args = false;
  if (op == 0x92) {  // NEWOBJ_EX: cls, args, kwargs; keyword arguments are dropped (never called)
    CKPT_ASSIGN_OR_RETURN(Ref kwargs, pop());
    keyword_args = !(values_[kwargs].kind == Kind::kDict && values_[kwargs].dict.empty());
  }
  CKPT_ASSIGN_OR_RETURN(Ref args, pop());
  CKPT_ASSIGN_OR_RETURN(Ref fn, pop());
  return op == 'R' ? reduce(fn, args) : new_object(fn, args, keyword_args);
}

// EMPTY_SET, ADDITEMS, FROZENSET (protocol 4).
Status Machine::set_op(uint8_t op) {
  if (op == 0x8f) {
    Value v;
    v.kind = Kind::kSet;
    return push_new(std::move(v));
  }
  CKPT_ASSIGN_OR_RETURN(std::vector<Ref> items, pop_mark());
  if (op == 0x91) {
    Value v;
    v.kind = Kind::kSet;
    v.i = 1;
    v.items = std::move(items);
    return push_new(std::move(v));
  }
  CKPT_ASSIGN_OR_RETURN(Ref l, top());
  if (values_[l].kind != Kind::kSet || values_[l].i != 0) return fail("ADDITEMS on a non-set");
  values_[l].items.insert(values_[l].items.end(), items.begin(), items.end());
  return Status::ok();
}

namespace {

// The canonical decimal text pickle writes (repr of an int): an optional '-', then digits with no
// leading zero. CPython's readers accept more (C's strtol takes "010" as octal, Python's int() takes
// "0o10", "1_0" and blanks), and they do not all agree, so anything else is refused.
bool canonical_decimal(const std::string& s) {
  const size_t start = !s.empty() && s[0] == '-' ? 1 : 0;
  if (start == s.size() || (s[start] == '0' && s.size() > start + 1)) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(start), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// A decimal integer too wide for int64, as the machine keeps wide ints: "0x<hex>", or "-0x<hex>"
// below zero (the spelling wide_twos_complement gives LONG1's).
std::string wide_decimal(const std::string& s) {
  const bool negative = s[0] == '-';
  std::string digits = s.substr(negative ? 1 : 0);
  std::string hex;
  while (!(digits.size() == 1 && digits[0] == '0')) {  // divide by 16 until nothing is left
    std::string quotient;
    int remainder = 0;
    for (char c : digits) {
      const int cur = remainder * 10 + (c - '0');
      if (!quotient.empty() || cur / 16) quotient += static_cast<char>('0' + cur / 16);
      remainder = cur % 16;
    }
    hex.insert(hex.begin(), "0123456789abcdef"[remainder]);
    digits = quotient.empty() ? "0" : quotient;
  }
  return std::string(negative ? "-" : "") + "0x" + (hex.size() % 2 ? "0" : "") + hex;
}

}  // namespace

// INT, LONG, FLOAT: protocol 0's numbers, one per line.
Status Machine::text_number_op(uint8_t op) {
  CKPT_ASSIGN_OR_RETURN(std::string text, take_line(op == 'F' ? 64 : 4096));
  Value v;
  if (op == 'I' && (text == "00" || text == "01")) {  // protocol 0's False and True
    v.kind = Kind::kBool;
    v.i = text == "01";
    return push_new(std::move(v));
  }
  if (op == 'L' && !text.empty() && text.back() == 'L') text.pop_back();
  if (op == 'F') {
    // repr(float): digits, '.', exponent, or inf / nan. Anything else is refused (C's strtod and
    // Python's float() differ on blanks, '_' and hex).
    static const char kAllowed[] = "0123456789.eE+-";
    const bool special = text == "inf" || text == "-inf" || text == "nan";
    if (text.empty() || (!special && text.find_first_not_of(kAllowed) != std::string::npos))
      return ambiguous("FLOAT operand '" + utf8_clean(text) + "' is not a float as pickle writes it");
    char* end = nullptr;
    v.kind = Kind::kFloat;
    v.f = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size())
      return ambiguous("FLOAT operand '" + utf8_clean(text) + "' is not a float as pickle writes it");
    return push_new(std::move(v));
  }
  if (!canonical_decimal(text)) {
    return ambiguous(std::string(op == 'I' ? "INT" : "LONG") + " operand '" + utf8_clean(text.substr(0, 64)) +
                     "' is not a plain decimal (CPython's readers would not agree on it)");
  }
  errno = 0;
  char* end = nullptr;
  const long long i = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE) {
    v.kind = Kind::kBigInt;
    v.s = wide_decimal(text);
  } else {
    v.kind = Kind::kInt;
    v.i = i;
  }
  return push_new(std::move(v));
}

namespace {

// UTF-8 of one code point (below 0x110000, not a surrogate: checked by the caller).
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool valid_utf8(const std::string& s) {
  return utf8_clean(s) == s;
}

// Python's codecs.escape_decode, as STRING's quoted operand is read: \\ \' \" \a \b \f \n \r \t \v,
// \xhh (exactly two hex digits), \ooo (one to three octal digits); any other backslash stays. Empty
// optional when the escape is malformed (CPython raises).
std::optional<std::string> escape_decode(const std::string& in) {
  std::string out;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] != '\\' || k + 1 == in.size()) {
      if (in[k] == '\\') return std::nullopt;  // a trailing backslash: "\\ at end of string"
      out += in[k];
      continue;
    }
    const char c = in[++k];
    switch (c) {
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': {
        const int hi = k + 1 < in.size() ? hex_digit(in[k + 1]) : -1;
        const int lo = k + 2 < in.size() ? hex_digit(in[k + 2]) : -1;
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>(hi * 16 + lo);
        k += 2;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int value = c - '0';
          for (int more = 0; more < 2 && k + 1 < in.size() && in[k + 1] >= '0' && in[k + 1] <= '7'; ++more)
            value = value * 8 + (in[++k] - '0');
          out += static_cast<char>(value & 0xff);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

// STRING, BINSTRING, SHORT_BINSTRING (Python 2's str, decoded as torch.load decodes them: UTF-8),
// UNICODE (protocol 0's str, raw-unicode-escape).
Status Machine::text_string_op(uint8_t op) {
  std::string raw;
  if (op == 'S') {
    CKPT_ASSIGN_OR_RETURN(std::string line, take_line(n_));
    if (line.size() < 2 || line.front() != line.back() || (line.front() != '\'' && line.front() != '"'))
      return fail("STRING operand is not quoted");
    const auto decoded = escape_decode(line.substr(1, line.size() - 2));
    if (!decoded) return fail("STRING operand has a malformed escape");
    raw = *decoded;
  } else if (op == 'T' || op == 'U') {
    const size_t k = op == 'T' ? 4 : 1;
    CKPT_RETURN_IF_ERROR(need(k));
    const uint64_t length = take_le(k);
    if (op == 'T' && length > 0x7fffffff) return fail("BINSTRING has a negative byte count");
    if (length > n_ - pos_) return need(length);
    raw.assign(reinterpret_cast<const char*>(p_ + pos_), length);
    pos_ += length;
  } else {  // UNICODE: bytes are Latin-1 code points, except \uXXXX and \UXXXXXXXX
    CKPT_ASSIGN_OR_RETURN(std::string line, take_line(n_));
    Value v;
    v.kind = Kind::kString;
    for (size_t k = 0; k < line.size(); ++k) {
      const auto c = static_cast<uint8_t>(line[k]);
      if (c != '\\') {
        append_utf8(v.s, c);
        continue;
      }
      // pickle escapes every backslash it writes as \u005c, so a bare one is never its own writing;
      // how CPython counts runs of them is subtle, so anything but one escape is refused.
      const char kind = k + 1 < line.size() ? line[k + 1] : '\0';
      const size_t digits = kind == 'u' ? 4 : kind == 'U' ? 8 : 0;
      if (digits == 0 || k + 2 + digits > line.size())
        return ambiguous("UNICODE operand has a backslash that is not a \\u or \\U escape");
      uint32_t cp = 0;
      for (size_t d = 0; d < digits; ++d) {
        const int h = hex_digit(line[k + 2 + d]);
        if (h < 0) return fail("UNICODE operand has a malformed \\u escape");
        cp = cp * 16 + static_cast<uint32_t>(h);
      }
      if (cp >= 0x110000 || (cp >= 0xd800 && cp < 0xe000))
        return fail("UNICODE operand escapes a surrogate or a code point past U+10FFFF");
      append_utf8(v.s, cp);
      k += 1 + digits;
    }
    return push_new(std::move(v));
  }
  // torch.load passes encoding='utf-8' for Python 2 strings (pickle.load's default, ASCII, refuses
  // more); bytes that are no UTF-8 make it raise, so they are refused here too.
  if (!valid_utf8(raw)) return fail("Python 2 string is not UTF-8 (torch.load's unpickler would raise)");
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(raw);
  return push_new(std::move(v));
}

// PUT, GET (decimal memo keys), PERSID (a persistent id as text: torch.load refuses it, as does
// pickle.load without persistent_load).
Status Machine::text_memo_op(uint8_t op) {
  CKPT_ASSIGN_OR_RETURN(std::string text, take_line(op == 'P' ? 4096 : 32));
  if (op == 'P') {
    Value v;
    v.kind = Kind::kString;
    v.s = text;
    CKPT_ASSIGN_OR_RETURN(Ref r, make(std::move(v)));
    return persistent_load(r);
  }
  if (!canonical_decimal(text) || text[0] == '-')
    return ambiguous(std::string(op == 'p' ? "PUT" : "GET") + " key '" + utf8_clean(text.substr(0, 32)) +
                     "' is not a plain non-negative decimal");
  errno = 0;
  const unsigned long long key = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return fail("memo key out of range");
  return op == 'p' ? memo_put(key) : memo_get(key);
}

// DICT, LIST: the items above the last MARK.
Status Machine::mark_container_op(uint8_t op) {
  CKPT_ASSIGN_OR_RETURN(std::vector<Ref> items, pop_mark());
  Value v;
  if (op == 'l') {
    v.kind = Kind::kList;
    v.items = std::move(items);
    return push_new(std::move(v));
  }
  if (items.size() % 2) return fail("DICT with an odd number of items");
  v.kind = Kind::kDict;
  for (size_t k = 0; k < items.size(); k += 2) v.dict.emplace_back(items[k], items[k + 1]);
  return push_new(std::move(v));
}

// INST "module\nname\n" and OBJ: CPython's _instantiate(cls, args) calls cls(*args), or with no
// arguments and a class only cls.__new__(cls): the same as REDUCE or NEWOBJ(cls, ()).
Status Machine::instantiate_op(uint8_t op) {
  if (op == 'i') {
    CKPT_ASSIGN_OR_RETURN(std::string module, take_line());
    CKPT_ASSIGN_OR_RETURN(std::string name, take_line());
    CKPT_ASSIGN_OR_RETURN(std::vector<Ref> args, pop_mark());
    CKPT_ASSIGN_OR_RETURN(Ref cls, make_global(module, name));
    return instantiate(cls, std::move(args));
  }
  CKPT_ASSIGN_OR_RETURN(std::vector<Ref> items, pop_mark());
  if (items.empty()) return fail("OBJ without a class");
  const Ref cls = items.front();
  return instantiate(cls, std::vector<Ref>(items.begin() + 1, items.end()));
}

Status Machine::instantiate(Ref cls, std::vector<Ref> args) {
  Value t;
  t.kind = Kind::kTuple;
  const bool no_args = args.empty();
  t.items = std::move(args);
  CKPT_ASSIGN_OR_RETURN(Ref tuple, make(std::move(t)));
  return no_args ? new_object(cls, tuple, false) : reduce(cls, tuple);
}

// EXT1, EXT2, EXT4: a global looked up in copyreg's extension registry, which the loading process
// fills; what it names cannot be known from the file, so it is listed as a global of its own
// ("copyreg._extension_registry[7]") that no allowlist holds.
Status Machine::extension_op(uint8_t op) {
  const size_t k = op == 0x82 ? 1 : op == 0x83 ? 2 : 4;
  CKPT_RETURN_IF_ERROR(need(k));
  const uint64_t code = take_le(k);
  return push_global("copyreg", "_extension_registry[" + std::to_string(code) + "]");
}

// NEXT_BUFFER, READONLY_BUFFER (protocol 5's out-of-band data): pickle.load and torch.load pass no
// buffers, so they raise; nothing a checkpoint loader reads.
Status Machine::buffer_op(uint8_t) {
  return Status::not_supported(where_ + " @" + hex_offset(op_pos_) +
                               ": out-of-band buffer (protocol 5): no checkpoint loader supplies one");
}

// BINPERSID
Status Machine::persistent_id_op(uint8_t) {
  CKPT_ASSIGN_OR_RETURN(Ref pid, pop());
  return persistent_load(pid);
}

// Strings from the file need not be UTF-8, but everything downstream dumps JSON (which throws on
// invalid UTF-8), so invalid sequences become U+FFFD here.
std::string utf8_clean(const std::string& s) {
  const std::string dumped = nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const auto j = nlohmann::json::parse(dumped, nullptr, false);
  return j.is_string() ? j.get<std::string>() : std::string();
}

// Turns the VM's value graph into tensors and metadata. The graph is not a tree: a memo GET pushes
// a Ref again, so a few hundred bytes can describe 2^30 paths, and APPEND can close cycles. Hence
// contains_tensor() is computed once per value, a tensor or tensor-holding container is expanded
// at its first path only (later paths get an alias), and everything emitted is charged to a budget
// that grows with the pickle's size.
class Flattener {
 public:
  Flattener(const std::vector<Value>& values, const std::string& where, size_t pickle_size)
      : values_(values),
        where_(where),
        pickle_size_(pickle_size),
        budget_(pickle_output_limit(pickle_size)),
        height_(values.size(), 0),
        has_tensor_(values.size(), false),
        state_(values.size(), State::kNew) {}

  Status run(Ref root, PickledStateDict* out) {
    measure(root);
    return flatten(root, "", 0, out);
  }
  // After run(): the name a tensor value was first listed under.
  const std::string* tensor_name(Ref r) const {
    const auto it = first_path_.find(r);
    return it == first_path_.end() ? nullptr : &it->second;
  }

 private:
  // Longest chain of items/dict values below a value, saturated: a chain this long cannot be
  // flattened from any depth, and a cycle is an endless chain.
  static constexpr uint8_t kEndless = kPickleMaxNesting + 1;
  // What one emitted value costs besides its strings: a JSON node and its place in the parent.
  static constexpr size_t kValueCost = 32;

  std::unordered_set<std::string> names_used_;  // every tensor name listed so far

  enum class State : uint8_t { kNew, kOnPath, kDone };

  static size_t child_count(const Value& v) {
    return v.kind == Kind::kTensor || v.kind == Kind::kStorage ? 0 : v.items.size() + v.dict.size();
  }
  static Ref child(const Value& v, size_t k) {
    return k < v.items.size() ? v.items[k] : v.dict[k - v.items.size()].second;
  }

  void measure(Ref root);
  // Whether flatten() must expand `r` at `depth`: it holds a tensor, or it nests too deep for a
  // metadata leaf, in which case expanding reports the depth with the path.
  bool contains_tensor(Ref r, size_t depth) const {
    return has_tensor_[r] || depth + height_[r] > kPickleMaxNesting;
  }
  Status flatten(Ref r, const std::string& prefix, size_t depth, PickledStateDict* out);
  // The name a tensor is listed under: its path, made unique where two tensors' paths spell the same
  // text ({'a.b': t1, 'a': {'b': t2}}, {0: t1, '0': t2}): the later one "a.b#2", so no reader merges
  // two tensors into one.
  std::string unique_tensor_name(const std::string& path) {
    std::string name = path.empty() ? "tensor" : utf8_clean(path);
    if (names_used_.insert(name).second) return name;
    for (size_t k = 2;; ++k) {
      std::string candidate = name + "#" + std::to_string(k);
      if (names_used_.insert(candidate).second) return candidate;
    }
  }
  Result<nlohmann::json> to_json(Ref r, size_t depth, const std::string& path);
  Status spend(size_t bytes, const std::string& path);
  std::optional<std::string> key_name(Ref k) const {
    const Value& key = values_[k];
    if (key.kind == Kind::kString) return key.s;
    if (key.kind == Kind::kInt) return std::to_string(key.i);
    if (key.kind == Kind::kBigInt) return "int:" + key.s;
    return std::nullopt;
  }
  bool plain_dict(Ref r) const {
    const Value& v = values_[r];
    if (v.kind != Kind::kDict) return false;
    for (const auto& kv : v.dict) {
      if (!key_name(kv.first)) return false;
    }
    return true;
  }
  // The named parts of a container that flattening and to_json walk (see PickledStateDict).
  std::vector<std::pair<std::string, Ref>> parts(Ref r) const;
  Status too_deep(const std::string& prefix, const char* why) const {
    return Status::corruption(where_ + ": '" + prefix + "' nests deeper than " +
                              std::to_string(kPickleMaxNesting) + why);
  }

  const std::vector<Value>& values_;
  const std::string& where_;
  const size_t pickle_size_;
  const size_t budget_;
  size_t spent_ = 0;
  std::vector<uint8_t> height_;
  std::vector<bool> has_tensor_;
  std::vector<State> state_;  // measure() uses it as DFS colours, flatten() as expansion state
  std::unordered_map<Ref, std::string> first_path_;
  std::unordered_map<Ref, size_t> first_tensor_;  // index in the output of a tensor's first listing
};

std::vector<std::pair<std::string, Ref>> Flattener::parts(Ref r) const {
  const Value& v = values_[r];
  std::vector<std::pair<std::string, Ref>> out;
  if (v.kind == Kind::kDict) {
    for (size_t k = 0; k < v.dict.size(); ++k) {
      out.emplace_back(key_name(v.dict[k].first).value_or("__key" + std::to_string(k)), v.dict[k].second);
    }
  } else if (v.kind == Kind::kObject) {
    const Value& args = values_[v.items[kObjectArgs]];
    if (args.kind != Kind::kNone && !(args.kind == Kind::kTuple && args.items.empty()))
      out.emplace_back("__args__", v.items[kObjectArgs]);
    const Ref state = v.items[kObjectState];
    if (plain_dict(state)) {
      for (const auto& [key, val] : values_[state].dict) out.emplace_back(*key_name(key), val);
    } else if (values_[state].kind != Kind::kNone) {
      out.emplace_back("__state__", state);
    }
    if (v.items[kObjectList] != kNoneRef) out.emplace_back("__items__", v.items[kObjectList]);
    if (v.items[kObjectDict] != kNoneRef) out.emplace_back("__dict__", v.items[kObjectDict]);
  } else {
    for (size_t k = 0; k < v.items.size(); ++k) out.emplace_back(std::to_string(k), v.items[k]);
  }
  return out;
}

// Iterative post-order DFS: each value and edge is visited once, and a chain of a million nested
// lists cannot overflow the native stack.
void Flattener::measure(Ref root) {
  auto fold = [this](Ref parent, Ref c) {
    const uint8_t h = state_[c] == State::kOnPath ? kEndless : height_[c];
    height_[parent] = std::max<uint8_t>(height_[parent], std::min<uint8_t>(kEndless, h + 1));
    if (has_tensor_[c]) has_tensor_[parent] = true;
  };
  std::vector<std::pair<Ref, size_t>> stack{{root, 0}};
  state_[root] = State::kOnPath;
  has_tensor_[root] = values_[root].kind == Kind::kTensor;
  while (!stack.empty()) {
    const Ref r = stack.back().first;
    const Value& v = values_[r];
    if (stack.back().second < child_count(v)) {
      const Ref c = child(v, stack.back().second++);
      if (state_[c] == State::kNew) {
        state_[c] = State::kOnPath;
        has_tensor_[c] = values_[c].kind == Kind::kTensor;
        stack.emplace_back(c, 0);
      } else {
        fold(r, c);
      }
      continue;
    }
    state_[r] = State::kDone;
    stack.pop_back();
    if (!stack.empty()) fold(stack.back().first, r);
  }
  std::fill(state_.begin(), state_.end(), State::kNew);
}

Status Flattener::spend(size_t bytes, const std::string& path) {
  if (bytes > budget_ - spent_) {
    return Status::corruption(where_ + ": '" + path + "': flattening emits more than " +
                              std::to_string(budget_) + " bytes of names and metadata, the limit for a " +
                              std::to_string(pickle_size_) +
                              "-byte pickle (memo references repeat shared values at every path)");
  }
  spent_ += bytes;
  return Status::ok();
}

Status Flattener::flatten(Ref r, const std::string& prefix, size_t depth, PickledStateDict* out) {
  if (depth > kPickleMaxNesting) return too_deep(prefix, "");
  CKPT_RETURN_IF_ERROR(spend(kValueCost + prefix.size(), prefix));
  const Value& v = values_[r];
  if (v.kind != Kind::kTensor && !contains_tensor(r, depth)) {
    CKPT_ASSIGN_OR_RETURN(nlohmann::json j, to_json(r, depth, prefix));
    out->metadata[prefix.empty() ? std::string("value") : utf8_clean(prefix)] = std::move(j);
    return Status::ok();
  }
  if (state_[r] == State::kOnPath) return too_deep(prefix, " (it contains itself)");
  if (state_[r] == State::kDone) {
    // The first expansion passed the depth bound at its own depth; this path may be deeper.
    if (depth + height_[r] > kPickleMaxNesting) return too_deep(prefix, "");
    const std::string& first = first_path_[r];
    if (v.kind == Kind::kTensor) {  // one tensor object under a second name: listed, marked
      PickledTensor alias = out->tensors[first_tensor_[r]];
      CKPT_RETURN_IF_ERROR(spend(kValueCost * (2 + alias.shape.size()) + alias.inline_bytes.size(), prefix));
      alias.name = unique_tensor_name(prefix);
      alias.alias_of = first;
      out->tensors.push_back(std::move(alias));
      return Status::ok();
    }
    // A container of tensors reached again (blocks sharing one submodule, tied layers): walked again
    // under this path, so every name torch.load gives is listed, each tensor as an alias of its first
    // name. The budget bounds what a hostile pickle of shared references can make of that.
    state_[r] = State::kOnPath;
    auto again = [&](const std::string& key) { return prefix.empty() ? key : prefix + "." + key; };
    for (const auto& [name, child] : parts(r))
      CKPT_RETURN_IF_ERROR(flatten(child, again(name), depth + 1, out));
    state_[r] = State::kDone;
    return Status::ok();
  }
  if (v.kind == Kind::kTensor) {
    const Value& st = values_[v.items[0]];
    const std::string* inline_bytes = st.items.empty() ? nullptr : &values_[st.items[0]].s;
    CKPT_RETURN_IF_ERROR(spend(st.s.size() + st.location.size() + 2 * kValueCost * v.shape.size() +
                                   (inline_bytes ? inline_bytes->size() : 0),
                               prefix));
    if (v.i > 0 && st.view_offset > INT64_MAX - v.i) {
      return Status::corruption(where_ + ": tensor '" + prefix + "': storage offset " + std::to_string(v.i) +
                                " overflows in its view");
    }
    PickledTensor t;
    t.name = unique_tensor_name(prefix);
    t.dtype = v.dtype;
    t.storage_key = st.s;
    t.location = utf8_clean(st.location);
    // Untyped storage counts bytes: a tensor sees the whole elements of its dtype that fit.
    t.storage_numel = st.untyped ? st.i / static_cast<int64_t>(dtype_size(v.dtype)) : st.i;
    t.storage_nbytes = st.untyped ? st.i : -1;
    t.storage_offset = st.view_offset + v.i;
    t.shape = v.shape;
    t.stride = v.stride;
    if (inline_bytes) {
      t.inline_payload = true;
      t.inline_bytes = *inline_bytes;
    }
    out->tensors.push_back(std::move(t));
    first_path_[r] = out->tensors.back().name;
    first_tensor_[r] = out->tensors.size() - 1;
    state_[r] = State::kDone;
    return Status::ok();
  }
  state_[r] = State::kOnPath;
  auto child_path = [&](const std::string& key) { return prefix.empty() ? key : prefix + "." + key; };
  for (const auto& [name, child] : parts(r))
    CKPT_RETURN_IF_ERROR(flatten(child, child_path(name), depth + 1, out));
  first_path_[r] = utf8_clean(prefix);
  state_[r] = State::kDone;
  return Status::ok();
}

// Metadata keeps the tree Python sees: a value shared by two paths (an optimizer's betas tuple,
// a memoized string) is written out at both. The budget is what bounds that.
Result<nlohmann::json> Flattener::to_json(Ref r, size_t depth, const std::string& path) {
  auto where = [&] { return where_ + ": '" + path + "'"; };
  if (depth > kPickleMaxNesting)
    return Status::corruption(where() + ": nesting deeper than " + std::to_string(kPickleMaxNesting));
  const Value& v = values_[r];
  // Charged before copying, so a huge string repeated at many paths is refused, not copied.
  CKPT_RETURN_IF_ERROR(spend(kValueCost + (v.kind == Kind::kBytes ? 2 : 1) * v.s.size(), path));
  switch (v.kind) {
    case Kind::kNone: return nlohmann::json();
    case Kind::kBool: return nlohmann::json(v.i != 0);
    case Kind::kInt: return nlohmann::json(v.i);
    case Kind::kBigInt: return nlohmann::json("int:" + v.s);
    case Kind::kFloat: return nlohmann::json(v.f);
    case Kind::kString: return nlohmann::json(utf8_clean(v.s));
    case Kind::kBytes:
      return nlohmann::json("bytes:" + to_hex(reinterpret_cast<const uint8_t*>(v.s.data()), v.s.size()));
    case Kind::kTuple:
    case Kind::kList:
    case Kind::kSet: {
      nlohmann::json a = nlohmann::json::array();
      for (Ref item : v.items) {
        CKPT_ASSIGN_OR_RETURN(nlohmann::json j, to_json(item, depth + 1, path));
        a.push_back(std::move(j));
      }
      return a;
    }
    case Kind::kDict:
      if (!plain_dict(r)) {  // keys that JSON cannot hold: a list of [key, value] pairs
        nlohmann::json pairs = nlohmann::json::array();
        for (const auto& [k, val] : v.dict) {
          CKPT_ASSIGN_OR_RETURN(nlohmann::json jk, to_json(k, depth + 1, path));
          CKPT_ASSIGN_OR_RETURN(nlohmann::json jv, to_json(val, depth + 1, path));
          pairs.push_back(nlohmann::json::array({std::move(jk), std::move(jv)}));
        }
        return nlohmann::json{{"__pairs__", std::move(pairs)}};
      }
      [[fallthrough]];
    case Kind::kObject: {
      nlohmann::json o = nlohmann::json::object();
      if (v.kind == Kind::kObject && v.s != "argparse.Namespace")
        o[v.i ? "__call__" : "__class__"] = utf8_clean(v.s);
      for (const auto& [name, val] : parts(r)) {
        CKPT_RETURN_IF_ERROR(spend(name.size(), path));
        CKPT_ASSIGN_OR_RETURN(nlohmann::json j, to_json(val, depth + 1, path));
        o[utf8_clean(name)] = std::move(j);
      }
      return o;
    }
    case Kind::kGlobal: return nlohmann::json("global:" + utf8_clean(v.s));
    case Kind::kStorage: return nlohmann::json("storage:" + utf8_clean(v.s));
    case Kind::kTensor: break;
  }
  return Status::corruption(where() + ": a tensor where metadata was expected");
}

// The typed tree (py_value.h) of the values below the root, built after a successful flatten: every
// path below the root is then known to be at most kPickleMaxNesting deep, so the graph has no cycle
// and the recursion is shallow. One node per value, shared where the pickle shares (a memo GET), so
// its size is the number of values, never of paths.
class TypedTreeBuilder {
 public:
  static PyType type_of(const Value& v) {
    switch (v.kind) {
      case Kind::kNone: return PyType::kNone;
      case Kind::kBool: return PyType::kBool;
      case Kind::kInt: return PyType::kInt;
      case Kind::kBigInt: return PyType::kBigInt;
      case Kind::kFloat: return PyType::kFloat;
      case Kind::kString: return PyType::kStr;
      case Kind::kBytes: return PyType::kBytes;
      case Kind::kTuple: return PyType::kTuple;
      case Kind::kList: return PyType::kList;
      case Kind::kSet: return v.i ? PyType::kFrozenSet : PyType::kSet;
      case Kind::kDict: return PyType::kDict;
      case Kind::kGlobal: return PyType::kGlobal;
      case Kind::kStorage: return PyType::kStorage;
      case Kind::kTensor: return PyType::kTensor;
      case Kind::kObject: return PyType::kObject;
    }
    return PyType::kNone;
  }

  TypedTreeBuilder(const std::vector<Value>& values, const Flattener& flattened)
      : values_(values), flattened_(flattened) {}

  PyValuePtr build(Ref r) {
    const auto done = built_.find(r);
    if (done != built_.end()) return done->second;
    const Value& v = values_[r];
    PyValue out;
    out.type = type_of(v);
    // A set's `i` is its frozenness (now in the type), a tensor's its storage offset (its bytes are
    // compared as a tensor's, by name).
    out.i = v.kind == Kind::kSet || v.kind == Kind::kTensor ? 0 : v.i;
    out.f = v.f;
    out.s = v.s;  // a str keeps the file's bytes, valid UTF-8 or not: compared as they are
    if (v.kind == Kind::kTensor) {
      const std::string* name = flattened_.tensor_name(r);
      out.s = name ? *name : std::string();
    } else if (v.kind != Kind::kStorage) {  // a numpy array's storage holds its bytes: not a value
      for (Ref item : v.items)
        out.items.push_back(v.kind == Kind::kObject && item == kNoneRef ? nullptr : build(item));
      for (const auto& [k, val] : v.dict) out.dict.emplace_back(build(k), build(val));
    }
    PyValuePtr node = std::make_shared<const PyValue>(std::move(out));
    built_.emplace(r, node);
    return node;
  }

 private:
  const std::vector<Value>& values_;
  const Flattener& flattened_;
  std::unordered_map<Ref, PyValuePtr> built_;
};

}  // namespace

bool pickle_global_is_interpreted(const std::string& module, const std::string& name) {
  return global_value(module, name).callable != Callable::kNone;
}

size_t pickle_output_limit(size_t pickle_size) {
  if (pickle_size >= (kPickleMaxOutput - kPickleOutputBase) / kPickleOutputPerByte) return kPickleMaxOutput;
  return kPickleOutputBase + kPickleOutputPerByte * pickle_size;
}

Result<PickledStateDict> read_tensor_pickle(const uint8_t* data, size_t size, const std::string& where) {
  Machine m(data, size, where);
  Result<Ref> ran = m.run();
  if (!ran.is_ok()) {
    std::vector<PickleGlobal> named = m.take_globals();
    named.erase(std::remove_if(named.begin(), named.end(),
                               [](const PickleGlobal& g) { return g.risk == PickleGlobalRisk::kSafe; }),
                named.end());
    if (named.empty()) return ran.status();
    std::string list;
    for (size_t k = 0; k < named.size() && k < 8; ++k) {
      list += (k ? ", " : "") + named[k].name + " (" + pickle_global_risk_name(named[k].risk) + ", @" +
              hex_offset(named[k].first_offset) + ")";
    }
    if (named.size() > 8) list += " and " + std::to_string(named.size() - 8) + " more";
    return ran.status().with_note("before that it names " + list +
                                  ", which an unpickler imports (and may call) before it fails there");
  }
  const Ref root = *ran;
  PickledStateDict out;
  Flattener flattener(m.values(), where, size);
  CKPT_RETURN_IF_ERROR(flattener.run(root, &out));
  out.value = TypedTreeBuilder(m.values(), flattener).build(root);
  out.globals = m.take_globals();
  out.storages = m.take_storages();
  out.end_offset = m.position();
  return out;
}

std::vector<PickleGlobal> pickle_globals_before_error(const uint8_t* data, size_t size) {
  Machine m(data, size, "");
  (void)m.run();  // success or not, what it named is what an unpickler had imported by then
  return m.take_globals();
}

bool is_legacy_magic(const PickledStateDict& pickle) {
  const auto it = pickle.metadata.find("value");
  return pickle.tensors.empty() && it != pickle.metadata.end() && it->is_string() &&
         it->get<std::string>() == "int:0x1950a86a20f9469cfc6c";
}

}  // namespace ckpt
