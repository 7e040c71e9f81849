#include "formats/numpy_file.h"

#include <algorithm>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "base/byte_coding.h"
#include "base/text.h"
#include "formats/mapped_tensor_file.h"
#include "formats/pickle_reader.h"

namespace ckpt {

namespace {

constexpr uint64_t kNumpyMaxHeaderBytes = 1 << 20;
constexpr uint64_t kNumpyMaxObjectPickleBytes = 256ull << 20;

// numpy's descr for the element types we read: byte order ('<' or '|' for one byte), kind, size.
std::optional<DType> dtype_of_descr(const std::string& descr) {
  static const std::pair<const char*, DType> kDescr[] = {
      {"<f2", DType::kF16}, {"<f4", DType::kF32},  {"<f8", DType::kF64}, {"|i1", DType::kI8},
      {"<i2", DType::kI16}, {"<i4", DType::kI32},  {"<i8", DType::kI64}, {"|u1", DType::kU8},
      {"<u2", DType::kU16}, {"<u4", DType::kU32},  {"<u8", DType::kU64}, {"|b1", DType::kBool},
      {"<c8", DType::kC64}, {"<c16", DType::kC128}};
  for (const auto& [name, dtype] : kDescr) {
    if (descr == name) return dtype;
  }
  return std::nullopt;
}

}  // namespace

Result<std::unique_ptr<TensorFile>> open_numpy(std::unique_ptr<ByteSource> source) {
  const std::string file = source->name();
  const uint64_t size = source->size();
  uint8_t head[12] = {};
  if (size < 10) return Status::truncated(file + ": .npy shorter than its 10-byte preamble");
  CKPT_RETURN_IF_ERROR(source->read_at(0, head, std::min<uint64_t>(size, sizeof head)));
  const uint8_t major = head[6];
  if (major < 1 || major > 3)
    return Status::not_supported(file + ": .npy format version " + std::to_string(major));
  const uint64_t length_bytes = major == 1 ? 2 : 4;
  const uint64_t header_length = decode_le(head + 8, length_bytes);
  const uint64_t header_at = 8 + length_bytes;
  if (header_length > kNumpyMaxHeaderBytes || header_at + header_length > size)
    return Status::truncated(file + ": .npy header of " + std::to_string(header_length) +
                             " bytes runs past the file");
  std::string header(static_cast<size_t>(header_length), '\0');
  CKPT_RETURN_IF_ERROR(source->read_at(header_at, header.data(), header.size()));
  // Exactly numpy.save's writing (format.py _write_array_header: keys sorted, repr of each value).
  static const std::regex kHeader(
      R"(\{'descr': '([<>|=][a-zA-Z][0-9]*)', 'fortran_order': (True|False), 'shape': \(((?:[0-9]+, ?)*[0-9]*)\), \} *\n)");
  std::smatch m;
  if (!std::regex_match(header, m, kHeader)) {
    return Status::ambiguous(file +
                             ": .npy header is not in the form numpy.save writes (numpy parses it with "
                             "ast.literal_eval, which reads more; a structured or object dtype in another "
                             "form could hide a pickle): refused");
  }
  const std::string descr = m[1];
  const bool fortran = m[2] == "True";
  std::vector<int64_t> shape;
  const std::string dims = m[3];
  for (size_t at = 0; at < dims.size();) {
    const size_t comma = dims.find(',', at);
    const std::string d = dims.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (d.empty() || d.size() > 18)
      return Status::corruption(file + ": .npy shape (" + dims + ") is out of range");
    shape.push_back(std::stoll(d));
    at = comma == std::string::npos ? dims.size() : dims.find_first_not_of(' ', comma + 1);
    if (at == std::string::npos) at = dims.size();
  }
  const uint64_t data_at = header_at + header_length;
  nlohmann::json metadata = {{"numpy_descr", descr}, {"fortran_order", fortran}};
  if (descr == "|O") {  // an object array: a pickle that numpy.load(allow_pickle=True) runs
    const uint64_t n = size - data_at;
    if (n > kNumpyMaxObjectPickleBytes)
      return Status::not_supported(file + ": object array pickle larger than 256 MiB");
    std::vector<uint8_t> bytes(static_cast<size_t>(n));
    CKPT_RETURN_IF_ERROR(source->read_at(data_at, bytes.data(), bytes.size()));
    CKPT_ASSIGN_OR_RETURN(PickledStateDict pickled,
                          read_tensor_pickle(bytes.data(), bytes.size(), file + ": object array pickle"));
    for (PickleGlobal& g : pickled.globals) {
      g.pickle = "object array pickle at file offset " + hex_offset(data_at) +
                 " (numpy.load(allow_pickle=True) runs it)";
      g.first_offset += data_at;
    }
    metadata["numpy_object_array"] = true;
    return std::unique_ptr<TensorFile>(new MappedTensorFile("numpy", std::move(source), {},
                                                            std::move(metadata), std::move(pickled.globals)));
  }
  const auto dtype = dtype_of_descr(descr);
  if (!dtype)
    return Status::not_supported(file + ": .npy dtype '" + descr + "' (big-endian or not a number type)");
  if (fortran && shape.size() > 1) {
    return Status::not_supported(file + ": a Fortran-order .npy array (column-major bytes) is not read");
  }
  const auto nbytes = checked_nbytes(shape, *dtype);
  if (!nbytes) return Status::corruption(file + ": .npy shape overflows");
  if (data_at + *nbytes != size) {
    return Status::corruption(file + ": .npy holds " + std::to_string(size - data_at) +
                              " bytes of data, its header (" + descr + ", shape (" + dims + ")) says " +
                              std::to_string(*nbytes));
  }
  ChunkInfo c;
  c.name = "array";
  c.component = "model";
  c.dtype = *dtype;
  c.global_shape = shape;
  c.shape = shape;
  c.offsets.assign(shape.size(), 0);
  c.data_offset = data_at;
  c.data_bytes = *nbytes;
  std::vector<ChunkInfo> chunks{std::move(c)};
  return std::unique_ptr<TensorFile>(
      new MappedTensorFile("numpy", std::move(source), std::move(chunks), std::move(metadata)));
}

}  // namespace ckpt
