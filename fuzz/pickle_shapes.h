// Pickle programs of the shapes byte-level mutation never builds: memo chains in which each list
// holds the previous one twice (2^n paths from a few hundred bytes), MARK/LIST nesting a million
// levels deep, containers that contain themselves, one value referenced from many keys. The custom
// mutators (pickle_mutator.h) and the seed generator (seed_gen.cpp) share them. Plain C++: the seed
// generator links nothing of ours.
//
// A "value program" is a sequence of opcodes that leaves exactly one new value on the stack, so
// programs compose: a dict item, a list element, a wrapped seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::fuzz {

inline void put_le(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Memo keys below 256 use the one-byte forms, as Python's pickler does.
inline std::string op_binput(uint32_t key) {
  std::string s(key < 256 ? "q" : "r");
  put_le(&s, key, key < 256 ? 1 : 4);
  return s;
}
inline std::string op_binget(uint32_t key) {
  std::string s(key < 256 ? "h" : "j");
  put_le(&s, key, key < 256 ? 1 : 4);
  return s;
}
inline std::string op_str(const std::string& text) {  // BINUNICODE
  std::string s("X");
  put_le(&s, text.size(), 4);
  return s + text;
}
inline std::string op_int(int64_t v) {  // LONG1, 8 bytes
  std::string s("\x8a\x08", 2);
  put_le(&s, static_cast<uint64_t>(v), 8);
  return s;
}
inline std::string op_global(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}

// torch._utils._rebuild_tensor_v2(('storage', torch.FloatStorage, key, 'cpu', numel), 0, (numel,),
// (1,), False, OrderedDict()): what torch.save writes for a 1-d float tensor.
inline std::string tensor_value(const std::string& storage_key, int64_t numel) {
  const std::string storage = "(" + op_str("storage") + op_global("torch", "FloatStorage") +
                              op_str(storage_key) + op_str("cpu") + op_int(numel) + "tQ";
  return op_global("torch._utils", "_rebuild_tensor_v2") + "(" + storage + op_int(0) + op_int(numel) +
         "\x85" + op_int(1) + "\x85" + "\x89" + op_global("collections", "OrderedDict") + ")R" + "tR";
}

// leaf, then depth lists, list i = [list i-1, list i-1] through BINPUT/BINGET with keys first_key...
// Each value is memoized and popped, and the last one fetched back, so one value is left.
inline std::string memo_chain(const std::string& leaf, size_t depth, uint32_t first_key) {
  std::string s = leaf + op_binput(first_key) + "0";
  for (size_t i = 0; i < depth; ++i) {
    const auto key = static_cast<uint32_t>(first_key + i);
    s += "](" + op_binget(key) + op_binget(key) + "e" + op_binput(key + 1) + "0";
  }
  return s + op_binget(static_cast<uint32_t>(first_key + depth));
}

// The same chain with dicts: dict i = {"a": dict i-1, "b": dict i-1}.
inline std::string memo_dict_chain(const std::string& leaf, size_t depth, uint32_t first_key) {
  std::string s = leaf + op_binput(first_key) + "0";
  for (size_t i = 0; i < depth; ++i) {
    const auto key = static_cast<uint32_t>(first_key + i);
    s += "}(" + op_str("a") + op_binget(key) + op_str("b") + op_binget(key) + "u" + op_binput(key + 1) + "0";
  }
  return s + op_binget(static_cast<uint32_t>(first_key + depth));
}

// [[[...[]...]]] nested `depth` deep: EMPTY_LIST x depth, then APPEND x (depth - 1).
inline std::string list_nest(size_t depth) {
  if (depth == 0) depth = 1;
  return std::string(depth, ']') + std::string(depth - 1, 'a');
}
// (((...()...),),) through MARK x depth, EMPTY_TUPLE, TUPLE x depth.
inline std::string mark_tuple_nest(size_t depth) {
  return std::string(depth, '(') + ")" + std::string(depth, 't');
}
// Lists nested through MARK ... APPENDS: ] (] (] ... e e.
inline std::string mark_list_nest(size_t depth) {
  if (depth == 0) depth = 1;
  std::string s("]");
  for (size_t i = 1; i < depth; ++i) s += "(]";
  return s + std::string(depth - 1, 'e');
}
// A list that contains itself twice.
inline std::string self_cycle(uint32_t key) {
  return "]" + op_binput(key) + "(" + op_binget(key) + op_binget(key) + "e";
}
// A dict whose `width` keys all name the same value (memo key `key`).
inline std::string fan_out(const std::string& shared, size_t width, uint32_t key) {
  std::string s = shared + op_binput(key) + "0}(";
  for (size_t i = 0; i < width; ++i) s += op_str("k" + std::to_string(i)) + op_binget(key);
  return s + "u";
}
// `count` distinct memo keys, each storing None: fills the memo table toward kPickleMaxMemo.
inline std::string memo_flood(size_t count, uint32_t first_key) {
  std::string s("N");
  for (size_t i = 0; i < count; ++i) s += op_binput(static_cast<uint32_t>(first_key + i));
  return s;
}
inline std::string long_string(size_t bytes) {
  return op_str(std::string(bytes, 'a'));
}

// A whole pickle: {name: value}, protocol 2.
inline std::string pickle_program(const std::string& name, const std::string& value) {
  return std::string("\x80\x02}", 3) + op_str(name) + value + "s.";
}

// The length of the opcode at `pos` with its operands, or 0 where it is unknown to the reader or
// runs past the end (the walk stops there).
inline size_t pickle_op_length(const uint8_t* p, size_t n, size_t pos) {
  if (pos >= n) return 0;
  auto le = [&](size_t at, size_t k) -> uint64_t {
    uint64_t v = 0;
    for (size_t i = 0; i < k; ++i) v |= static_cast<uint64_t>(p[at + i]) << (8 * i);
    return v;
  };
  auto fixed = [&](size_t k) -> size_t { return pos + 1 + k <= n ? 1 + k : 0; };
  auto counted = [&](size_t k) -> size_t {  // a k-byte length, then that many bytes
    if (pos + 1 + k > n) return 0;
    const uint64_t len = le(pos + 1, k);
    return len <= n - pos - 1 - k ? 1 + k + static_cast<size_t>(len) : 0;
  };
  switch (p[pos]) {
    case 0x80:
    case 'q':
    case 'h':
    case 'K': return fixed(1);
    case 'M': return fixed(2);
    case 'r':
    case 'j':
    case 'J': return fixed(4);
    case 0x95:
    case 'G': return fixed(8);
    case 0x8a: return pos + 2 <= n ? (pos + 2 + p[pos + 1] <= n ? 2 + p[pos + 1] : 0) : 0;
    case 'X':
    case 'B': return counted(4);
    case 'C':
    case 0x8c: return counted(1);
    case 0x8d: return counted(8);
    case 'c': {
      size_t lines = 0;
      for (size_t i = pos + 1; i < n; ++i) {
        if (p[i] == '\n' && ++lines == 2) return i + 1 - pos;
      }
      return 0;
    }
    case '(':
    case '0':
    case '1':
    case '2':
    case 0x94:
    case 0x88:
    case 0x89:
    case 'N':
    case '}':
    case ']':
    case ')':
    case 't':
    case 0x85:
    case 0x86:
    case 0x87:
    case 's':
    case 'u':
    case 'a':
    case 'e':
    case 0x93:
    case 'R':
    case 'b':
    case 0x81:
    case 'Q':
    case '.': return 1;
    default: return 0;
  }
}

// Opcode boundaries of `p` up to the first unknown opcode, and the memo keys it stores.
struct PickleWalk {
  std::vector<size_t> boundaries;
  std::vector<uint32_t> memo_keys;
  bool ends_with_stop = false;  // the last opcode walked is STOP and it is the last byte
};
inline PickleWalk walk_pickle(const uint8_t* p, size_t n) {
  PickleWalk w;
  size_t pos = 0;
  while (pos < n) {
    const size_t len = pickle_op_length(p, n, pos);
    if (len == 0) break;
    w.boundaries.push_back(pos);
    if (p[pos] == 'q') w.memo_keys.push_back(p[pos + 1]);
    if (p[pos] == 'r') {
      w.memo_keys.push_back(static_cast<uint32_t>(p[pos + 1] | p[pos + 2] << 8 | p[pos + 3] << 16 |
                                                  static_cast<uint32_t>(p[pos + 4]) << 24));
    }
    if (p[pos] == '.') {
      w.ends_with_stop = pos + 1 == n;
      break;
    }
    pos += len;
  }
  return w;
}

// Turns a complete pickle `body` (PROTO ... STOP) into {"root": body's value, "extra": value}, so a
// seed's real state dict and a generated shape meet in one flattening (a memo chain over one of the
// seed's tensors, say). Empty when `body` does not end with STOP.
inline std::string wrap_pickle_root(const std::string& body, const std::string& value) {
  const auto* p = reinterpret_cast<const uint8_t*>(body.data());
  if (!walk_pickle(p, body.size()).ends_with_stop) return {};
  size_t start = 0;
  if (body.size() >= 2 && p[0] == 0x80) start = 2;
  return std::string("\x80\x02}(", 4) + op_str("root") + body.substr(start, body.size() - 1 - start) +
         op_str("extra") + value + "u.";
}

}  // namespace ckpt::fuzz
