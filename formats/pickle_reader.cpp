#include "formats/pickle_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "base/byte_coding.h"
#include "base/sha256.h"

namespace ckpt {

namespace {

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kBytes,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kStorage,
  kTensor
};

enum class Callable : uint8_t { kNone, kOrderedDict, kRebuildTensor, kRebuildParameter, kStorageType };

using Ref = uint32_t;

// One value in the VM's arena. Values refer to each other by index, so a pickle that builds a
// cycle (a list appended to itself) cannot leak or loop: traversal is depth-bounded.
// Indices also let two paths share one value (memo GET), which the Flattener accounts for.
struct Value {
  Kind kind = Kind::kNone;
  Callable callable = Callable::kNone;  // for kGlobal
  DType dtype = DType::kF32;            // for kGlobal storage types, kStorage, kTensor
  int64_t i = 0;                        // kInt, kBool; storage numel; tensor storage offset
  double f = 0;
  std::string s;           // kString, kBytes; global name; storage key
  std::string location;    // kStorage
  std::vector<Ref> items;  // kTuple, kList; kTensor: {storage}
  std::vector<std::pair<Ref, Ref>> dict;
  std::vector<int64_t> shape, stride;  // kTensor
};

struct StorageType {
  const char* name;
  DType dtype;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::kF32},  {"HalfStorage", DType::kF16}, {"BFloat16Storage", DType::kBF16},
    {"DoubleStorage", DType::kF64}, {"LongStorage", DType::kI64}, {"IntStorage", DType::kI32},
    {"ShortStorage", DType::kI16},  {"CharStorage", DType::kI8},  {"ByteStorage", DType::kU8},
    {"BoolStorage", DType::kBool},
};

std::string hex_offset(size_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%zx", v);
  return buf;
}

class Machine {
 public:
  Machine(const uint8_t* data, size_t size, std::string where)
      : p_(data), n_(size), where_(std::move(where)) {}

  Result<Ref> run();
  const std::vector<Value>& values() const { return values_; }

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

