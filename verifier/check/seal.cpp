#include "verifier/check/seal.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>

#include "base/byte_source.h"
#include "base/embedded_digest.h"
#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/parallel_jobs.h"
#include "base/seconds_since.h"
#include "base/sha256.h"
#include "base/sha256_batch.h"
#include "base/sha256_ranges.h"
#include "base/text.h"
#include "distributed/share_exchange.h"
#include "distributed/share_split.h"
#include "distributed/step_gather.h"
#include "formats/dcp_checkpoint.h"
#include "formats/dtype.h"
#include "formats/shard_formats.h"
#include "formats/tensor_file_open.h"
#include "shards/checkpoint_reader.h"
#include "shards/manifest.h"
#include "verifier/check/checkpoint_kind.h"
#include "verifier/check/checkpoint_verifier.h"
#include "verifier/check/signature.h"

namespace ckpt {
namespace {

constexpr const char* kSealFormat = "ckptcheck.seal";
constexpr int64_t kSealVersion = 1;
constexpr uint64_t kMaxSealBytes = 256ull << 20;
constexpr uint64_t kMaxIntegrityBytes = 64ull << 20;
constexpr int kMaxSealDepth = 16;  // HF Trainer and Megatron folders nest a few levels at most

uint64_t file_size_or_zero(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// A seal, its signature and integrity.json describe the checkpoint; they are not part of it.
bool is_seal_bookkeeping(const std::string& relative) {
  const std::string name = base_name(relative);
  return name == kSealFileName || name == std::string(kSealFileName) + ".sig" ||
         ends_with(name, kSealFileSuffix) || ends_with(name, std::string(kSealFileSuffix) + ".sig") ||
         relative == kIntegrityFileName;
}

// The directory the sealed paths are relative to, and those paths: every file under a directory,
// or the one file.
struct SealTarget {
  std::string dir;
  std::vector<std::string> files;
  bool single_file = false;
};

Result<SealTarget> seal_target(const std::string& raw) {
  const std::string path = strip_trailing_slashes(raw);
  if (!path_exists(path)) return Status::io_error(path + ": no such file or directory");
  SealTarget t;
  if (is_directory(path)) {
    t.dir = path;
    for (auto& f : list_files_under(path, kMaxSealDepth)) {
      if (!is_seal_bookkeeping(f)) t.files.push_back(std::move(f));
    }
  } else if (is_regular_file(path)) {
    t.dir = parent_dir(path);
    t.files = {base_name(path)};
    t.single_file = true;
  } else {
    return Status::invalid_argument(path + ": not a regular file or directory");
  }
  return t;
}

// Hashes one file and, where a reader recognises it, each tensor's byte range.
// A DCP data file is a run of storage items, not a tensor file: `.metadata` says where each item
// lies, so each item's byte range is sealed as one "tensor" (a chunk, or a bytes entry).
// A DCP directory may be the sealed directory itself or lie anywhere below it (a run folder holding
// `checkpoints/iter_100/`): its data files are recognised by the `.metadata` beside them, never sniffed
// as zip archives (a `.distcp` is a run of archives, not one).
struct ItemRanges {
  std::map<std::string, std::vector<SealedTensor>> by_file;  // data file (relative) -> its items
  std::set<std::string> metadata_files;                      // each DCP directory's `.metadata`
};

void add_dcp_item_ranges(const std::string& root, const std::string& sub, ItemRanges& out) {
  const std::string prefix = sub.empty() ? "" : sub + "/";
  auto dcp = DcpCheckpoint::open(sub.empty() ? root : root + "/" + sub);
  out.metadata_files.insert(prefix + kDcpMetadataFileName);
  if (!dcp.is_ok()) return;  // the files are still sealed whole; verify reports the DCP problem
  const DcpMetadata& md = dcp->metadata();
  std::map<size_t, std::pair<const DcpTensor*, const DcpChunk*>> chunk_of_item;
  for (const auto& t : md.tensors)
    for (const auto& c : t.chunks)
      if (c.item != SIZE_MAX) chunk_of_item[c.item] = {&t, &c};
  for (size_t i = 0; i < md.items.size(); ++i) {
    const DcpItem& item = md.items[i];
    SealedTensor t{item.label(), "bytes", {}, item.offset, item.length, ""};
    if (auto it = chunk_of_item.find(i); it != chunk_of_item.end()) {
      t.dtype = dtype_name(it->second.first->dtype);
      t.shape = it->second.second->sizes.to_vector();
    }
    out.by_file[prefix + item.relative_path].push_back(std::move(t));
  }
}

// Every DCP directory in the sealed file list (the root, or any folder whose `.metadata` is listed).
ItemRanges dcp_item_ranges(const std::string& root, const std::vector<std::string>& files) {
  ItemRanges out;
  for (const std::string& f : files) {
    if (base_name(f) != kDcpMetadataFileName) continue;
    const std::string sub = f.find('/') == std::string::npos ? "" : parent_dir(f);
    if (is_dcp_directory(sub.empty() ? root : root + "/" + sub)) add_dcp_item_ranges(root, sub, out);
  }
  return out;
}

// Messages stored in a seal name paths relative to the sealed root, never where the machine that
// sealed kept it: a seal is byte-identical wherever the same bytes are sealed.
std::string relative_message(std::string message, const std::string& path, const std::string& relative) {
  for (size_t at = message.find(path); at != std::string::npos; at = message.find(path, at + relative.size()))
    message.replace(at, path.size(), relative);
  return message;
}

// One file of the seal before its bytes are hashed: what it is, which byte ranges get a digest, and
// the open source they are read from. The digests are filled in by hash_sealed_files.
struct FileToSeal {
  SealedFile sealed;  // every sha256 empty until hashed
  std::unique_ptr<FileByteSource> source;
};

// Lists one file's sealed ranges without hashing a byte: the whole file (and its pieces when it is
// larger than one), and, where a reader recognises it, each tensor's byte range.
Result<FileToSeal> list_file_to_seal(const std::string& dir, const std::string& relative,
                                     const ItemRanges& dcp_items, uint64_t piece_bytes) {
  CKPT_ASSIGN_OR_RETURN(std::string path, resolve_shard_path(dir, relative));
  FileToSeal out;
  SealedFile& f = out.sealed;
  f.path = relative;
  CKPT_ASSIGN_OR_RETURN(out.source, FileByteSource::open(path));
  f.bytes = out.source->size();
  if (piece_bytes > 0 && f.bytes > piece_bytes) {
    f.piece_bytes = piece_bytes;
    f.pieces.assign((f.bytes + piece_bytes - 1) / piece_bytes, std::string());
  }
  if (dcp_items.metadata_files.count(relative)) {
    f.format = "dcp";  // the item index itself: sealed whole, nothing to list
    return out;
  }
  if (auto items = dcp_items.by_file.find(relative); items != dcp_items.by_file.end()) {
    f.format = "dcp";
    for (const SealedTensor& t : items->second) {
      if (t.offset > f.bytes || t.bytes > f.bytes - t.offset) {
        // verify names this as item_outside_file; the seal keeps the file hash only.
        f.tensors.clear();
        f.tensors_unread = relative + ": item '" + t.name + "' @" + std::to_string(t.offset) + "+" +
                           std::to_string(t.bytes) + " lies outside the " + std::to_string(f.bytes) +
                           "-byte file";
        return out;
      }
      f.tensors.push_back(t);
    }
    return out;
  }
  auto opened = open_tensor_file(path);
  if (!opened.is_ok()) {
    // Not a tensor file at all (JSON, tokenizer, a pickle of plain data) is normal in a checkpoint
    // folder; a tensor file our reader refuses is sealed at file level and says why.
    if (opened.status().code() != StatusCode::kNotSupported ||
        opened.status().message().find("unknown tensor file format") == std::string::npos) {
      f.tensors_unread = relative_message(opened.status().message(), path, relative);
    }
    return out;
  }
  const TensorFile& file = **opened;
  f.format = file.format_name();
  // A tensor whose bytes are a plain range of the file gets that range; a container member that
  // holds tensors only compressed (a .keras archive's deflated member) gets its compressed bytes as
  // one range, so a change inside it is still named, by member.
  const std::vector<TensorFile::PackedRange> packed = file.packed_payload_ranges();
  size_t in_ranges = 0;
  for (size_t i = 0; i < file.chunks().size(); ++i) in_ranges += file.chunk_is_file_range(i) ? 1 : 0;
  if (in_ranges == 0 && packed.empty()) {
    f.tensors_unread = relative + ": " + f.format + " payloads are not plain byte ranges of the file";
    return out;
  }
  for (const TensorFile::PackedRange& p : packed) {
    if (p.offset > f.bytes || p.bytes > f.bytes - p.offset)
      return Status::corruption(path + " @" + std::to_string(p.offset) + ": member '" + p.name + "' needs " +
                                std::to_string(p.bytes) + " bytes, the file has " + std::to_string(f.bytes));
    f.tensors.push_back({p.name, "compressed", {}, p.offset, p.bytes, ""});
  }
  for (size_t i = 0; i < file.chunks().size(); ++i) {
    const ChunkInfo& c = file.chunks()[i];
    if (!file.chunk_is_file_range(i)) continue;  // inside a packed range, sealed above
    if (!c.alias_of.empty()) continue;           // its byte range is its target's, sealed under that name
    if (c.data_offset > f.bytes || c.data_bytes > f.bytes - c.data_offset) {
      return Status::corruption(path + " @" + std::to_string(c.data_offset) + ": tensor '" + c.name +
                                "' needs " + std::to_string(c.data_bytes) + " bytes, the file has " +
                                std::to_string(f.bytes));
    }
    f.tensors.push_back({c.name, dtype_name(c.dtype), c.shape, c.data_offset, c.data_bytes, ""});
  }
  return out;
}

// The digests a HashingFileTail took of this very file as it was written, if nothing changed it since.
const WrittenFileDigests* written_digests_of(const FileByteSource& source,
                                             const std::vector<WrittenFileDigests>& written) {
  struct stat st {};
  if (written.empty() || ::fstat(source.fd(), &st) != 0) return nullptr;
  for (const WrittenFileDigests& w : written) {
    if (w.describes(st)) return &w;
  }
  return nullptr;
}

// Hashes every listed range of `files` (each whole file, its pieces, its tensors) as independent
// units on `jobs` workers, two ranges per worker at a time, largest first. A whole file, the one
// range that cannot be split, starts first and is paired with small ranges while the other cores
// take the rest: sealing one 1 GiB torch.save file costs about one file's hashing time instead of
// a pass for the file and its pieces followed by a pass for its tensors. Ranges a HashingFileTail
// already hashed (`written`, ckptcheck.torch.save's path) are taken from it, not hashed again.
// A file whose range could not be read becomes that read error.
void hash_sealed_files(std::vector<Result<FileToSeal>>& files, const std::vector<WrittenFileDigests>& written,
                       size_t jobs, const std::function<void(uint64_t, uint64_t)>& on_progress) {
  struct Unit {
    size_t file;
    RangeToHash range;
    std::string* into;
  };
  std::vector<Unit> units;
  std::vector<std::vector<Result<std::string>>> digests(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    if (!files[i].is_ok()) continue;
    SealedFile& f = files[i]->sealed;
    const ByteSource* source = files[i]->source.get();
    digests[i].assign(1 + f.pieces.size() + f.tensors.size(), Status::io_error("not hashed"));
    size_t slot = 0;
    const WrittenFileDigests* known = written_digests_of(*files[i]->source, written);
    if (known) {
      f.sha256 = known->sha256;
    } else {
      units.push_back({i, {source, 0, f.bytes, &digests[i][slot++]}, &f.sha256});
    }
    if (known && known->piece_bytes == f.piece_bytes && known->pieces.size() == f.pieces.size()) {
      f.pieces = known->pieces;
    } else {
      for (size_t p = 0; p < f.pieces.size(); ++p) {
        const uint64_t start = p * f.piece_bytes;
        units.push_back({i,
                         {source, start, std::min(f.piece_bytes, f.bytes - start), &digests[i][slot++]},
                         &f.pieces[p]});
      }
    }
    for (SealedTensor& t : f.tensors) {
      if (known) {
        auto w = std::lower_bound(known->ranges.begin(), known->ranges.end(), t.offset,
                                  [](const WrittenRange& r, uint64_t offset) { return r.offset < offset; });
        if (w != known->ranges.end() && w->offset == t.offset && w->bytes == t.bytes) {
          t.sha256 = w->sha256;
          continue;
        }
      }
      units.push_back({i, {source, t.offset, t.bytes, &digests[i][slot++]}, &t.sha256});
    }
  }
  std::vector<RangeToHash> ranges;
  uint64_t total = 0;
  for (const Unit& u : units) {
    ranges.push_back(u.range);
    total += u.range.length;
  }
  std::atomic<uint64_t> hashed{0};
  std::function<void()> report;
  if (on_progress) report = [&] { on_progress(hashed.load(), total); };
  sha256_ranges_on_workers(ranges, jobs, &hashed, report);
  for (const Unit& u : units) {
    if (!files[u.file].is_ok()) continue;
    if (!u.range.digest->is_ok()) {
      files[u.file] = u.range.digest->status();
      continue;
    }
    *u.into = **u.range.digest;
  }
}

nlohmann::json sealed_file_to_json(const SealedFile& f) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : f.tensors) {
    tensors.push_back({{"name", t.name},
                       {"dtype", t.dtype},
                       {"shape", t.shape},
                       {"offset", t.offset},
                       {"bytes", t.bytes},
                       {"sha256", t.sha256}});
  }
  nlohmann::json j = {{"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}, {"tensors", tensors}};
  if (!f.pieces.empty()) {
    j["piece_bytes"] = f.piece_bytes;
    j["pieces"] = f.pieces;
  }
  if (!f.format.empty()) j["format"] = f.format;
  if (!f.tensors_unread.empty()) j["tensors_unread"] = f.tensors_unread;
  return j;
}

Result<std::string> sha256_field(const nlohmann::json& j, const char* key, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(std::string s, json_string(j, key, where));
  if (!is_sha256_hex(s)) return Status::corruption(where + ": " + key + ": expected 64 lowercase hex digits");
  return s;
}

Result<SealedTensor> parse_sealed_tensor(const nlohmann::json& j, const std::string& where,
                                         uint64_t file_bytes) {
  if (!j.is_object()) return Status::corruption(where + ": expected an object");
  SealedTensor t;
  CKPT_ASSIGN_OR_RETURN(t.name, json_string(j, "name", where));
  CKPT_ASSIGN_OR_RETURN(t.dtype, json_string(j, "dtype", where));
  CKPT_ASSIGN_OR_RETURN(t.shape, json_dims(j, "shape", where, 64));
  CKPT_ASSIGN_OR_RETURN(t.offset, json_uint(j, "offset", where));
  CKPT_ASSIGN_OR_RETURN(t.bytes, json_uint(j, "bytes", where));
  CKPT_ASSIGN_OR_RETURN(t.sha256, sha256_field(j, "sha256", where));
  if (t.offset > file_bytes || t.bytes > file_bytes - t.offset) {
    return Status::corruption(where + ": '" + t.name + "' range @" + std::to_string(t.offset) + "+" +
                              std::to_string(t.bytes) + " lies outside its " + std::to_string(file_bytes) +
                              "-byte file");
  }
  return t;
}

Result<SealedFile> parse_sealed_file(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return Status::corruption(where + ": expected an object");
  SealedFile f;
  CKPT_ASSIGN_OR_RETURN(f.path, json_string(j, "path", where));
  if (!is_safe_relative_path(f.path)) {
    return Status::corruption(where + ": path '" + f.path + "' leaves the sealed directory or is malformed");
  }
  CKPT_ASSIGN_OR_RETURN(f.bytes, json_uint(j, "bytes", where));
  CKPT_ASSIGN_OR_RETURN(f.sha256, sha256_field(j, "sha256", where));
  if (j.contains("pieces") || j.contains("piece_bytes")) {
    CKPT_ASSIGN_OR_RETURN(f.piece_bytes, json_uint(j, "piece_bytes", where));
    CKPT_ASSIGN_OR_RETURN(const nlohmann::json* pieces, json_array(j, "pieces", where));
    if (f.piece_bytes == 0) return Status::corruption(where + ": piece_bytes: expected > 0, got 0");
    const uint64_t expected = f.bytes / f.piece_bytes + (f.bytes % f.piece_bytes ? 1 : 0);
    if (pieces->size() != expected) {
      return Status::corruption(where + ": pieces: expected " + std::to_string(expected) + " digests for " +
                                std::to_string(f.bytes) + " bytes in pieces of " +
                                std::to_string(f.piece_bytes) + ", got " + std::to_string(pieces->size()));
    }
    for (size_t i = 0; i < pieces->size(); ++i) {
      const nlohmann::json& d = (*pieces)[i];
      if (!d.is_string() || !is_sha256_hex(d.get<std::string>())) {
        return Status::corruption(where + ": pieces[" + std::to_string(i) +
                                  "]: expected 64 lowercase hex digits");
      }
      f.pieces.push_back(d.get<std::string>());
    }
  }
  if (j.contains("format")) {
    CKPT_ASSIGN_OR_RETURN(f.format, json_string(j, "format", where));
  }
  if (j.contains("tensors_unread")) {
    CKPT_ASSIGN_OR_RETURN(f.tensors_unread, json_string(j, "tensors_unread", where));
  }
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* tensors, json_array(j, "tensors", where));
  for (size_t i = 0; i < tensors->size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(
        SealedTensor t,
        parse_sealed_tensor((*tensors)[i], where + ".tensors[" + std::to_string(i) + "]", f.bytes));
    f.tensors.push_back(std::move(t));
  }
  return f;
}

// Megatron-Core's integrity.json: {"algorithm": "sha256", "files": {"<relative path>": "<hex>"}}.
Result<std::map<std::string, std::string>> read_integrity_file(const std::string& path) {
  CKPT_ASSIGN_OR_RETURN(nlohmann::json j, read_json_file(path, kMaxIntegrityBytes));
  if (!j.is_object()) return Status::corruption(path + ": expected a JSON object");
  CKPT_ASSIGN_OR_RETURN(std::string algorithm, json_string(j, "algorithm", path));
  if (algorithm != "sha256") {
    return Status::not_supported(path + ": algorithm '" + algorithm + "', expected 'sha256'");
  }
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* files, json_object(j, "files", path));
  std::map<std::string, std::string> out;
  for (const auto& [name, digest] : files->items()) {
    if (!is_safe_relative_path(name)) {
      return Status::corruption(path + ": files: '" + name + "' leaves the directory or is malformed");
    }
    if (!digest.is_string() || !is_sha256_hex(digest.get<std::string>())) {
      return Status::corruption(path + ": files['" + name + "']: expected 64 lowercase hex digits");
    }
    out[name] = digest.get<std::string>();
  }
  return out;
}

std::string integrity_to_json_text(const Seal& seal) {
  nlohmann::json files = nlohmann::json::object();
  for (const auto& f : seal.files) files[f.path] = f.sha256;
  return nlohmann::json{{"algorithm", "sha256"}, {"files", files}}.dump(1) + "\n";
}

// What one file's check found; merged into the report in file order.
struct FileFinding {
  std::vector<VerifyIssue> errors;
  std::string sha256;  // of the file as it is now, when it could be hashed
  uint64_t bytes_hashed = 0;
};

// Where inside a changed file the change is: each recorded tensor range is hashed again.
void locate_change(const std::string& path, const ByteSource& source, const SealedFile& sealed,
                   FileFinding& out) {
  size_t changed = 0;
  for (const SealedTensor& t : sealed.tensors) {
    auto now = sha256_hex_of_range(source, t.offset, t.bytes);
    out.bytes_hashed += t.bytes;
    if (now.is_ok() && *now == t.sha256) continue;
    ++changed;
    out.errors.push_back({verify_code::kSealTensorSha256Mismatch, sealed.path, t.name,
                          path + " @" + std::to_string(t.offset) + ".." + std::to_string(t.offset + t.bytes) +
                              ": tensor '" + t.name + "' (" + t.dtype +
                              ") does not match its seal: expected " + t.sha256 + ", got " +
                              (now.is_ok() ? *now : now.status().message())});
  }
  if (changed == 0 && !sealed.tensors.empty()) {
    out.errors.push_back({verify_code::kSealFileSha256Mismatch, sealed.path, "",
                          path + ": every tensor matches its seal; the change is outside their payloads "
                                 "(header, pickle, metadata or padding)"});
  }
}

// What to hash of one sealed file: the whole file, or its pieces (each a parallel unit) when the
// seal has them and the size still matches.
struct FilePlan {
  std::string path;  // resolved; empty when the file cannot be opened (the error is in `finding`)
  std::shared_ptr<const ByteSource> source;
  bool by_pieces = false;
  std::vector<Result<std::string>> pieces_now;                          // filled by the units, one slot each
  Result<std::string> whole_now = Status::io_error("file not hashed");  // when not by pieces
  FileFinding finding;
};

FilePlan plan_sealed_file(const std::string& dir, const SealedFile& sealed) {
  FilePlan plan;
  auto add = [&](const char* code, std::string message) {
    plan.finding.errors.push_back({code, sealed.path, "", std::move(message)});
  };
  auto path = resolve_shard_path(dir, sealed.path);
  if (!path.is_ok()) {
    add(verify_code::kSealFileMissing, path.status().message());
    return plan;
  }
  auto source = FileByteSource::open(*path);
  if (!source.is_ok()) {
    add(verify_code::kSealFileMissing, source.status().message());
    return plan;
  }
  plan.path = *path;
  plan.source = std::move(*source);
  const uint64_t size = plan.source->size();
  if (size != sealed.bytes) {
    add(verify_code::kSealFileSizeMismatch, *path + ": " + std::to_string(size) + " bytes, sealed with " +
                                                std::to_string(sealed.bytes) +
                                                (size < sealed.bytes ? " (truncated)" : " (grown)"));
  }
  plan.by_pieces = !sealed.pieces.empty() && size == sealed.bytes;
  if (plan.by_pieces) plan.pieces_now.assign(sealed.pieces.size(), Status::io_error("piece not hashed"));
  return plan;
}

// One unit of parallel work: a whole file (piece == SIZE_MAX) or one piece of it.
struct HashUnit {
  size_t file = 0;
  size_t piece = SIZE_MAX;
};

// The bytes a unit hashes and the slot its digest goes to: each unit writes only its own slot.
RangeToHash range_of_unit(const HashUnit& unit, const SealedFile& sealed, FilePlan& plan) {
  if (unit.piece == SIZE_MAX) return {plan.source.get(), 0, plan.source->size(), &plan.whole_now};
  const uint64_t start = unit.piece * sealed.piece_bytes;
  const uint64_t length = std::min(sealed.piece_bytes, sealed.bytes - start);
  return {plan.source.get(), start, length, &plan.pieces_now[unit.piece]};
}

// After the units ran: the file's verdict, and where inside it a change is.
void conclude_sealed_file(const SealedFile& sealed, FilePlan& plan) {
  FileFinding& out = plan.finding;
  if (!plan.source) return;
  if (plan.by_pieces) {
    out.bytes_hashed += sealed.bytes;
    // A piece that could not be read is reported as the whole file's read failure is.
    for (const Result<std::string>& piece : plan.pieces_now) {
      if (!piece.is_ok()) {
        out.errors.push_back({verify_code::kSealFileMissing, sealed.path, "", piece.status().message()});
        return;
      }
    }
    std::string changed;
    size_t count = 0;
    for (size_t i = 0; i < sealed.pieces.size(); ++i) {
      if (*plan.pieces_now[i] == sealed.pieces[i]) continue;
      const uint64_t start = i * sealed.piece_bytes;
      const uint64_t end = std::min(start + sealed.piece_bytes, sealed.bytes);
      if (count++ < 4)
        changed += (changed.empty() ? "" : ", ") + std::to_string(start) + ".." + std::to_string(end);
    }
    // Every piece matches: the bytes are the sealed ones, so the whole-file digest is too.
    if (count == 0) {
      out.sha256 = sealed.sha256;
      return;
    }
    out.errors.push_back({verify_code::kSealFileSha256Mismatch, sealed.path, "",
                          plan.path + ": " + std::to_string(count) + " of " +
                              std::to_string(sealed.pieces.size()) + " sealed pieces differ (bytes " +
                              changed + (count > 4 ? ", ..." : "") + ")"});
    locate_change(plan.path, *plan.source, sealed, out);
    return;
  }
  out.bytes_hashed += plan.source->size();
  if (!plan.whole_now.is_ok()) {
    out.errors.push_back({verify_code::kSealFileMissing, sealed.path, "", plan.whole_now.status().message()});
    return;
  }
  out.sha256 = *plan.whole_now;
  if (out.sha256 == sealed.sha256) return;
  if (plan.source->size() == sealed.bytes) {
    out.errors.push_back({verify_code::kSealFileSha256Mismatch, sealed.path, "",
                          plan.path + ": sha256 mismatch: sealed " + sealed.sha256 + ", now " + out.sha256});
  }
  locate_change(plan.path, *plan.source, sealed, out);
}

void check_seal_signature(const std::string& seal_path, const std::string& text, const std::string& pubkey,
                          VerifyReport& report) {
  check_detached_signature(seal_path + ".sig", text, pubkey, report);
}

// Where the seal (and integrity.json, when asked for) will be written. Neither is ever replaced: a
// seal written over an old one would vouch for whatever the checkpoint has become.
Status choose_seal_outputs(const std::string& path, const SealTarget& target, const SealOptions& options,
                           SealSummary& summary) {
  summary.seal_path = seal_path_for(path);
  if (path_exists(summary.seal_path)) {
    return Status::invalid_argument(summary.seal_path +
                                    ": already exists; a seal is never replaced (remove it first only if the "
                                    "checkpoint is known to be good)");
  }
  if (options.write_integrity) {
    if (target.single_file) return Status::invalid_argument(path + ": `write_integrity` seals a directory");
    summary.integrity_path = target.dir + "/" + kIntegrityFileName;
    if (path_exists(summary.integrity_path))
      return Status::invalid_argument(summary.integrity_path + ": already exists; never replaced");
  }
  return Status::ok();
}

// Seals the target's files in parallel, one slot per file. Distributed: this task seals its share of
// the files (the same split on every task), then takes in every other file's seal.
Result<std::vector<Result<SealedFile>>> seal_every_file(const SealTarget& target, const SealOptions& options,
                                                        ByteCollective* world) {
  uint64_t total = 0;
  for (const auto& f : target.files) {
    CKPT_ASSIGN_OR_RETURN(std::string resolved, resolve_shard_path(target.dir, f));
    total += file_size_or_zero(resolved);
  }
  const uint64_t piece_bytes = options.piece_bytes ? options.piece_bytes : seal_piece_bytes(total);
  const ItemRanges dcp_items = target.single_file ? ItemRanges() : dcp_item_ranges(target.dir, target.files);
  const size_t count = target.files.size();
  std::vector<Result<SealedFile>> sealed(count, Status::io_error("not sealed"));
  std::vector<uint64_t> sizes;
  for (const auto& f : target.files) {
    auto resolved = resolve_shard_path(target.dir, f);
    sizes.push_back(resolved.is_ok() ? file_size_or_zero(*resolved) : 0);
  }
  const std::vector<int> owners =
      world ? split_by_size(sizes, world->world_size()) : std::vector<int>(count, 0);
  std::vector<size_t> mine;
  for (size_t i = 0; i < count; ++i) {
    if (owners[i] == (world ? world->rank() : 0)) mine.push_back(i);
  }
  // Listing opens each file and reads its index (a zip directory, a header): cheap, one file a job.
  std::vector<Result<FileToSeal>> listed;
  for (size_t k = 0; k < mine.size(); ++k) listed.emplace_back(Status::io_error("not listed"));
  run_parallel(mine.size(), resolve_jobs(options.jobs, mine.size()), [&](size_t k) {
    listed[k] = list_file_to_seal(target.dir, target.files[mine[k]], dcp_items, piece_bytes);
  });
  hash_sealed_files(listed, options.written, options.jobs, options.on_progress);
  for (size_t k = 0; k < mine.size(); ++k) {
    if (listed[k].is_ok()) {
      sealed[mine[k]] = std::move(listed[k]->sealed);
    } else {
      sealed[mine[k]] = listed[k].status();
    }
  }
  if (world) {
    CKPT_RETURN_IF_ERROR(exchange_unit_results(
        *world, "seal: files", sizes, owners,
        [&](size_t i) -> nlohmann::json {
          if (sealed[i].is_ok()) return {0, sealed_file_to_json(*sealed[i])};
          return {static_cast<int>(sealed[i].status().code()), sealed[i].status().message()};
        },
        [&](size_t i, const nlohmann::json& r) -> Status {
          const int code = r.at(0).get<int>();
          if (code == 0) {
            sealed[i] = parse_sealed_file(r.at(1), "rank result for " + target.files[i]);
          } else {
            sealed[i] = status_from_code(code, r.at(1).get<std::string>());
          }
          return Status::ok();
        }));
  }
  return sealed;
}

// One writer: rank 0 (or the only process); every task then learns how the write went, so all of
// them succeed or fail together.
Status write_seal_once(const Seal& seal, const SealSummary& summary, bool write_integrity,
                       ByteCollective* world) {
  Status written = Status::ok();
  if (!world || world->rank() == 0) {
    written = write_file_atomically(summary.seal_path, seal_to_json_text(seal));
    if (written.is_ok() && write_integrity)
      written = write_file_atomically(summary.integrity_path, integrity_to_json_text(seal));
  }
  if (world) {
    CKPT_ASSIGN_OR_RETURN(
        std::vector<std::string> all,
        all_gather_step(*world, "seal: written", written.is_ok() ? std::string() : written.to_string()));
    if (!all[0].empty()) return Status::io_error("rank 0 could not write the seal: " + all[0]);
  }
  return written;
}

// The seal verify checks against: read, its digest checked, its signature checked when a public
// key is given. A seal that cannot be trusted is a finding, not an error, and verify goes on with
// no sealed files: integrity.json, when present, can still vouch for the bytes.
Result<Seal> read_seal_to_verify(const std::string& seal_path, const std::string& integrity_path,
                                 bool has_integrity, const std::string& pubkey_path, VerifyReport& report) {
  Seal seal;
  if (path_exists(seal_path)) {
    auto text = read_small_file(seal_path, kMaxSealBytes);
    if (!text.is_ok()) {
      report.add_error(verify_code::kSealInvalid, "", "", text.status().message());
    } else {
      if (!pubkey_path.empty()) check_seal_signature(seal_path, *text, pubkey_path, report);
      auto parsed = parse_seal(*text, seal_path);
      auto digest = read_embedded_digest(*text, kSealDigestField, seal_path);
      if (!parsed.is_ok()) {
        report.add_error(verify_code::kSealInvalid, "", "", parsed.status().message());
      } else if (!digest.is_ok() || !digest->matches()) {
        report.add_error(verify_code::kSealDigestMismatch, "", "",
                         seal_path + ": " + kSealDigestField + " " +
                             (digest.is_ok() && digest->present
                                  ? "mismatch: recorded " + digest->recorded + ", content hashes to " +
                                        digest->computed + " (edited after sealing)"
                                  : std::string("missing")));
      } else {
        seal = std::move(*parsed);
      }
    }
  } else if (!has_integrity) {
    return Status::not_found(seal_path + ": no seal (run `ckptcheck seal " + report.path + "` after saving)");
  } else if (!pubkey_path.empty()) {
    report.add_error(verify_code::kSignatureMissing, "", "",
                     integrity_path + " carries no signature; --pubkey needs a signed seal");
  }
  return seal;
}

// Every sealed file's plan and the units of parallel work they make. The units' digest slots point
// into `plans`, so a SealHashWork is not copied once the units are ranged.
struct SealHashWork {
  std::vector<FilePlan> plans;  // one per sealed file, in seal order
  std::vector<HashUnit> units;
  uint64_t total = 0;  // bytes of the files that could be opened, for progress
};

SealHashWork plan_seal_hashing(const std::string& dir, const Seal& seal, bool quick) {
  SealHashWork work;
  for (size_t i = 0; i < seal.files.size(); ++i) {
    work.plans.push_back(plan_sealed_file(dir, seal.files[i]));
    if (!work.plans.back().source) continue;
    work.total += work.plans.back().source->size();
    if (quick) continue;  // sizes only: plan_sealed_file compared them
    if (work.plans.back().by_pieces) {
      for (size_t p = 0; p < seal.files[i].pieces.size(); ++p) work.units.push_back({i, p});
    } else {
      work.units.push_back({i, SIZE_MAX});
    }
  }
  return work;
}

// Hashes every unit into its slot in `work.plans`. Each worker hashes two units at once, largest
// first, and takes the next whenever one ends. Distributed: this task hashes only its share of the
// units (the same split on every task), then every task takes in the others' digests, so the
// findings that follow are a single process's.
Status hash_seal_units(const Seal& seal, SealHashWork& work, const VerifyOptions& options) {
  std::atomic<uint64_t> hashed{0};
  std::function<void()> progress;
  if (options.on_progress) progress = [&] { options.on_progress(hashed.load(), work.total); };
  std::vector<RangeToHash> ranges;
  for (const HashUnit& unit : work.units)
    ranges.push_back(range_of_unit(unit, seal.files[unit.file], work.plans[unit.file]));
  std::vector<uint64_t> sizes;
  for (const RangeToHash& range : ranges) sizes.push_back(range.length);
  ByteCollective* world =
      options.distributed && options.distributed->world_size() > 1 ? options.distributed : nullptr;
  const std::vector<int> owners =
      world ? split_by_size(sizes, world->world_size()) : std::vector<int>(sizes.size(), 0);
  std::vector<RangeToHash> mine;
  uint64_t share = 0;
  for (size_t u = 0; u < sizes.size(); ++u) {
    if (owners[u] != (world ? world->rank() : 0)) continue;
    mine.push_back(ranges[u]);
    share += sizes[u];
  }
  if (options.on_share) options.on_share(mine.size(), share);
  sha256_ranges_on_workers(mine, options.jobs, &hashed, progress);
  if (!world) return Status::ok();
  return exchange_unit_results(
      *world, "verify: seal", sizes, owners,
      [&](size_t u) -> nlohmann::json {
        const Result<std::string>& d = *ranges[u].digest;
        if (d.is_ok()) return {0, *d};
        return {static_cast<int>(d.status().code()), d.status().message()};
      },
      [&](size_t u, const nlohmann::json& r) -> Status {
        const int code = r.at(0).get<int>();
        std::string text = r.at(1).get<std::string>();
        *ranges[u].digest = code == 0 ? Result<std::string>(std::move(text))
                                      : Result<std::string>(status_from_code(code, text));
        return Status::ok();
      });
}

// Each file's verdict, merged into the report in seal order. Returns the digest of each file as it
// is now, by sealed path, where it was hashed: integrity.json is checked against these without
// hashing the files again.
std::map<std::string, std::string> merge_seal_findings(const Seal& seal, std::vector<FilePlan>& plans,
                                                       bool quick, VerifyReport& report) {
  std::map<std::string, std::string> hashed_now;
  for (size_t i = 0; i < seal.files.size(); ++i) {
    if (!quick) conclude_sealed_file(seal.files[i], plans[i]);
    FileFinding& finding = plans[i].finding;
    for (auto& e : finding.errors) report.errors.push_back(std::move(e));
    report.bytes_hashed += finding.bytes_hashed;
    if (!finding.sha256.empty()) hashed_now[seal.files[i].path] = finding.sha256;
    report.tensors += seal.files[i].tensors.size();
  }
  report.shards = seal.files.size();
  return hashed_now;
}

// integrity.json's whole-file digests against the files now; a file the seal did not cover (or
// that could not be hashed through it) is hashed here.
void check_integrity_file(const std::string& integrity_path, const std::string& dir,
                          const std::map<std::string, std::string>& hashed_now, const Seal& seal,
                          VerifyReport& report) {
  auto integrity = read_integrity_file(integrity_path);
  if (!integrity.is_ok()) {
    report.add_error(verify_code::kSealInvalid, kIntegrityFileName, "", integrity.status().message());
    return;
  }
  for (const auto& [name, expected] : *integrity) {
    auto it = hashed_now.find(name);
    std::string now;
    if (it != hashed_now.end()) {
      now = it->second;
    } else {
      auto resolved = resolve_shard_path(dir, name);
      auto digest = resolved.is_ok() ? sha256_hex_of_file(*resolved) : Result<std::string>(resolved.status());
      if (!digest.is_ok()) {
        report.add_error(verify_code::kIntegritySha256Mismatch, name, "", digest.status().message());
        continue;
      }
      now = *digest;
    }
    if (now != expected) {
      report.add_error(verify_code::kIntegritySha256Mismatch, name, "",
                       dir + "/" + name + ": sha256 differs from " + kIntegrityFileName + ": expected " +
                           expected + ", got " + now);
    }
  }
  if (seal.files.empty()) report.shards = integrity->size();
}

// A file added to a sealed directory since sealing is reported: verify then runs the kind's own
// checks on every byte (checkpoint_verifier.cpp), as for an unsealed checkpoint, since the seal
// vouches for none of it. Under --pubkey it fails: the user asked that a signature cover what is
// loaded, and no signature covers this file.
void report_unlisted_files(const std::string& dir, const Seal& seal, bool signature_asked,
                           VerifyReport& report) {
  std::set<std::string> listed;
  for (const auto& f : seal.files) listed.insert(f.path);
  for (const auto& f : list_files_under(dir, kMaxSealDepth)) {
    if (listed.count(f) || is_seal_bookkeeping(f)) continue;
    const std::string message = dir + "/" + f + ": not listed in the seal";
    if (signature_asked)
      report.add_error(verify_code::kSealUnlistedFile, f, "",
                       message +
                           ", so no signature covers it: seal (and sign) the checkpoint again after "
                           "the files are final");
    else
      report.add_warning(verify_code::kSealUnlistedFile, f, "",
                         message + "; the checkpoint's own checks read it");
  }
}

}  // namespace

