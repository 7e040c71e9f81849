// Hand-assembled pickle opcodes, so pickle and PyTorch tests can build one defect at a time.
#pragma once

#include <cstdint>
#include <string>

namespace ckpt::pk {

inline std::string proto() {
  return std::string("\x80\x02", 2);
}
inline std::string str(const std::string& s) {
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out += static_cast<char>((s.size() >> (8 * i)) & 0xff);
  return out + s;
}
inline std::string int1(uint8_t v) {
  return std::string("K") + static_cast<char>(v);
}
inline std::string global(const std::string& module, const std::string& name) {
  return "c" + module + "\n" + name + "\n";
}
inline std::string mark() {
  return "(";
}
inline std::string tuple() {
  return "t";
}
inline std::string tuple2() {
  return "\x86";
}
inline std::string empty_tuple() {
  return ")";
}
inline std::string empty_dict() {
  return "}";
}
inline std::string reduce() {
  return "R";
}
inline std::string setitems() {
  return "u";
}
inline std::string stop() {
  return ".";
}
inline std::string newfalse() {
  return "\x89";
}
inline std::string binpersid() {
  return "Q";
}
inline std::string empty_list() {
  return "]";
}
inline std::string appends() {
  return "e";
}
inline std::string pop() {
  return "0";
}
// cls.__new__(cls, *args) and obj.__setstate__(state): how Python pickles a dataclass instance.
inline std::string newobj() {
  return "\x81";
}
inline std::string build() {
  return "b";
}
// Memo slot operations: BINPUT stores the top of the stack, BINGET pushes that same value again.
inline std::string binput(uint8_t slot) {
  return std::string("q") + static_cast<char>(slot);
}
inline std::string binget(uint8_t slot) {
  return std::string("h") + static_cast<char>(slot);
}

// ('storage', torch.<type>, key, 'cpu', numel) then BINPERSID.
inline std::string storage(const std::string& type, const std::string& key, uint8_t numel) {
  return mark() + str("storage") + global("torch", type) + str(key) + str("cpu") + int1(numel) + tuple() +
         binpersid();
}
// _rebuild_tensor_v2(storage, offset, (rows, cols), (stride0, stride1), False, OrderedDict())
inline std::string tensor2d(const std::string& storage_ops, uint8_t offset, uint8_t rows, uint8_t cols,
                            uint8_t stride0, uint8_t stride1) {
  return global("torch._utils", "_rebuild_tensor_v2") + mark() + storage_ops + int1(offset) + int1(rows) +
         int1(cols) + tuple2() + int1(stride0) + int1(stride1) + tuple2() + newfalse() +
         global("collections", "OrderedDict") + empty_tuple() + reduce() + tuple() + reduce();
}

// Lists L0..L<levels> with L0 = [leaf] and Lk = [Lk-1, Lk-1], built through the memo (slot k holds
// Lk), so a few bytes per level describe 2^levels paths to the leaf. Leaves L<levels> on the stack.
inline std::string memo_chain(const std::string& leaf, int levels) {
  std::string p = empty_list() + mark() + leaf + appends() + binput(0);
  for (int k = 1; k <= levels; ++k) {
    const auto prev = static_cast<uint8_t>(k - 1);
    p += pop() + empty_list() + mark() + binget(prev) + binget(prev) + appends() +
         binput(static_cast<uint8_t>(k));
  }
  return p;
}

}  // namespace ckpt::pk
