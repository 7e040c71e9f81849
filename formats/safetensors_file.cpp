#include "formats/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "base/byte_coding.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/sha256.h"
#include "base/streaming_file_writer.h"
#include "formats/mapped_tensor_file.h"
#include "formats/tensor_file_open.h"

namespace ckpt {

namespace {

constexpr size_t kMaxJsonNesting = 64;
constexpr size_t kMaxSafetensorsRank = 64;
constexpr uint64_t kMaxIndexBytes = 64ull << 20;

// nlohmann parses iteratively, but a hostile header of a million '[' still costs a deep tree;
// no legitimate header nests deeper than 3, so refuse before parsing.
bool json_nesting_within(const std::string& text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return false;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return true;
}

struct HeaderEntry {
  std::string key;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

constexpr const char* kSafetensorsF4 = "F4";

Result<HeaderEntry> parse_entry(const std::string& key, const nlohmann::json& v, const std::string& file) {
  const std::string where = file + ": tensor '" + key + "'";
  if (!v.is_object()) return Status::corruption(where + ": expected an object, got " + v.type_name());
  HeaderEntry e{key, DType::kF32, {}, 0, 0};
  CKPT_ASSIGN_OR_RETURN(std::string dtype, json_string(v, "dtype", where));
  // "F4" (safetensors >= 0.6: e2m1 nibbles, the shape counting nibbles) is torch.float4_e2m1fn_x2,
  // two to a byte: the last dim halves, as safetensors.torch loads it.
  const bool f4 = dtype == kSafetensorsF4;
  auto dt = f4 ? std::optional<DType>(DType::kF4E2M1X2) : dtype_from_name(dtype);
  if (!dt || (!f4 && *dt == DType::kF4E2M1X2))
    return Status::not_supported(where + ": unknown dtype '" + dtype + "'");
  e.dtype = *dt;
  CKPT_ASSIGN_OR_RETURN(e.shape, json_dims(v, "shape", where, kMaxSafetensorsRank));
  if (f4) {
    if (e.shape.empty() || e.shape.back() % 2 != 0) {
      return Status::corruption(where + ": F4 shape " + shape_to_string(e.shape) +
                                " has no even last dim (two 4-bit values share a byte)");
    }
    e.shape.back() /= 2;
  }
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* offs, json_array(v, "data_offsets", where));
  if (offs->size() != 2 || !(*offs)[0].is_number_unsigned() || !(*offs)[1].is_number_unsigned()) {
    return Status::corruption(where + ": data_offsets: expected [begin, end] non-negative integers, got " +
                              offs->dump());
  }
  e.begin = (*offs)[0].get<uint64_t>();
  e.end = (*offs)[1].get<uint64_t>();
  if (e.begin > e.end) {
    return Status::corruption(where + ": data_offsets begin " + std::to_string(e.begin) + " > end " +
                              std::to_string(e.end));
  }
  const auto nbytes = checked_nbytes(e.shape, e.dtype);
  if (!nbytes) return Status::corruption(where + ": shape " + shape_to_string(e.shape) + " overflows");
  if (e.end - e.begin != *nbytes) {
    return Status::corruption(where + ": expected " + std::to_string(*nbytes) + " bytes for " + dtype + " " +
                              shape_to_string(e.shape) + ", data_offsets span " +
                              std::to_string(e.end - e.begin));
  }
  return e;
}

// Our own facts about a chunk, if the writer was ckptcheck; plain HF files get defaults.
Status apply_chunk_metadata(const nlohmann::json& meta, const HeaderEntry& e, const std::string& file,
                            ChunkInfo* c) {
  c->name = e.key;
  c->component = "model";
  c->global_shape = e.shape;
  c->offsets.assign(e.shape.size(), 0);
  if (!meta.is_object()) return Status::ok();
  auto it = meta.find(kSafetensorsChunkKeyPrefix + e.key);
  if (it == meta.end()) return Status::ok();
  const std::string where = file + ": __metadata__ of tensor '" + e.key + "'";
  if (!it->is_string()) return Status::corruption(where + ": expected a JSON string");
  CKPT_ASSIGN_OR_RETURN(nlohmann::json j, parse_json(it->get<std::string>(), where));
  CKPT_ASSIGN_OR_RETURN(c->name, json_string(j, "name", where));
  CKPT_ASSIGN_OR_RETURN(c->component, json_string(j, "component", where));
  CKPT_ASSIGN_OR_RETURN(c->global_shape, json_dims(j, "global_shape", where, kMaxSafetensorsRank));
  CKPT_ASSIGN_OR_RETURN(c->offsets, json_dims(j, "offsets", where, kMaxSafetensorsRank));
  CKPT_ASSIGN_OR_RETURN(c->sha256, json_string(j, "sha256", where));
  return check_chunk_geometry(*c, file);
}

// The header: its 8-byte little-endian length, then that many bytes of JSON holding an object.
// Sets *length to the JSON's byte count (the data section starts at 8 + *length).
Result<nlohmann::json> read_safetensors_header(const ByteSource& source, uint64_t* length) {
  const std::string file = source.name();
  const uint64_t size = source.size();
  if (size < 8) {
    return Status::truncated(file + ": " + std::to_string(size) +
                             " bytes, expected at least 8 (header length)");
  }
  uint8_t len_bytes[8];
  CKPT_RETURN_IF_ERROR(source.read_at(0, len_bytes, 8));
  const uint64_t n = decode_le64(len_bytes);
  if (n > kSafetensorsMaxHeaderBytes) {
    return Status::corruption(file + " @0x0: header length " + std::to_string(n) + " exceeds the limit of " +
                              std::to_string(kSafetensorsMaxHeaderBytes));
  }
  if (n > size - 8) {
    return Status::truncated(file + " @0x0: header length " + std::to_string(n) + " exceeds the " +
                             std::to_string(size - 8) + " bytes after the length field");
  }
  std::string text(n, '\0');
  CKPT_RETURN_IF_ERROR(source.read_at(8, text.data(), n));
  if (n == 0 || text[0] != '{') return Status::corruption(file + " @0x8: header does not start with '{'");
  if (!json_nesting_within(text, kMaxJsonNesting)) {
    return Status::corruption(file + ": header nests deeper than " + std::to_string(kMaxJsonNesting));
  }
  // nlohmann rejects invalid UTF-8 inside strings, which is the spec's UTF-8 requirement.
  CKPT_ASSIGN_OR_RETURN(nlohmann::json header, parse_json(text, file + ": header"));
  if (!header.is_object()) return Status::corruption(file + ": header is not a JSON object");
  *length = n;
  return header;
}

// The header's entries apart from __metadata__ (a string -> string object, into *meta), each
// checked on its own, sorted by where their data lies.
Result<std::vector<HeaderEntry>> header_entries(const nlohmann::json& header, const std::string& file,
                                                nlohmann::json* meta) {
  std::vector<HeaderEntry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Status::corruption(file + ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return Status::corruption(file + ": __metadata__ '" + m.key() + "': expected a string, got " +
                                    m->type_name());
        }
      }
      *meta = *it;
      continue;
    }
    CKPT_ASSIGN_OR_RETURN(HeaderEntry e, parse_entry(it.key(), *it, file));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  return entries;
}

