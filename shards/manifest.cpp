#include "shards/manifest.h"

#include <set>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/sha256.h"
#include "base/text.h"
#include "shards/manifest_fast_parse.h"
#include "shards/manifest_text.h"
#include "shards/shard_header_chunks.h"

namespace ckpt {

const ManifestTensor* Manifest::find_tensor(const std::string& name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool is_safe_relative_path(const std::string& path) {
  if (path.empty() || path.size() > 4096 || path[0] == '/') return false;
  if (path.find('\\') != std::string::npos || path.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = path.find('/', start);
    const std::string segment =
        path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return true;
}

int manifest_version_of(ChunkRecords records) {
  return records == ChunkRecords::kInManifest ? kManifestVersionChunksListed
                                              : kManifestVersionChunksInHeaders;
}

bool holds_chunks_in_header(const ManifestShard& shard) {
  return shard.format == "native" && shard.sha256_of == "header";
}

std::string manifest_to_json_text(const Manifest& m) {
  // Written field by field (shards/manifest_text.h): the same bytes as the JSON object's dump(1),
  // with the digest of its compact form embedded, without building the object.
  return manifest_pretty_text(m, manifest_content_sha256(m));
}

namespace {

Result<ManifestShard> parse_shard(const nlohmann::json& j, const std::string& where) {
  ManifestShard s;
  CKPT_ASSIGN_OR_RETURN(s.path, json_string(j, "path", where));
  if (!is_safe_relative_path(s.path)) {
    return Status::corruption(where + ": shard path '" + s.path +
                              "' leaves the checkpoint directory or is malformed");
  }
  CKPT_ASSIGN_OR_RETURN(s.format, json_string(j, "format", where));
  CKPT_ASSIGN_OR_RETURN(s.bytes, json_uint(j, "bytes", where));
  CKPT_ASSIGN_OR_RETURN(s.sha256, json_string(j, "sha256", where));
  CKPT_ASSIGN_OR_RETURN(s.rank, json_int(j, "rank", where));
  CKPT_ASSIGN_OR_RETURN(s.sha256_of, json_string(j, "sha256_of", where));
  if (s.sha256_of != "file" && s.sha256_of != "header") {
    return Status::corruption(where + ": sha256_of is '" + s.sha256_of + "', expected 'file' or 'header'");
  }
  if (s.sha256_of == "header" && s.format != "native" && s.format != "safetensors" && s.format != "hdf5") {
    return Status::corruption(where +
                              ": sha256_of 'header' is defined only for native, safetensors and hdf5 shards");
  }
  if (s.sha256.size() != 64)
    return Status::corruption(where + ": sha256 of '" + s.path + "' is not 64 hex digits");
  return s;
}

Result<ManifestChunk> parse_chunk(const nlohmann::json& j, size_t num_shards, const std::string& where) {
  ManifestChunk c;
  CKPT_ASSIGN_OR_RETURN(uint64_t shard, json_uint(j, "shard", where));
  if (shard >= num_shards) {
    return Status::corruption(where + ": shard index " + std::to_string(shard) + " but the manifest lists " +
                              std::to_string(num_shards) + " shards");
  }
  c.shard = static_cast<size_t>(shard);
  CKPT_ASSIGN_OR_RETURN(c.offsets, json_dims(j, "offsets", where));
  CKPT_ASSIGN_OR_RETURN(c.shape, json_dims(j, "shape", where));
  CKPT_ASSIGN_OR_RETURN(c.data_offset, json_uint(j, "data_offset", where));
  CKPT_ASSIGN_OR_RETURN(c.data_bytes, json_uint(j, "data_bytes", where));
  CKPT_ASSIGN_OR_RETURN(const std::string sha256, json_string(j, "sha256", where));
  const std::optional<Sha256Digest> digest = digest_from_hex(sha256);
  if (!digest) {
    return Status::corruption(where + ": sha256 " + quoted_for_message(sha256) +
                              " is not 64 lowercase hex digits");
  }
  c.sha256 = *digest;
  return c;
}

Result<ManifestTensor> parse_tensor(const nlohmann::json& j, size_t num_shards, ChunkRecords records,
                                    const std::string& where) {
  ManifestTensor t;
  CKPT_ASSIGN_OR_RETURN(t.name, json_string(j, "name", where));
  const std::string at = where + " (" + t.name + ")";
  CKPT_ASSIGN_OR_RETURN(t.component, json_string(j, "component", at));
  CKPT_ASSIGN_OR_RETURN(std::string dtype, json_string(j, "dtype", at));
  auto parsed = dtype_from_name(dtype);
  if (!parsed) return Status::corruption(at + ": unknown dtype '" + dtype + "'");
  t.dtype = *parsed;
  CKPT_ASSIGN_OR_RETURN(t.shape, json_dims(j, "shape", at));
  if (!checked_nbytes(t.shape, t.dtype))
    return Status::corruption(at + ": shape " + shape_to_string(t.shape) + " overflows");
  if (records == ChunkRecords::kInShardHeaders) {
    if (j.contains("chunks")) {
      return Status::corruption(at + ": lists chunks, which a version " +
                                std::to_string(kManifestVersionChunksInHeaders) +
                                " manifest keeps in its shard headers");
    }
    return t;
  }
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* chunks, json_array(j, "chunks", at));
  t.chunks.reserve(chunks->size());
  for (size_t i = 0; i < chunks->size(); ++i) {
    // The chunk's own name in an error ("... chunk 7") is built only when there is an error: once
    // per chunk it was a string allocation for each of hundreds of thousands of chunks.
    Result<ManifestChunk> c = parse_chunk((*chunks)[i], num_shards, at);
    if (!c.is_ok()) return parse_chunk((*chunks)[i], num_shards, at + " chunk " + std::to_string(i)).status();
    t.chunks.push_back(std::move(*c));
  }
  return t;
}

Result<Manifest> manifest_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace

Result<Manifest> parse_manifest(const std::string& text, const std::string& where) {
  return parse_manifest(text, where, nullptr);
}

Result<Manifest> parse_manifest(const std::string& text, const std::string& where, ManifestDigest* digest) {
  // simdjson for a manifest laid out as the writer lays it out; the nlohmann tree for any other
  // (its errors and digest are the reference, shards/manifest_fast_parse.h).
  if (std::optional<Manifest> fast = parse_manifest_fast(text, digest)) return std::move(*fast);
  return parse_manifest_reference(text, where, digest);
}

Result<Manifest> parse_manifest_reference(const std::string& text, const std::string& where,
                                          ManifestDigest* digest) {
  CKPT_ASSIGN_OR_RETURN(auto j, parse_json(text, where));
  CKPT_ASSIGN_OR_RETURN(Manifest m, manifest_from_json(j, where));
  // Manifests written before digests are version 1: a version-2 one without its digest was edited.
  if (m.chunk_records == ChunkRecords::kInShardHeaders && !j.contains(kManifestDigestField)) {
    return Status::corruption(where + ": a version " + std::to_string(kManifestVersionChunksInHeaders) +
                              " manifest without " + kManifestDigestField +
                              " (every writer of version 2 records it: the manifest was edited)");
  }
  // parse_manifest accepted an object, so the digest of the same tree is what manifest_digest
  // computes from the text.
  if (digest) *digest = take_embedded_digest(j, kManifestDigestField);
  return m;
}

namespace {

Result<Manifest> manifest_from_json(const nlohmann::json& j, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(std::string format, json_string(j, "format", where));
  if (format != kManifestFormat)
    return Status::corruption(where + ": format is '" + format + "', expected '" + kManifestFormat + "'");
  CKPT_ASSIGN_OR_RETURN(int64_t version, json_int(j, "version", where));
  if (version != kManifestVersionChunksListed && version != kManifestVersionChunksInHeaders) {
    return Status::not_supported(where + ": manifest version " + std::to_string(version) +
                                 ", this build reads " + std::to_string(kManifestVersionChunksListed) +
                                 " and " + std::to_string(kManifestVersionChunksInHeaders));
  }
  Manifest m;
  m.chunk_records =
      version == kManifestVersionChunksListed ? ChunkRecords::kInManifest : ChunkRecords::kInShardHeaders;
  CKPT_ASSIGN_OR_RETURN(m.step, json_int(j, "step", where));
  if (m.step < 0) return Status::corruption(where + ": negative step " + std::to_string(m.step));
  CKPT_ASSIGN_OR_RETURN(m.created_utc, json_string(j, "created_utc", where));
  CKPT_ASSIGN_OR_RETURN(m.world_size, json_int(j, "world_size", where));
  CKPT_ASSIGN_OR_RETURN(m.strategy, json_string(j, "strategy", where));
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* config, json_object(j, "config", where));
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* pins, json_object(j, "pins", where));
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* extra, json_object(j, "extra", where));
  m.config = *config;
  m.pins = *pins;
  m.extra = *extra;
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* shards, json_array(j, "shards", where));
  std::set<std::string> paths;
  for (size_t i = 0; i < shards->size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(ManifestShard s, parse_shard((*shards)[i], where + " shard " + std::to_string(i)));
    if (!paths.insert(s.path).second)
      return Status::corruption(where + ": shard path '" + s.path + "' listed twice");
    if (m.chunk_records == ChunkRecords::kInShardHeaders && !holds_chunks_in_header(s)) {
      return Status::corruption(where + " shard " + std::to_string(i) + ": '" + s.path + "' is a " +
                                s.format + " shard whose " + s.sha256_of +
                                " is hashed; a version 2 manifest's shards are native shards whose "
                                "header is hashed (it holds their chunk records)");
    }
    m.shards.push_back(std::move(s));
  }
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* tensors, json_array(j, "tensors", where));
  std::set<std::string> names;
  m.tensors.reserve(tensors->size());
  for (size_t i = 0; i < tensors->size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(ManifestTensor t, parse_tensor((*tensors)[i], m.shards.size(), m.chunk_records,
                                                         where + " tensor " + std::to_string(i)));
    if (!names.insert(t.name).second)
      return Status::corruption(where + ": tensor '" + t.name + "' listed twice");
    m.tensors.push_back(std::move(t));
  }
  return m;
}

}  // namespace