std::string seal_path_for(const std::string& raw) {
  const std::string path = strip_trailing_slashes(raw);
  return is_directory(path) ? path + "/" + kSealFileName : path + kSealFileSuffix;
}

bool has_seal(const std::string& raw) {
  const std::string path = strip_trailing_slashes(raw);
  return path_exists(seal_path_for(path)) ||
         (is_directory(path) && path_exists(path + "/" + kIntegrityFileName));
}

std::string seal_to_json_text(const Seal& seal) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : seal.files) files.push_back(sealed_file_to_json(f));
  nlohmann::json j = {
      {"format", kSealFormat}, {"version", kSealVersion}, {"algorithm", "sha256"}, {"files", files}};
  embed_digest(j, kSealDigestField);
  return j.dump(1) + "\n";
}

Result<Seal> parse_seal(const std::string& text, const std::string& where) {
  CKPT_ASSIGN_OR_RETURN(nlohmann::json j, parse_json(text, where));
  if (!j.is_object()) return Status::corruption(where + ": expected a JSON object");
  CKPT_ASSIGN_OR_RETURN(std::string format, json_string(j, "format", where));
  if (format != kSealFormat) {
    return Status::corruption(where + ": format '" + format + "', expected '" + kSealFormat + "'");
  }
  CKPT_ASSIGN_OR_RETURN(int64_t version, json_int(j, "version", where));
  if (version != kSealVersion) {
    return Status::not_supported(where + ": seal version " + std::to_string(version) + ", this build reads " +
                                 std::to_string(kSealVersion));
  }
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* files, json_array(j, "files", where));
  Seal seal;
  std::set<std::string> seen;
  for (size_t i = 0; i < files->size(); ++i) {
    CKPT_ASSIGN_OR_RETURN(SealedFile f,
                          parse_sealed_file((*files)[i], where + ": files[" + std::to_string(i) + "]"));
    if (!seen.insert(f.path).second) return Status::corruption(where + ": '" + f.path + "' is listed twice");
    seal.files.push_back(std::move(f));
  }
  return seal;
}