// The sorted entries tile the data section exactly: each tensor starts where the previous ended
// (no holes, no overlaps) and the last ends at the file's end.
Status check_entries_tile_data(const std::vector<HeaderEntry>& entries, uint64_t data_size,
                               const std::string& file) {
  uint64_t expected_begin = 0;
  for (const auto& e : entries) {
    if (e.begin != expected_begin) {
      return Status::corruption(file + ": tensor '" + e.key + "': data_offsets begin " +
                                std::to_string(e.begin) + ", expected " + std::to_string(expected_begin) +
                                (e.begin < expected_begin ? " (overlaps the previous tensor)"
                                                          : " (hole after the previous tensor)"));
    }
    expected_begin = e.end;
  }
  if (expected_begin == data_size) return Status::ok();
  const std::string last = entries.empty() ? std::string("(none)") : entries.back().key;
  if (expected_begin > data_size) {
    return Status::truncated(file + ": tensor '" + last + "' ends at data offset " +
                             std::to_string(expected_begin) + " but the data section has " +
                             std::to_string(data_size) + " bytes");
  }
  return Status::corruption(file + ": " + std::to_string(data_size - expected_begin) +
                            " bytes after the last tensor '" + last + "' (data ends at " +
                            std::to_string(expected_begin) + ", file has " + std::to_string(data_size) + ")");
}

}  // namespace

