#include "formats/py_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <unordered_map>

#include "base/text.h"

namespace ckpt {

namespace {

// Appends to `out` until it holds `limit` characters; past that, repr stops descending.
class ReprWriter {
 public:
  explicit ReprWriter(size_t limit) : limit_(limit) {}
  bool full() const { return out_.size() >= limit_; }
  void put(const std::string& s) {
    if (!full()) out_ += s;
  }
  void put(char c) {
    if (!full()) out_ += c;
  }
  std::string finish() {
    if (out_.size() > limit_) {
      out_.resize(limit_);
      // Never cut inside a UTF-8 sequence: back up to the start of the last one.
      while (!out_.empty() && (static_cast<unsigned char>(out_.back()) & 0xC0) == 0x80) out_.pop_back();
      if (!out_.empty() && static_cast<unsigned char>(out_.back()) >= 0xC0) out_.pop_back();
      out_ += "…";
    } else if (truncated_) {
      out_ += "…";
    }
    return out_;
  }
  void mark_truncated() { truncated_ = true; }

 private:
  size_t limit_;
  bool truncated_ = false;
  std::string out_;
};

// Length of the valid UTF-8 sequence starting at s[k], or 0 when it is not one (overlong forms,
// surrogates and code points past U+10FFFF are invalid, as CPython's strict decoder says).
size_t utf8_sequence(const std::string& s, size_t k) {
  const auto b = [&](size_t j) { return static_cast<unsigned char>(s[j]); };
  const unsigned char c = b(k);
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || k + n > s.size()) return 0;
  for (size_t j = 1; j < n; ++j) {
    if ((b(k + j) & 0xC0) != 0x80) return 0;
  }
  if (n == 3 && ((c == 0xE0 && b(k + 1) < 0xA0) || (c == 0xED && b(k + 1) >= 0xA0))) return 0;
  if (n == 4 && ((c == 0xF0 && b(k + 1) < 0x90) || (c == 0xF4 && b(k + 1) >= 0x90))) return 0;
  return n;
}

std::string hex_escape(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  return buf;
}

// Python's repr of a str (text) or bytes (bytes): quotes, \\, \n, \r, \t, other control bytes as \x.
std::string quoted(const std::string& s, bool bytes) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out = bytes ? "b" : "";
  out += quote;
  for (size_t k = 0; k < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    if (c == '\\' || c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80)) {
      out += hex_escape(c);
    } else if (c >= 0x80) {  // text: a valid sequence as itself, an invalid byte escaped
      const size_t n = utf8_sequence(s, k);
      if (n == 0) {
        out += hex_escape(c);
      } else {
        out.append(s, k, n);
        k += n;
        continue;
      }
    } else {
      out += static_cast<char>(c);
    }
    ++k;
  }
  out += quote;
  return out;
}

// repr(float): the shortest text that reads back as the same double, with ".0" on integral values.
// A wide int's repr, decimal as Python writes it, from its hex magnitude ("0x…" or "-0x…"):
// long division of the hex digits by 10 until nothing is left. A pickle's LONG4 may name an int of
// millions of digits; its repr is cut at `max_digits` (the reader already bounds the bytes).
std::string big_int_decimal(const std::string& hex, size_t max_digits = 400) {
  const bool negative = !hex.empty() && hex[0] == '-';
  std::vector<uint8_t> digits;  // base 16, most significant first
  for (size_t k = hex.find('x') == std::string::npos ? 0 : hex.find('x') + 1; k < hex.size(); ++k) {
    const char c = hex[k];
    digits.push_back(static_cast<uint8_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10));
  }
  if (digits.size() > 4 * max_digits) return hex;  // too wide to divide cheaply: hex, as the file holds it
  std::string out;
  while (!digits.empty()) {
    std::vector<uint8_t> quotient;
    unsigned remainder = 0;
    for (uint8_t d : digits) {
      remainder = remainder * 16 + d;
      if (!quotient.empty() || remainder / 10) quotient.push_back(static_cast<uint8_t>(remainder / 10));
      remainder %= 10;
    }
    out.push_back(static_cast<char>('0' + remainder));
    digits.swap(quotient);
  }
  if (out.empty()) out = "0";
  if (negative) out.push_back('-');
  return std::string(out.rbegin(), out.rend());
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  std::string out = buf;
  if (out.find_first_of(".en") == std::string::npos) out += ".0";
  return out;
}