  Status fail(const std::string& what) const {
    return Status::corruption(where_ + " @" + hex_offset(op_pos_) + ": " + what);
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
  Result<std::string> take_line() {
    constexpr size_t kMaxLine = 256;
    for (size_t k = 0; pos_ + k < n_ && k <= kMaxLine; ++k) {
      if (p_[pos_ + k] == '\n') {
        std::string s(reinterpret_cast<const char*>(p_ + pos_), k);
        pos_ += k + 1;
        return s;
      }
    }
    return fail("GLOBAL name line longer than 256 bytes or unterminated");
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
  Status reduce(Ref callable, Ref args);
  Status set_items(Ref dict, const std::vector<Ref>& kv);
  Status persistent_load(Ref pid);
  Result<std::vector<int64_t>> int_tuple(Ref r, const char* what) const;

  const uint8_t* p_;
  size_t n_;
  std::string where_;
  size_t pos_ = 0, op_pos_ = 0;
  std::vector<Value> values_;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
};

Status Machine::push_global(const std::string& module, const std::string& name) {
  const std::string full = module + "." + name;
  Value v;
  v.kind = Kind::kGlobal;
  v.s = full;
  if (full == "collections.OrderedDict")
    v.callable = Callable::kOrderedDict;
  else if (full == "torch._utils._rebuild_tensor_v2")
    v.callable = Callable::kRebuildTensor;
  else if (full == "torch._utils._rebuild_parameter")
    v.callable = Callable::kRebuildParameter;
  else if (module == "torch") {
    for (const auto& st : kStorageTypes) {
      if (name == st.name) {
        v.callable = Callable::kStorageType;
        v.dtype = st.dtype;
      }
    }
  }
  if (v.callable == Callable::kNone) {
    const char* why = full == "torch.storage._load_from_bytes"
                          ? " (it unpickles a nested, unrestricted pickle)"
                          : " (only tensor state dicts are read)";
    return Status::not_supported(where_ + ": refusing pickle global '" + full + "' at offset " +
                                 hex_offset(op_pos_) + why);
  }
  return push_new(std::move(v));
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

Status Machine::reduce(Ref callable, Ref args_ref) {
  const Value& fn = values_[callable];
  const Value& args = values_[args_ref];
  if (fn.kind != Kind::kGlobal) return fail("REDUCE on a non-callable");
  if (args.kind != Kind::kTuple) return fail("REDUCE arguments are not a tuple");
  const std::vector<Ref> a = args.items;
  switch (fn.callable) {
    case Callable::kOrderedDict: {
      if (!a.empty())
        return Status::not_supported(where_ + " @" + hex_offset(op_pos_) + ": OrderedDict with arguments");
      Value d;
      d.kind = Kind::kDict;
      return push_new(std::move(d));
    }
    case Callable::kRebuildTensor: {
      // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
      if (a.size() < 6 || a.size() > 7)
        return fail("_rebuild_tensor_v2 expects 6 or 7 arguments, got " + std::to_string(a.size()));
      if (values_[a[0]].kind != Kind::kStorage)
        return fail("_rebuild_tensor_v2: first argument is not a storage");
      if (values_[a[1]].kind != Kind::kInt) return fail("_rebuild_tensor_v2: storage_offset is not an int");
      Value t;
      t.kind = Kind::kTensor;
      t.items = {a[0]};
      t.dtype = values_[a[0]].dtype;
      t.i = values_[a[1]].i;
      CKPT_ASSIGN_OR_RETURN(t.shape, int_tuple(a[2], "_rebuild_tensor_v2 size"));
      CKPT_ASSIGN_OR_RETURN(t.stride, int_tuple(a[3], "_rebuild_tensor_v2 stride"));
      if (t.shape.size() != t.stride.size()) return fail("_rebuild_tensor_v2: size and stride ranks differ");
      return push_new(std::move(t));
    }
    case Callable::kRebuildParameter: {
      if (a.size() != 3 || values_[a[0]].kind != Kind::kTensor)
        return fail("_rebuild_parameter expects (tensor, requires_grad, hooks)");
      return push(a[0]);
    }
    case Callable::kStorageType:
    case Callable::kNone: break;
  }
  return Status::not_supported(where_ + " @" + hex_offset(op_pos_) + ": refusing to call '" + fn.s + "'");
}

Status Machine::set_items(Ref dict, const std::vector<Ref>& kv) {
  if (values_[dict].kind != Kind::kDict) return fail("SETITEM(S) on a non-dict");
  if (kv.size() % 2) return fail("SETITEMS with an odd number of items");
  for (size_t k = 0; k < kv.size(); k += 2) values_[dict].dict.emplace_back(kv[k], kv[k + 1]);
  return Status::ok();
}

// torch.save's persistent id: ('storage', <StorageType>, key, location, numel).
Status Machine::persistent_load(Ref pid_ref) {
  const Value& pid = values_[pid_ref];
  auto bad = [&](const std::string& why) {
    return fail("bad persistent id: " + why +
                " (expected ('storage', <Storage type>, key, location, numel))");
  };
  if (pid.kind != Kind::kTuple || pid.items.size() != 5) return bad("not a 5-tuple");
  const Value& tag = values_[pid.items[0]];
  const Value& type = values_[pid.items[1]];
  const Value& key = values_[pid.items[2]];
  const Value& loc = values_[pid.items[3]];
  const Value& numel = values_[pid.items[4]];
  if (tag.kind != Kind::kString || tag.s != "storage") return bad("tag is not 'storage'");
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
  s.s = key.s;
  s.location = loc.s;
  s.i = numel.i;
  return push_new(std::move(s));
}

// STOP is not in the table: it is the only opcode that ends the run.
constexpr Machine::OpTable Machine::op_table() {
  OpTable t;
  on(&t, "\x80\x95", &Machine::framing_op);
  on(&t, "(012", &Machine::stack_op);
  on(&t, "qr\x94hj", &Machine::memo_op);
  on(&t, "JKM\x8aG\x88\x89N", &Machine::scalar_op);
  on(&t, "XCB\x8c\x8d", &Machine::string_op);
  on(&t, "}])t\x85\x86\x87", &Machine::new_container_op);
  on(&t, "su", &Machine::set_item_op);
  on(&t, "ae", &Machine::append_op);
  on(&t, "c\x93", &Machine::global_op);
  on(&t, "Rb\x81", &Machine::call_op);
  on(&t, "Q", &Machine::persistent_id_op);
  return t;
}

Result<Ref> Machine::run() {
  static constexpr OpTable kOps = op_table();
  while (pos_ < n_) {
    op_pos_ = pos_;
    const uint8_t op = p_[pos_++];
    if (op == '.') return pop();  // STOP
    const Handler h = kOps.at[op];
    if (h == nullptr) {
      return Status::not_supported(where_ + " @" + hex_offset(op_pos_) + ": unsupported pickle opcode " +
                                   to_hex(&op, 1));
    }
    CKPT_RETURN_IF_ERROR((this->*h)(op));
  }
  return Status::truncated(where_ + ": pickle ends without STOP after " + std::to_string(n_) + " bytes");
}

// PROTO, FRAME
Status Machine::framing_op(uint8_t op) {
  if (op == 0x95) {  // a length hint; the opcodes inside are read as usual
    CKPT_RETURN_IF_ERROR(need(8));
    pos_ += 8;
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
    case 0x8a: {  // little-endian two's complement of n bytes
      CKPT_RETURN_IF_ERROR(need(1));
      const size_t k = p_[pos_++];
      if (k > 8)
        return Status::not_supported(where_ + " @" + hex_offset(op_pos_) + ": integer wider than 64 bits");
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

// BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, SHORT_BINBYTES, BINBYTES
Status Machine::string_op(uint8_t op) {
  const size_t k = op == 0x8c || op == 'C' ? 1 : op == 0x8d ? 8 : 4;
  CKPT_RETURN_IF_ERROR(need(k));
  return push_string(op == 'C' || op == 'B' ? Kind::kBytes : Kind::kString, take_le(k));
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

// REDUCE, NEWOBJ, BUILD
Status Machine::call_op(uint8_t op) {
  if (op == 'b') {
    // OrderedDict's _metadata (and similar state) carries no tensors, so the state is dropped.
    CKPT_RETURN_IF_ERROR(pop().status());
    CKPT_ASSIGN_OR_RETURN(Ref obj, top());
    if (values_[obj].kind != Kind::kDict) {
      return Status::not_supported(where_ + " @" + hex_offset(op_pos_) +
                                   ": BUILD on something other than a dict");
    }
    return Status::ok();
  }
  CKPT_ASSIGN_OR_RETURN(Ref args, pop());
  CKPT_ASSIGN_OR_RETURN(Ref fn, pop());
  // NEWOBJ is cls.__new__(cls, *args); OrderedDict is the only class a state dict needs.
  if (op == 0x81 && (values_[fn].kind != Kind::kGlobal || values_[fn].callable != Callable::kOrderedDict)) {
    return Status::not_supported(where_ + " @" + hex_offset(op_pos_) + ": NEWOBJ of '" + values_[fn].s + "'");
  }
  return reduce(fn, args);
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

 private:
  // Longest chain of items/dict values below a value, saturated: a chain this long cannot be
  // flattened from any depth, and a cycle is an endless chain.
  static constexpr uint8_t kEndless = kPickleMaxNesting + 1;
  // What one emitted value costs besides its strings: a JSON node and its place in the parent.
  static constexpr size_t kValueCost = 32;

  enum class State : uint8_t { kNew, kOnPath, kDone };

  static size_t child_count(const Value& v) {
    return v.kind == Kind::kTensor ? 0 : v.items.size() + v.dict.size();
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
  Result<nlohmann::json> to_json(Ref r, size_t depth, const std::string& path);
  Status spend(size_t bytes, const std::string& path);
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
};

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
    CKPT_RETURN_IF_ERROR(spend(kValueCost + first.size(), prefix));
    out->metadata[utf8_clean(prefix)] = "ref:" + first;
    return Status::ok();
  }
  if (v.kind == Kind::kTensor) {
    const Value& st = values_[v.items[0]];
    CKPT_RETURN_IF_ERROR(spend(st.s.size() + st.location.size() + 2 * kValueCost * v.shape.size(), prefix));
    out->tensors.push_back(PickledTensor{prefix.empty() ? "tensor" : utf8_clean(prefix), st.dtype, st.s,
                                         utf8_clean(st.location), st.i, v.i, v.shape, v.stride});
    first_path_[r] = out->tensors.back().name;
    state_[r] = State::kDone;
    return Status::ok();
  }
  state_[r] = State::kOnPath;
  auto child_path = [&](const std::string& key) { return prefix.empty() ? key : prefix + "." + key; };
  if (v.kind == Kind::kDict) {
    for (const auto& [k, val] : v.dict) {
      const Value& key = values_[k];
      if (key.kind != Kind::kString && key.kind != Kind::kInt) {
        return Status::not_supported(where_ + ": '" + prefix + "' has a key that is not a string or int");
      }
      CKPT_RETURN_IF_ERROR(flatten(val, child_path(key.kind == Kind::kString ? key.s : std::to_string(key.i)),
                                   depth + 1, out));
    }
  } else {
    for (size_t k = 0; k < v.items.size(); ++k)
      CKPT_RETURN_IF_ERROR(flatten(v.items[k], child_path(std::to_string(k)), depth + 1, out));
  }
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
    case Kind::kFloat: return nlohmann::json(v.f);
    case Kind::kString: return nlohmann::json(utf8_clean(v.s));
    case Kind::kBytes:
      return nlohmann::json("bytes:" + to_hex(reinterpret_cast<const uint8_t*>(v.s.data()), v.s.size()));
    case Kind::kTuple:
    case Kind::kList: {
      nlohmann::json a = nlohmann::json::array();
      for (Ref item : v.items) {
        CKPT_ASSIGN_OR_RETURN(nlohmann::json j, to_json(item, depth + 1, path));
        a.push_back(std::move(j));
      }
      return a;
    }
    case Kind::kDict: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, val] : v.dict) {
        const Value& key = values_[k];
        std::string ks = key.kind == Kind::kString ? key.s
                         : key.kind == Kind::kInt  ? std::to_string(key.i)
                                                   : "";
        if (key.kind != Kind::kString && key.kind != Kind::kInt) {
          return Status::not_supported(where() + ": dict key that is not a string or int");
        }
        CKPT_RETURN_IF_ERROR(spend(ks.size(), path));
        CKPT_ASSIGN_OR_RETURN(nlohmann::json j, to_json(val, depth + 1, path));
        o[utf8_clean(ks)] = std::move(j);
      }
      return o;
    }
    case Kind::kGlobal: return nlohmann::json("global:" + v.s);
    case Kind::kStorage:
    case Kind::kTensor: break;
  }
  return Status::not_supported(where() + ": a storage outside a tensor");
}

}  // namespace

size_t pickle_output_limit(size_t pickle_size) {
  if (pickle_size >= (kPickleMaxOutput - kPickleOutputBase) / kPickleOutputPerByte) return kPickleMaxOutput;
  return kPickleOutputBase + kPickleOutputPerByte * pickle_size;
}

Result<PickledStateDict> read_tensor_pickle(const uint8_t* data, size_t size, const std::string& where) {
  Machine m(data, size, where);
  CKPT_ASSIGN_OR_RETURN(Ref root, m.run());
  PickledStateDict out;
  CKPT_RETURN_IF_ERROR(Flattener(m.values(), where, size).run(root, &out));
  return out;
}

}  // namespace ckpt