Result<ManifestDigest> manifest_digest(const std::string& text, const std::string& where) {
  return read_embedded_digest(text, kManifestDigestField, where);
}

Result<Manifest> read_manifest_file(const std::string& checkpoint_dir, ManifestDigest* digest_out) {
  return read_manifest_file(checkpoint_dir, digest_out, nullptr);
}

Result<Manifest> read_manifest_file(const std::string& checkpoint_dir, ManifestDigest* digest_out,
                                    std::vector<ShardHeaderChunks>* header_reads) {
  CKPT_ASSIGN_OR_RETURN(Manifest manifest, read_manifest_fields(checkpoint_dir, digest_out));
  std::vector<ShardHeaderChunks> read = add_chunks_from_shard_headers(checkpoint_dir, manifest);
  CKPT_RETURN_IF_ERROR(first_shard_header_problem(read));
  if (header_reads && manifest.chunk_records == ChunkRecords::kInShardHeaders)
    *header_reads = std::move(read);
  return manifest;
}

Result<Manifest> read_manifest_fields(const std::string& checkpoint_dir, ManifestDigest* digest_out) {
  const std::string path = checkpoint_dir + "/" + kManifestFileName;
  CKPT_ASSIGN_OR_RETURN(std::string text, read_small_file(path, kMaxManifestBytes));
  ManifestDigest digest;
  CKPT_ASSIGN_OR_RETURN(Manifest manifest, parse_manifest(text, path, &digest));
  if (digest.present && !digest.matches()) {
    return Status::corruption(path + ": " + kManifestDigestField + " mismatch: recorded " + digest.recorded +
                              ", content hashes to " + digest.computed + " (edited after commit)");
  }
  if (digest_out) *digest_out = std::move(digest);
  return manifest;
}

}  // namespace ckpt