std::vector<uint64_t> sealed_unit_sizes(const Seal& seal) {
  std::vector<uint64_t> sizes;
  for (const SealedFile& f : seal.files) {
    if (f.pieces.empty() || f.piece_bytes == 0) {
      sizes.push_back(f.bytes);
      continue;
    }
    for (size_t p = 0; p < f.pieces.size(); ++p)
      sizes.push_back(std::min(f.piece_bytes, f.bytes - p * f.piece_bytes));
  }
  return sizes;
}

uint64_t seal_piece_bytes(uint64_t total_bytes) {
  uint64_t piece = kSealMinPieceBytes;
  while (piece < kSealMaxPieceBytes && total_bytes / piece > kSealTargetPieces) piece *= 2;
  return piece;
}

Result<SealSummary> seal_checkpoint(const std::string& given, const SealOptions& options) {
  // What the path is, as verify, inspect and diff read it (layouts/layout_registry.h): a path two
  // layouts claim is refused, and a sharded index is sealed as the folder of its shards, where
  // verify looks for the seal.
  CKPT_ASSIGN_OR_RETURN(const std::string path, resolve_seal_subject(given));
  CKPT_ASSIGN_OR_RETURN(SealTarget target, seal_target(path));
  if (target.files.empty()) {
    return Status::invalid_argument(
        path +
        ": holds no file to seal; a seal of nothing would vouch for whatever is added "
        "later: seal the checkpoint once it is written");
  }
  SealSummary summary;
  CKPT_RETURN_IF_ERROR(choose_seal_outputs(path, target, options, summary));
  ByteCollective* world =
      options.distributed && options.distributed->world_size() > 1 ? options.distributed : nullptr;
  CKPT_ASSIGN_OR_RETURN(std::vector<Result<SealedFile>> sealed, seal_every_file(target, options, world));
  Seal seal;
  for (auto& r : sealed) {
    if (!r.is_ok()) return r.status();
    summary.tensors += r->tensors.size();
    summary.bytes += r->bytes;
    if (!r->tensors_unread.empty()) summary.unread.push_back(r->path + ": " + r->tensors_unread);
    seal.files.push_back(std::move(*r));
  }
  summary.files = seal.files.size();
  CKPT_RETURN_IF_ERROR(write_seal_once(seal, summary, options.write_integrity, world));
  return summary;
}