Result<std::unique_ptr<TensorFile>> open_safetensors(std::unique_ptr<ByteSource> source) {
  const std::string file = source->name();
  uint64_t n = 0;
  CKPT_ASSIGN_OR_RETURN(nlohmann::json header, read_safetensors_header(*source, &n));
  nlohmann::json meta;
  CKPT_ASSIGN_OR_RETURN(std::vector<HeaderEntry> entries, header_entries(header, file, &meta));
  const uint64_t data_start = 8 + n, data_size = source->size() - data_start;
  CKPT_RETURN_IF_ERROR(check_entries_tile_data(entries, data_size, file));

  std::vector<ChunkInfo> chunks;
  chunks.reserve(entries.size());
  for (const auto& e : entries) {
    ChunkInfo c;
    c.dtype = e.dtype;
    c.shape = e.shape;
    c.data_offset = data_start + e.begin;
    c.data_bytes = e.end - e.begin;
    CKPT_RETURN_IF_ERROR(apply_chunk_metadata(meta, e, file, &c));
    chunks.push_back(std::move(c));
  }
  nlohmann::json file_meta = meta.is_null() ? nlohmann::json::object() : meta;
  if (meta.is_object() && meta.contains(kSafetensorsFileMetadataKey)) {
    CKPT_ASSIGN_OR_RETURN(file_meta, parse_json(meta[kSafetensorsFileMetadataKey].get<std::string>(),
                                                file + ": __metadata__ " + kSafetensorsFileMetadataKey));
  }
  return std::unique_ptr<TensorFile>(
      new MappedTensorFile("safetensors", std::move(source), std::move(chunks), std::move(file_meta)));
}

Result<std::unique_ptr<TensorFile>> open_safetensors_file(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(auto source, FileByteSource::open(path));
  return open_safetensors(std::move(source));
}

namespace {

constexpr uint64_t kDataAlignment = 4096;

// The order payloads are laid out in: those whose size is a page multiple (row blocks of most
// weight matrices) first, the rest after, each group in the given order. With the data section
// starting on a page, every payload of the first group then lies page-aligned in the file, and a
// loader can map row blocks of several shards side by side instead of copying them
// (shards/mapped_checkpoint.h). safetensors lets payloads lie in any order.
std::vector<size_t> payload_order(const std::vector<ChunkInfo>& chunks) {
  std::vector<size_t> order;
  for (size_t i = 0; i < chunks.size(); ++i)
    if (chunks[i].data_bytes % kDataAlignment == 0) order.push_back(i);
  for (size_t i = 0; i < chunks.size(); ++i)
    if (chunks[i].data_bytes % kDataAlignment != 0) order.push_back(i);
  return order;
}

// The header for `chunks` laid out in `order` with the given payload hashes, padded with spaces
// (which the format allows) so that the data section starts on a page.
std::string safetensors_header(const std::vector<ChunkInfo>& chunks, const std::vector<size_t>& order,
                               const nlohmann::json& metadata) {
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json meta = nlohmann::json::object();
  meta[kSafetensorsFileMetadataKey] = metadata.dump();
  uint64_t begin = 0;
  for (size_t i : order) {
    const ChunkInfo& c = chunks[i];
    const std::string key = c.label();
    std::vector<int64_t> shape = c.shape;
    if (c.dtype == DType::kF4E2M1X2 && !shape.empty()) shape.back() *= 2;  // safetensors counts nibbles
    header[key] = {{"dtype", c.dtype == DType::kF4E2M1X2 ? kSafetensorsF4 : dtype_name(c.dtype)},
                   {"shape", shape},
                   {"data_offsets", {begin, begin + c.data_bytes}}};
    meta[kSafetensorsChunkKeyPrefix + key] = nlohmann::json{
        {"name", c.name},
        {"component", c.component},
        {"global_shape", c.global_shape},
        {"offsets", c.offsets},
        {"sha256", c.sha256}}.dump();
    begin += c.data_bytes;
  }
  header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append(static_cast<size_t>((kDataAlignment - (8 + text.size()) % kDataAlignment) % kDataAlignment),
              ' ');
  return text;
}

}  // namespace

