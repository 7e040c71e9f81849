#include "formats/torch_load_dispatch.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "formats/pickle_reader.h"

namespace ckpt {

namespace {

constexpr size_t kTarBlock = 512;

// tarfile's nti() on the checksum field: a base-256 number (first byte 0x80 or 0xff), or octal text
// up to the first NUL, blanks around it. Python's int(s, 8) also takes a sign, "0o" and '_' between
// digits; a field spelled so is taken as CPython would take it, anything else is no number
// (InvalidHeaderError: tarfile refuses the file).
bool tar_number(const uint8_t* field, size_t n, int64_t* out) {
  if (field[0] == 0x80 || field[0] == 0xff) {
    int64_t v = 0;
    for (size_t k = 1; k < n; ++k) v = (v << 8) | field[k];
    if (field[0] == 0xff) v -= int64_t{1} << (8 * (n - 1));
    *out = v;
    return true;
  }
  std::string s;
  for (size_t k = 0; k < n && field[k] != 0; ++k) {
    if (field[k] >= 0x80) return false;  // not ASCII: UnicodeDecodeError, InvalidHeaderError
    s += static_cast<char>(field[k]);
  }
  const auto blank = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); };
  while (!s.empty() && blank(s.back())) s.pop_back();
  size_t k = 0;
  while (k < s.size() && blank(s[k])) ++k;
  s = s.substr(k);
  if (s.empty()) {
    *out = 0;
    return true;
  }
  bool negative = false;
  size_t i = 0;
  if (s[0] == '+' || s[0] == '-') negative = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0' && (s[i + 1] == 'o' || s[i + 1] == 'O')) {
    i += 2;
    if (i < s.size() && s[i] == '_') ++i;  // "0o_17" is a Python literal
  }
  if (i == s.size()) return false;
  int64_t v = 0;
  for (bool last_digit = false; i < s.size(); ++i) {
    if (s[i] == '_' && last_digit && i + 1 < s.size() && s[i + 1] != '_') {
      last_digit = false;
      continue;
    }
    if (s[i] < '0' || s[i] > '7' || v > (INT64_MAX >> 3)) return false;
    v = v * 8 + (s[i] - '0');
    last_digit = true;
  }
  *out = negative ? -v : v;
  return true;
}

}  // namespace

bool tarfile_would_open(const uint8_t* head, size_t n) {
  if (n < kTarBlock) return false;  // tarfile: "truncated header" / "empty file"
  if (std::all_of(head, head + kTarBlock, [](uint8_t b) { return b == 0; })) return true;
  int64_t chksum = 0;
  if (!tar_number(head + 148, 8, &chksum)) return false;
  // calc_chksums: 256 (the field as eight blanks) plus every other byte, unsigned or signed.
  int64_t unsigned_sum = 256, signed_sum = 256;
  for (size_t k = 0; k < kTarBlock; ++k) {
    if (k >= 148 && k < 156) continue;
    unsigned_sum += head[k];
    signed_sum += static_cast<int8_t>(head[k]);
  }
  if (chksum != unsigned_sum && chksum != signed_sum) return false;
  // frombuf parses these numbers too (mode, uid, gid, size, mtime, devmajor, devminor); one that is
  // no number makes tarfile refuse the file, and torch.load go on to the pickle stream. Headers
  // that tarfile parses further (a GNU long name, a pax header) count as opened: a refusal then is
  // the safe side of any difference.
  constexpr std::pair<size_t, size_t> kNumbers[] = {{100, 8},  {108, 8}, {116, 8}, {124, 12},
                                                    {136, 12}, {329, 8}, {337, 8}};
  for (const auto& [at, width] : kNumbers) {
    int64_t ignored = 0;
    if (!tar_number(head + at, width, &ignored)) return false;
  }
  return true;
}

bool is_pickle_opcode(uint8_t op) {
  static const char kOps[] = "(.012FIJKLMNPQRSTUVXabcd}eghijl]opqrst)uGBC";
  if (op >= 0x80 && op <= 0x98) return true;
  return op != 0 && std::find(kOps, kOps + sizeof kOps - 1, static_cast<char>(op)) != kOps + sizeof kOps - 1;
}

bool is_torchscript_member(const std::string& name) {
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  const size_t slash = lower.find('/');
  const std::string record = slash == std::string::npos ? lower : lower.substr(slash + 1);
  return record == "constants.pkl" || record.rfind("code/", 0) == 0;
}

PickleStreamProbe probe_pickle_stream(const ByteSource& source) {
  const uint64_t size = source.size();
  uint8_t first = 0;
  if (size == 0 || !source.read_at(0, &first, 1).is_ok() || !is_pickle_opcode(first)) return {};
  // The first pickle's length is known only by reading it: a prefix, then a longer one while it
  // runs past the prefix.
  std::vector<uint8_t> head;
  for (uint64_t want = 1 << 16;; want *= 8) {
    const uint64_t n = std::min({want, size, kPickleStreamProbeBytes});
    head.resize(static_cast<size_t>(n));
    if (!source.read_at(0, head.data(), head.size()).is_ok()) return {};
    auto first_pickle = read_tensor_pickle(head.data(), head.size(), source.name());
    if (first_pickle.is_ok()) {
      return {is_legacy_magic(*first_pickle) ? PickleStreamRoute::kLegacy : PickleStreamRoute::kPlain,
              !first_pickle->globals.empty()};
    }
    if (first_pickle.status().code() == StatusCode::kTruncated && n < size && n < kPickleStreamProbeBytes)
      continue;
    const bool named = !pickle_globals_before_error(head.data(), head.size()).empty();
    // Bytes CPython could read otherwise than we do: whatever runs, the opener refuses them.
    const bool ambiguous = first_pickle.status().code() == StatusCode::kAmbiguous;
    return {named || ambiguous ? PickleStreamRoute::kPlain : PickleStreamRoute::kNone, named};
  }
}

PickleStreamRoute pickle_stream_route(const ByteSource& source) {
  return probe_pickle_stream(source).route;
}

}  // namespace ckpt