Result<VerifyReport> verify_sealed(const std::string& raw, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (!options.pubkey_path.empty()) CKPT_RETURN_IF_ERROR(check_public_key(options.pubkey_path));
  CKPT_ASSIGN_OR_RETURN(SealTarget target, seal_target(raw));
  VerifyReport report;
  report.path = strip_trailing_slashes(raw);
  const std::string integrity_path = target.dir + "/" + kIntegrityFileName;
  const bool has_integrity = !target.single_file && path_exists(integrity_path);
  CKPT_ASSIGN_OR_RETURN(Seal seal, read_seal_to_verify(seal_path_for(raw), integrity_path, has_integrity,
                                                       options.pubkey_path, report));
  // A single file's seal covers the file it is found beside, whatever name it was sealed under: the
  // bytes of *that* file are hashed, so a file renamed with its seal (ckpt_10.pt -> best.pt) verifies,
  // and a seal (or its signature) copied beside another file fails naming both, never vouching for
  // bytes it did not cover by checking the file named inside it.
  std::string sealed_as;
  const size_t errors_before = report.errors.size();
  if (target.single_file) {
    if (seal.files.size() != 1) {
      report.add_error(verify_code::kSealInvalid, "", "",
                       seal_path_for(raw) + ": a single file's seal lists " +
                           std::to_string(seal.files.size()) +
                           " files; it must list the one file it is found beside");
      seal.files.clear();
    } else {
      sealed_as = seal.files[0].path;
      seal.files[0].path = target.files[0];
    }
  }

  SealHashWork work = plan_seal_hashing(target.dir, seal, options.quick);
  CKPT_RETURN_IF_ERROR(hash_seal_units(seal, work, options));
  const std::map<std::string, std::string> hashed_now =
      merge_seal_findings(seal, work.plans, options.quick, report);
  if (has_integrity && !options.quick)
    check_integrity_file(integrity_path, target.dir, hashed_now, seal, report);
  // (A folder Megatron's integrity.json alone covers lists its files there, not in a seal.)
  if (!target.single_file && (!seal.files.empty() || !has_integrity))
    report_unlisted_files(target.dir, seal, !options.pubkey_path.empty(), report);
  if (!sealed_as.empty() && sealed_as != target.files[0]) {
    if (report.errors.size() > errors_before) {
      report.add_error(verify_code::kSealFileSha256Mismatch, target.files[0], "",
                       report.path + ": its seal " + seal_path_for(raw) + " was made for '" + sealed_as +
                           "' and does not match this file: a seal (or signature) copied beside another "
                           "file, or the file replaced by another");
    } else {
      report.add_warning(verify_code::kSealFileRenamed, target.files[0], "",
                         report.path + ": sealed as '" + sealed_as +
                             "' and renamed since, with its seal; "
                             "its bytes are the sealed ones");
    }
  }
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace ckpt