// Streams like the native writer: the header holds every payload's SHA-256, and every SHA-256 is 64
// hex digits, so the header laid out with placeholders has the final length; payloads are hashed
// once while they stream out, and the header (held in memory by the writer) is filled in last. The
// shard's digest is that header's (sha256_of "header"), a two-level hash tree as for native shards:
// safetensors payloads are contiguous, so header and payloads cover every byte of the file.
Result<WrittenFile> write_safetensors_file(const std::string& path, const std::vector<ChunkPayload>& chunks,
                                           const nlohmann::json& metadata) {
  CKPT_RETURN_IF_ERROR(check_chunk_payloads(chunks));
  WrittenFile out;
  out.path = path;
  out.sha256_of = "header";
  std::map<std::string, size_t> keys;
  for (const auto& c : chunks) {
    if (!keys.emplace(c.info.label(), keys.size()).second)
      return Status::invalid_argument(path + ": duplicate chunk " + c.info.label());
    ChunkInfo info = c.info;
    info.sha256 = std::string(64, '0');
    out.chunks.push_back(std::move(info));
  }
  const std::vector<size_t> order = payload_order(out.chunks);
  std::string text = safetensors_header(out.chunks, order, metadata);
  if (text.size() > kSafetensorsMaxHeaderBytes) {
    return Status::invalid_argument(path + ": header of " + std::to_string(text.size()) +
                                    " bytes exceeds the safetensors limit");
  }
  const uint64_t data_start = 8 + text.size();

  StreamingFileWriter::Options options;
  options.held_prefix_bytes = data_start;
  CKPT_ASSIGN_OR_RETURN(auto file, StreamingFileWriter::create_exclusive(path, options));
  CKPT_RETURN_IF_ERROR(file->append_zeros(static_cast<size_t>(data_start)));
  for (size_t i : order) {
    out.chunks[i].data_offset = file->bytes_appended();
    Sha256 sha;
    CKPT_RETURN_IF_ERROR(append_payload(*file, chunks[i], chunks[i].info.data_bytes, &sha));
    out.chunks[i].sha256 = sha.finish_hex();
  }
  const std::string final_text = safetensors_header(out.chunks, order, metadata);
  if (final_text.size() != text.size()) {
    return Status::invalid_argument(path + ": header length changed from " + std::to_string(text.size()) +
                                    " to " + std::to_string(final_text.size()) +
                                    " once hashes were filled in");
  }
  uint8_t len[8];
  encode_le64(len, final_text.size());
  CKPT_RETURN_IF_ERROR(file->patch_prefix(0, len, 8));
  CKPT_RETURN_IF_ERROR(file->patch_prefix(8, final_text.data(), final_text.size()));
  Sha256 digest;
  digest.update(len, 8);
  digest.update(final_text.data(), final_text.size());
  out.bytes = file->bytes_appended();
  CKPT_RETURN_IF_ERROR(file->finish());
  out.sha256 = digest.finish_hex();
  return out;
}

Result<std::string> safetensors_header_digest(const ByteSource& source) {
  uint8_t len[8];
  CKPT_RETURN_IF_ERROR(source.read_at(0, len, 8));
  const uint64_t n = decode_le64(len);
  if (n > kSafetensorsMaxHeaderBytes || n > source.size() - 8) {
    return Status::corruption(source.name() + " @0x0: header length " + std::to_string(n) + " out of bounds");
  }
  return sha256_hex_of_range(source, 0, 8 + n);
}

namespace {

// A weight_map file name must name a file inside the index's directory.
Status check_shard_name(const std::string& name, const std::string& where) {
  if (name.empty() || name[0] == '/' || name.find('\\') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Status::corruption(where + ": shard file name '" + name + "' is empty, absolute or has '\\'");
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    const std::string part = name.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") {
      return Status::corruption(where + ": shard file name '" + name + "' leaves the index directory");
    }
    start = slash + 1;
  }
  return Status::ok();
}

}  // namespace