void repr_into(const PyValue& v, ReprWriter& w);

void repr_sequence(const std::vector<PyValuePtr>& items, ReprWriter& w) {
  for (size_t k = 0; k < items.size(); ++k) {
    if (w.full()) return w.mark_truncated();
    if (k) w.put(", ");
    if (items[k]) repr_into(*items[k], w);
  }
}

void repr_into(const PyValue& v, ReprWriter& w) {
  if (w.full()) return w.mark_truncated();
  switch (v.type) {
    case PyType::kNone: return w.put("None");
    case PyType::kBool: return w.put(v.i ? "True" : "False");
    case PyType::kInt: return w.put(std::to_string(v.i));
    case PyType::kBigInt: return w.put(big_int_decimal(v.s));
    case PyType::kFloat: return w.put(float_repr(v.f));
    case PyType::kStr: return w.put(quoted(v.s, false));
    case PyType::kBytes: return w.put(quoted(v.s, true));
    case PyType::kTuple:
      w.put('(');
      repr_sequence(v.items, w);
      return w.put(v.items.size() == 1 ? ",)" : ")");
    case PyType::kList:
      w.put('[');
      repr_sequence(v.items, w);
      return w.put(']');
    case PyType::kSet:
    case PyType::kFrozenSet: {
      const bool frozen = v.type == PyType::kFrozenSet;
      if (v.items.empty()) return w.put(frozen ? "frozenset()" : "set()");
      w.put(frozen ? "frozenset({" : "{");
      repr_sequence(v.items, w);
      return w.put(frozen ? "})" : "}");
    }
    case PyType::kDict:
      w.put('{');
      for (size_t k = 0; k < v.dict.size(); ++k) {
        if (w.full()) return w.mark_truncated();
        if (k) w.put(", ");
        repr_into(*v.dict[k].first, w);
        w.put(": ");
        repr_into(*v.dict[k].second, w);
      }
      return w.put('}');
    case PyType::kObject: {
      // Class(args) followed by the state BUILD gave it: what the loader would construct.
      w.put(v.s);
      w.put('(');
      const PyValuePtr& args = v.items[kPyObjectArgs];
      if (args && args->type == PyType::kTuple) {
        repr_sequence(args->items, w);
      } else if (args) {
        repr_into(*args, w);
      }
      w.put(')');
      const char* labels[] = {nullptr, " state=", " items=", " setitems="};
      for (size_t k = kPyObjectState; k <= kPyObjectDict; ++k) {
        if (!v.items[k]) continue;
        w.put(labels[k]);
        repr_into(*v.items[k], w);
      }
      return;
    }
    case PyType::kGlobal: return w.put("<global " + v.s + ">");
    case PyType::kTensor: return w.put("<tensor " + v.s + ">");
    case PyType::kStorage: return w.put("<storage " + v.s + ">");
  }
}

// Equality over a DAG: a pair of nodes found equal is remembered, so shared values compare once.
class EqualityWalk {
 public:
  bool equal(const PyValue& a, const PyValue& b) {
    if (&a == &b) return true;
    if (a.type != b.type) return false;
    const auto key = std::make_pair(&a, &b);
    if (known_equal_.count(key)) return true;
    if (!shallow_equal(a, b) || !children_equal(a, b)) return false;
    known_equal_.insert(key);
    return true;
  }

 private:
  static bool shallow_equal(const PyValue& a, const PyValue& b) {
    switch (a.type) {
      case PyType::kFloat: return std::memcmp(&a.f, &b.f, sizeof a.f) == 0;
      default:
        return a.i == b.i && a.s == b.s && a.items.size() == b.items.size() && a.dict.size() == b.dict.size();
    }
  }
  bool same(const PyValuePtr& a, const PyValuePtr& b) {
    if (!a || !b) return !a && !b;
    return equal(*a, *b);
  }
  bool children_equal(const PyValue& a, const PyValue& b) {
    switch (a.type) {
      case PyType::kSet:
      case PyType::kFrozenSet: {
        // A set's order is the writer's hash order (str hashes are seeded per process): compare the
        // items as a multiset of their full reprs.
        std::multiset<std::string> left, right;
        for (const auto& item : a.items) left.insert(py_key_identity(*item));
        for (const auto& item : b.items) right.insert(py_key_identity(*item));
        return left == right;
      }
      case PyType::kDict: {
        std::unordered_map<std::string, const PyValue*> by_key;
        for (const auto& [k, val] : b.dict) by_key.emplace(py_key_identity(*k), val.get());
        if (by_key.size() != b.dict.size()) return false;
        for (const auto& [k, val] : a.dict) {
          const auto it = by_key.find(py_key_identity(*k));
          if (it == by_key.end() || !equal(*val, *it->second)) return false;
        }
        return true;
      }
      default:
        for (size_t k = 0; k < a.items.size(); ++k) {
          if (!same(a.items[k], b.items[k])) return false;
        }
        return true;
    }
  }