Result<SafetensorsIndex> open_safetensors_index(const std::string& index_path) {
  CKPT_ASSIGN_OR_RETURN(std::string text, read_small_file(index_path, kMaxIndexBytes));
  if (!json_nesting_within(text, kMaxJsonNesting)) {
    return Status::corruption(index_path + ": nests deeper than " + std::to_string(kMaxJsonNesting));
  }
  CKPT_ASSIGN_OR_RETURN(nlohmann::json index, parse_json(text, index_path));
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* weight_map, json_object(index, "weight_map", index_path));
  SafetensorsIndex out;
  if (index.contains("metadata")) out.metadata = index["metadata"];
  std::map<std::string, std::vector<std::string>> by_file;
  for (auto it = weight_map->begin(); it != weight_map->end(); ++it) {
    if (!it->is_string()) {
      return Status::corruption(index_path + ": weight_map '" + it.key() + "': expected a file name, got " +
                                it->type_name());
    }
    const std::string file = it->get<std::string>();
    CKPT_RETURN_IF_ERROR(check_shard_name(file, index_path + ": weight_map '" + it.key() + "'"));
    by_file[file].push_back(it.key());
  }
  const auto slash = index_path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : index_path.substr(0, slash + 1);
  std::map<std::string, std::vector<std::string>> held;  // shard file -> the names it holds, sorted
  for (auto& [file, tensors] : by_file) {
    std::sort(tensors.begin(), tensors.end());
    SafetensorsIndexShard shard{file, dir + file, tensors, nullptr};
    // By its first bytes: a .bin index's shards are torch.save files.
    CKPT_ASSIGN_OR_RETURN(shard.opened, open_tensor_file(shard.path));
    std::vector<std::string>& present = held[file];
    for (const auto& c : shard.opened->chunks()) present.push_back(c.name);
    std::sort(present.begin(), present.end());
    out.shards.push_back(std::move(shard));
  }
  const auto holds = [&](const std::string& file, const std::string& tensor) {
    return std::binary_search(held[file].begin(), held[file].end(), tensor);
  };
  for (const SafetensorsIndexShard& shard : out.shards) {
    for (const auto& t : shard.tensors) {
      if (holds(shard.file, t)) continue;
      std::string elsewhere;
      for (const auto& [other, names] : held) {
        if (other != shard.file && holds(other, t)) elsewhere += (elsewhere.empty() ? "" : ", ") + other;
      }
      return Status::not_found(index_path + ": weight_map puts tensor '" + t + "' in " + shard.file +
                               ", which does not contain it (" + std::to_string(held[shard.file].size()) +
                               " tensors there" + (elsewhere.empty() ? "" : "; " + elsewhere + " holds it") +
                               ")");
    }
    for (const std::string& t : held[shard.file]) {
      const auto mapped = weight_map->find(t);
      if (mapped != weight_map->end() && mapped->get<std::string>() == shard.file) continue;
      SafetensorsIndexStray stray{shard.file, t,
                                  mapped == weight_map->end() ? "" : mapped->get<std::string>(), false, ""};
      stray.loaded_last = !stray.mapped_to.empty() && stray.mapped_to < shard.file;
      if (stray.mapped_to.empty()) {
        stray.message = "holds tensor '" + t +
                        "', which weight_map does not list: not part of the checkpoint (from_pretrained "
                        "keeps only listed names; older transformers load it into a parameter of that name)";
      } else if (stray.loaded_last) {
        stray.message = "holds tensor '" + t + "' too, which weight_map puts in " + stray.mapped_to +
                        ": from_pretrained loads the shards whole in file-name order, so the model gets " +
                        shard.file + "'s copy, not the one weight_map names (inspect reads " +
                        stray.mapped_to + "'s)";
      } else {
        stray.message = "holds tensor '" + t + "' too, which weight_map puts in " + stray.mapped_to +
                        ": from_pretrained loads " + shard.file + " first and " + stray.mapped_to +
                        "'s copy over it, so this copy is never used";
      }
      out.strays.push_back(std::move(stray));
    }
  }
  return out;
}

}  // namespace ckpt