  std::set<std::pair<const PyValue*, const PyValue*>> known_equal_;
};

// JSON holds only valid UTF-8: invalid sequences become U+FFFD (display only; comparisons use `s`).
std::string json_safe_text(const std::string& s) {
  const auto j = nlohmann::json::parse(
      nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), nullptr, false);
  return j.is_string() ? j.get<std::string>() : std::string();
}

PyValuePtr make(PyValue v) {
  return std::make_shared<const PyValue>(std::move(v));
}

}  // namespace

std::string py_type_name(const PyValue& v) {
  switch (v.type) {
    case PyType::kNone: return "NoneType";
    case PyType::kBool: return "bool";
    case PyType::kInt:
    case PyType::kBigInt: return "int";
    case PyType::kFloat: return "float";
    case PyType::kStr: return "str";
    case PyType::kBytes: return "bytes";
    case PyType::kTuple: return "tuple";
    case PyType::kList: return "list";
    case PyType::kSet: return "set";
    case PyType::kFrozenSet: return "frozenset";
    case PyType::kDict: return "dict";
    case PyType::kObject: return v.s;
    case PyType::kGlobal: return "global";
    case PyType::kTensor: return "tensor";
    case PyType::kStorage: return "storage";
  }
  return "?";
}

std::string py_value_repr(const PyValue& v, size_t max_chars) {
  ReprWriter w(max_chars);
  repr_into(v, w);
  return w.finish();
}

bool py_values_equal(const PyValue& a, const PyValue& b) {
  return EqualityWalk().equal(a, b);
}

std::string py_key_identity(const PyValue& v) {
  // Canonical: a set's items and a dict's entries sorted, so two equal values give one text
  // whatever order their writer's hash seed gave them.
  std::string out = py_type_name(v);
  const auto sorted_items = [](std::vector<std::string> parts) {
    std::sort(parts.begin(), parts.end());
    std::string joined;
    for (const std::string& p : parts) joined += p + ",";
    return joined;
  };
  switch (v.type) {
    case PyType::kTuple:
    case PyType::kList:
      out += "(";
      for (const auto& item : v.items) out += py_key_identity(*item) + ",";
      return out + ")";
    case PyType::kSet:
    case PyType::kFrozenSet: {
      std::vector<std::string> parts;
      for (const auto& item : v.items) parts.push_back(py_key_identity(*item));
      return out + "{" + sorted_items(std::move(parts)) + "}";
    }
    case PyType::kDict: {
      std::vector<std::string> parts;
      for (const auto& [k, val] : v.dict) parts.push_back(py_key_identity(*k) + ":" + py_key_identity(*val));
      return out + "{" + sorted_items(std::move(parts)) + "}";
    }
    case PyType::kObject:
      out += v.i ? "()(" : "(";
      for (const auto& item : v.items) out += (item ? py_key_identity(*item) : std::string("-")) + ",";
      return out + ")";
    default: return out + ":" + py_value_repr(v, std::numeric_limits<size_t>::max());
  }
}

std::vector<std::pair<std::string, PyValuePtr>> py_value_parts(const PyValue& v) {
  std::vector<std::pair<std::string, PyValuePtr>> out;
  const auto key_text = [](const PyValue& k) {
    if (k.type == PyType::kStr) return k.s;
    if (k.type == PyType::kInt || k.type == PyType::kBigInt) return py_value_repr(k);
    return py_value_repr(k, std::numeric_limits<size_t>::max());
  };
  switch (v.type) {
    case PyType::kDict:
      for (const auto& [k, val] : v.dict) out.emplace_back(key_text(*k), val);
      break;
    case PyType::kObject: {
      const PyValuePtr& args = v.items[kPyObjectArgs];
      if (args && args->type != PyType::kNone && !(args->type == PyType::kTuple && args->items.empty()))
        out.emplace_back("__args__", args);
      const PyValuePtr& state = v.items[kPyObjectState];
      const bool named_state = state && state->type == PyType::kDict &&
                               std::all_of(state->dict.begin(), state->dict.end(), [](const auto& kv) {
                                 return kv.first->type == PyType::kStr || kv.first->type == PyType::kInt;
                               });
      if (named_state) {
        for (const auto& [k, val] : state->dict) out.emplace_back(key_text(*k), val);
      } else if (state && state->type != PyType::kNone) {
        out.emplace_back("__state__", state);
      }
      if (v.items[kPyObjectList]) out.emplace_back("__items__", v.items[kPyObjectList]);
      if (v.items[kPyObjectDict]) out.emplace_back("__dict__", v.items[kPyObjectDict]);
      break;
    }
    case PyType::kTuple:
    case PyType::kList:
    case PyType::kSet:
    case PyType::kFrozenSet:
      for (size_t k = 0; k < v.items.size(); ++k) out.emplace_back(std::to_string(k), v.items[k]);
      break;
    default: break;
  }
  return out;
}

nlohmann::json py_value_to_json(const PyValue& v) {
  switch (v.type) {
    case PyType::kNone: return nullptr;
    case PyType::kBool: return v.i != 0;
    case PyType::kInt: return v.i;
    case PyType::kBigInt: return "int:" + v.s;
    case PyType::kFloat: return v.f;
    case PyType::kStr: return json_safe_text(v.s);
    case PyType::kBytes: return "bytes:" + to_hex(reinterpret_cast<const uint8_t*>(v.s.data()), v.s.size());
    case PyType::kTuple:
    case PyType::kList:
    case PyType::kSet:
    case PyType::kFrozenSet: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& item : v.items) a.push_back(py_value_to_json(*item));
      return a;
    }
    case PyType::kDict:
    case PyType::kObject: {
      nlohmann::json o = nlohmann::json::object();
      if (v.type == PyType::kObject) o[v.i ? "__call__" : "__class__"] = v.s;
      for (const auto& [name, part] : py_value_parts(v))
        o[json_safe_text(name)] = part ? py_value_to_json(*part) : nullptr;
      return o;
    }
    case PyType::kGlobal: return "global:" + v.s;
    case PyType::kTensor: return "tensor:" + v.s;
    case PyType::kStorage: return "storage:" + v.s;
  }
  return nullptr;
}

PyValuePtr py_value_from_json(const nlohmann::json& j) {
  PyValue v;
  switch (j.type()) {
    case nlohmann::json::value_t::null: break;
    case nlohmann::json::value_t::boolean:
      v.type = PyType::kBool;
      v.i = j.get<bool>();
      break;
    case nlohmann::json::value_t::number_integer:
      v.type = PyType::kInt;
      v.i = j.get<int64_t>();
      break;
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        v.type = PyType::kInt;
        v.i = static_cast<int64_t>(u);
      } else {
        char buf[24];
        std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(u));
        v.type = PyType::kBigInt;
        v.s = buf;
      }
      break;
    }
    case nlohmann::json::value_t::number_float:
      v.type = PyType::kFloat;
      v.f = j.get<double>();
      break;
    case nlohmann::json::value_t::string:
      v.type = PyType::kStr;
      v.s = j.get<std::string>();
      break;
    case nlohmann::json::value_t::array:
      v.type = PyType::kList;
      for (const auto& item : j) v.items.push_back(py_value_from_json(item));
      break;
    case nlohmann::json::value_t::object:
      v.type = PyType::kDict;
      for (auto it = j.begin(); it != j.end(); ++it) {
        PyValue key;
        key.type = PyType::kStr;
        key.s = it.key();
        v.dict.emplace_back(make(std::move(key)), py_value_from_json(it.value()));
      }
      break;
    case nlohmann::json::value_t::binary:
      v.type = PyType::kBytes;
      v.s.assign(j.get_binary().begin(), j.get_binary().end());
      break;
    case nlohmann::json::value_t::discarded: break;
  }
  return make(std::move(v));
}

}  // namespace ckpt
