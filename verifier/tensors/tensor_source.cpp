#include "verifier/tensors/tensor_source.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "base/file_io.h"
#include "base/json_fields.h"
#include "base/parallel_jobs.h"
#include "base/sha256.h"
#include "base/text.h"
#include "formats/dcp_checkpoint.h"
#include "formats/safetensors_file.h"
#include "formats/tensor_file_open.h"
#include "layouts/layout_registry.h"
#include "layouts/trainer_layout.h"
#include "shards/checkpoint_dir.h"
#include "shards/checkpoint_reader.h"
#include "shards/file_chunk_index.h"
#include "shards/laid_out_native_shard.h"
#include "shards/manifest_text.h"
#include "shards/shard_header_chunks.h"
#include "verifier/tensors/integrity_codes.h"
#include "verifier/tensors/shard_scan.h"
#include "verifier/tensors/zero_reassembly.h"

namespace ckpt {

namespace {

// A number as nlohmann's parser reads it back from text: unsigned when not negative.
nlohmann::json as_parsed(int64_t v) {
  return v < 0 ? nlohmann::json(v) : nlohmann::json(static_cast<uint64_t>(v));
}

// The manifest's own JSON (step, config, pins, extra, shards), less the tensor table, which the
// source lists tensor by tensor instead: what parsing manifest_to_json_text(m) and erasing
// "tensors" gives, built without writing and parsing the tensor table (36 MB at 320,000 chunks).
// `content_sha256` is what reading the manifest computed, so it is not computed twice (empty where
// the reference parse of a manifest without a digest computed none).
nlohmann::json manifest_metadata(const Manifest& m, const std::string& content_sha256) {
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : m.shards) {
    shards.push_back({{"path", s.path},
                      {"format", s.format},
                      {"bytes", s.bytes},
                      {"sha256", s.sha256},
                      {"rank", as_parsed(s.rank)},
                      {"sha256_of", s.sha256_of}});
  }
  return {{"format", kManifestFormat},
          {"version", as_parsed(manifest_version_of(m.chunk_records))},
          {"step", as_parsed(m.step)},
          {"created_utc", m.created_utc},
          {"world_size", as_parsed(m.world_size)},
          {"strategy", m.strategy},
          {"config", m.config},
          {"pins", m.pins},
          {"extra", m.extra},
          {"shards", shards},
          {kManifestDigestField, content_sha256.empty() ? manifest_content_sha256(m) : content_sha256}};
}

// A folder's state as Python would hold it: a dict of each file's value, by file name.
PyValuePtr py_dict_of_files(std::vector<std::pair<std::string, PyValuePtr>> file_values) {
  PyValue folder;
  folder.type = PyType::kDict;
  for (auto& [name, value] : file_values) {
    PyValue key;
    key.type = PyType::kStr;
    key.s = name;
    folder.dict.emplace_back(std::make_shared<const PyValue>(std::move(key)), std::move(value));
  }
  return std::make_shared<const PyValue>(std::move(folder));
}

}  // namespace

std::vector<SourceFinding> sharded_index_findings(const SafetensorsIndex& index) {
  std::vector<SourceFinding> out;
  for (const SafetensorsIndexStray& stray : index.strays) {
    out.push_back({stray.loaded_last ? verify_code::kReadingAmbiguous : verify_code::kChunkNotInManifest,
                   stray.file, stray.tensor, stray.message, stray.loaded_last});
  }
  return out;
}

std::string ChunkCheck::mismatch_message() const {
  return file + ": " + chunk_sha256_mismatch_message(offset, label, stored, computed);
}

const SourceTensor* TensorSource::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const SourceTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Status TensorSource::add_file_chunks(size_t file_index, const std::string& prefix,
                                     const std::string& component, const std::vector<std::string>* only) {
  const auto& chunks = files_[file_index]->chunks();
  // tensors_ is in first-seen order until finish_tensor_list; tensor_by_name_ finds a name in it
  // without a scan of every tensor (quadratic at 20,000 tensors, issue 44), across all files. No
  // reserve per file: at one chunk a file, exact reserves would copy and rehash everything each time.
  std::string prefixed;  // the name under `prefix`; no copy per chunk without one
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ChunkInfo& c = chunks[i];
    if (only && !std::binary_search(only->begin(), only->end(), c.name)) continue;
    const std::string& name = prefix.empty() ? c.name : (prefixed = prefix + c.name);
    auto seen = tensor_by_name_.find(name);
    auto it = seen == tensor_by_name_.end() ? tensors_.end() : tensors_.begin() + seen->second;
    if (it == tensors_.end()) {
      auto nbytes = checked_nbytes(c.global_shape, c.dtype);
      if (!nbytes)
        return Status::corruption(files_[file_index]->path() + ": " + c.name + ": shape overflows");
      tensor_by_name_.emplace(name, tensors_.size());
      tensors_.push_back({name,
                          component.empty() ? c.component : component,
                          c.dtype,
                          c.global_shape,
                          *nbytes,
                          {},
                          c.alias_of.empty() ? "" : prefix + c.alias_of});
      it = tensors_.end() - 1;
    } else if (it->dtype != c.dtype || it->shape != c.global_shape) {
      return Status::corruption(files_[file_index]->path() + ": chunk " + c.label() + " is " +
                                dtype_name(c.dtype) + shape_to_string(c.global_shape) +
                                ", another chunk says " + dtype_name(it->dtype) + shape_to_string(it->shape));
    }
    it->chunks.push_back({file_index, i, nullptr});
  }
  return Status::ok();
}

Status TensorSource::finish_tensor_list() {
  tensor_by_name_ = {};
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SourceTensor& a, const SourceTensor& b) { return a.name < b.name; });
  return Status::ok();
}

Status TensorSource::add_dcp_folder(const std::string& dir, const std::string& prefix,
                                    const std::string& component) {
  CKPT_ASSIGN_OR_RETURN(DcpCheckpoint dcp, DcpCheckpoint::open(dir));
  CKPT_ASSIGN_OR_RETURN(auto files, dcp.tensor_files());
  const size_t first_tensor = tensors_.size();
  for (auto& file : files) {
    for (const auto& [fqn, contents] : file->metadata().items())
      metadata_["bytes_contents"][prefix + fqn] = contents;
    files_.push_back(std::move(file));
    CKPT_RETURN_IF_ERROR(add_file_chunks(files_.size() - 1, prefix, component));
  }
  for (size_t k = first_tensor; k < tensors_.size(); ++k) {  // reassembled by global offset
    std::sort(tensors_[k].chunks.begin(), tensors_[k].chunks.end(),
              [&](const SourceChunk& a, const SourceChunk& b) {
                return files_[a.file]->chunks()[a.index].offsets < files_[b.file]->chunks()[b.index].offsets;
              });
  }
  return Status::ok();
}

// A trainer's folder as one source (layouts/trainer_layout.h): every tensor file it lists, each file's
// tensors under "<file>/" but the model weights' own names, each file's values under its name, the
// trainer's step at "step".
Result<TensorSource> TensorSource::open_trainer_folder(const TrainerLayout& layout) {
  TensorSource s;
  s.path_ = layout.dir;
  s.kind_ = trainer_layout_name(layout.kind);
  s.metadata_ = nlohmann::json::object();
  std::vector<std::pair<std::string, PyValuePtr>> file_values;  // each file's state, by file name
  std::map<int, const TensorFile*> zero_ranks;                  // DeepSpeed: each rank's optimizer states
  nlohmann::json param_shapes, shared_params;
  std::vector<std::string> module_order;  // the model states' parameters, in pickle order
  for (const LayoutFile& f : layout.files) {
    const std::string path = layout.dir + "/" + f.name;
    if (f.role == FileRole::kTrainerState || (f.role == FileRole::kConfig && ends_with(f.name, ".json"))) {
      // trainer_state.json (the step), config.json, adapter_config.json: values diff compares too.
      const Result<nlohmann::json> read = read_json_file(path, kMaxTrainerJsonBytes);
      if (read.is_ok() && read->is_object()) {
        const nlohmann::json& j = *read;
        s.metadata_[f.name] = j;
        file_values.emplace_back(f.name, py_value_from_json(j));
        if (f.role == FileRole::kTrainerState && j.contains("global_step"))
          s.metadata_["step"] = j["global_step"];
      }
      continue;
    }
    if (f.role == FileRole::kConfig || f.role == FileRole::kLatestTag) continue;
    if (f.loader == kDcpLoader) {  // FSDP's sharded model or optimizer: a DCP folder
      CKPT_RETURN_IF_ERROR(s.add_dcp_folder(path, f.name + "/",
                                            f.role == FileRole::kModel ? "model" : file_role_name(f.role)));
      continue;
    }
    auto sniffed = sniff_tensor_file_format(path);
    if (!sniffed.is_ok() || *sniffed == TensorFileFormat::kUnknown) continue;
    CKPT_ASSIGN_OR_RETURN(auto file, open_tensor_file(path));
    const bool deepspeed = layout.kind == TrainerLayoutKind::kDeepSpeed || f.loader == kDeepSpeedLoader;
    if (deepspeed && f.role == FileRole::kModel && !s.metadata_.contains("step") &&
        file->metadata().contains("global_steps"))
      s.metadata_["step"] = file->metadata()["global_steps"];
    s.metadata_[f.name] = file->metadata();
    file_values.emplace_back(
        f.name, file->state_value() ? file->state_value() : py_value_from_json(file->metadata()));
    if (deepspeed && f.role == FileRole::kOptimizer && f.rank >= 0) zero_ranks[f.rank] = file.get();
    if (deepspeed && f.role == FileRole::kModel && param_shapes.is_null()) {
      param_shapes = file->metadata().value("param_shapes", nlohmann::json());
      shared_params = file->metadata().value("shared_params", nlohmann::json());
      for (const ChunkInfo& c : file->chunks()) {
        if (c.name.rfind("module.", 0) == 0) module_order.push_back(c.name.substr(7));
      }
    }
    s.files_.push_back(std::move(file));
    const bool weights = f.role == FileRole::kModel && !deepspeed;
    const std::string component = f.role == FileRole::kModel ? "model" : file_role_name(f.role);
    CKPT_RETURN_IF_ERROR(s.add_file_chunks(s.files_.size() - 1, weights ? "" : f.name + "/", component));
  }
  // ZeRO: every parameter as a full fp32 tensor reassembled from all ranks' partitions, when every
  // rank 0..W-1 is here (verify names what is missing or mismatched).
  const bool every_rank =
      !zero_ranks.empty() && zero_ranks.rbegin()->first + 1 == static_cast<int>(zero_ranks.size());
  if (every_rank && param_shapes.is_array()) {
    std::vector<const TensorFile*> ranks;
    for (const auto& [rank, file] : zero_ranks) ranks.push_back(file);
    auto reassembled =
        reassemble_zero_fp32(ranks, param_shapes, shared_params, module_order, layout.dir + " (ZeRO fp32)");
    if (reassembled.is_ok()) {
      s.files_.push_back(std::move(*reassembled));
      CKPT_RETURN_IF_ERROR(s.add_file_chunks(s.files_.size() - 1));
    }
  }
  s.state_value_ = py_dict_of_files(std::move(file_values));
  CKPT_RETURN_IF_ERROR(s.finish_tensor_list());
  return s;
}

// A folder that no trainer's contract describes (a model folder, a sealed folder) as one source: each
// file whose first bytes are a tensor file's, its tensors under "<file>/" but the model weights' own
// names, its values under its name (as open_trainer_folder lists a trainer's folder).
Result<TensorSource> TensorSource::open_folder_files(const LayoutMatch& match) {
  TensorSource s;
  const bool has_safetensors_weights = std::any_of(
      match.files.begin(), match.files.end(),
      [](const LayoutFile& f) { return f.role == FileRole::kModel && ends_with(f.name, ".safetensors"); });
  s.path_ = match.dir;
  s.kind_ = match.kind == "model_folder" ? "model_folder" : "sealed_directory";
  std::vector<std::pair<std::string, PyValuePtr>> file_values;
  for (const LayoutFile& f : match.files) {
    const std::string path = match.dir + "/" + f.name;
    if (f.role == FileRole::kSeal) continue;
    if (f.role == FileRole::kConfig) {  // config.json and the like: values diff compares too
      const Result<nlohmann::json> read = read_json_file(path, kMaxTrainerJsonBytes);
      if (read.is_ok() && read->is_object()) file_values.emplace_back(f.name, py_value_from_json(*read));
      continue;
    }
    auto sniffed = sniff_tensor_file_format(path);
    if (!sniffed.is_ok() || *sniffed == TensorFileFormat::kUnknown) continue;
    CKPT_ASSIGN_OR_RETURN(auto file, open_tensor_file(path));
    s.metadata_[f.name] = file->metadata();
    file_values.emplace_back(
        f.name, file->state_value() ? file->state_value() : py_value_from_json(file->metadata()));
    s.files_.push_back(std::move(file));
    // The weights keep their own names, from the files from_pretrained loads: safetensors where the
    // folder has them (a Hub folder often holds pytorch_model.bin beside model.safetensors), the
    // others under "<file>/", so two files' copies of one tensor are never read as one tensor.
    const bool weights = f.role == FileRole::kModel && match.kind == "model_folder" &&
                         (ends_with(f.name, ".safetensors") || !has_safetensors_weights);
    CKPT_RETURN_IF_ERROR(s.add_file_chunks(s.files_.size() - 1, weights ? "" : f.name + "/",
                                           weights ? "model" : file_role_name(f.role)));
  }
  s.state_value_ = py_dict_of_files(std::move(file_values));
  CKPT_RETURN_IF_ERROR(s.finish_tensor_list());
  return s;
}

// What the path is comes from the layouts registry (layouts/layout_registry.h), as for verify: the
// same paths open here, and a path two layouts claim is refused here too.
Result<TensorSource> TensorSource::open(const std::string& path) {
  TensorSource s;
  CKPT_ASSIGN_OR_RETURN(const std::optional<LayoutMatch> match, detect_layout(path));
  if (!match) {
    // Nothing claims it: the reader's own words for why (what a file is instead, no committed
    // checkpoint under a folder, no such path).
    const Status why =
        is_regular_file(path) ? open_tensor_file(path).status() : resolve_checkpoint_path(path).status();
    if (!why.is_ok()) return why;
    return Status::not_supported(path + ": no checkpoint layout claims it");
  }
  CKPT_RETURN_IF_ERROR(match->defect);
  const std::string& kind = match->kind;
  if (kind == "safetensors_index") {
    CKPT_ASSIGN_OR_RETURN(SafetensorsIndex index, open_safetensors_index(path));
    s.path_ = path;
    s.kind_ = "safetensors_index";
    s.metadata_ = {{"metadata", index.metadata}, {"shards", nlohmann::json::array()}};
    // Each name from the shard weight_map names, as from_pretrained's model holds it; a shard's
    // other tensors are findings, never merged in (two copies would be one tensor of twice its bytes).
    s.findings_ = sharded_index_findings(index);
    for (auto& shard : index.shards) {
      s.metadata_["shards"].push_back(shard.file);
      s.files_.push_back(std::move(shard.opened));
      CKPT_RETURN_IF_ERROR(s.add_file_chunks(s.files_.size() - 1, "", "", &shard.tensors));
    }
    CKPT_RETURN_IF_ERROR(s.finish_tensor_list());
    return s;
  }
  if (match->layout == "single_file") {
    CKPT_ASSIGN_OR_RETURN(auto file, open_tensor_file(path));
    s.path_ = path;
    s.kind_ = file->format_name();
    s.metadata_ = file->metadata();
    s.state_value_ = file->state_value();
    s.files_.push_back(std::move(file));
    CKPT_RETURN_IF_ERROR(s.add_file_chunks(0));
    CKPT_RETURN_IF_ERROR(s.finish_tensor_list());
    return s;
  }
  if (kind == "hf_trainer" || kind == "accelerate" || kind == "deepspeed") {
    return open_trainer_folder(trainer_layout_of(*match));
  }
  if (kind == "model_folder" || kind == "sealed_directory") return open_folder_files(*match);
  if (kind == "dcp" || kind == "megatron_torch_dist") {
    CKPT_ASSIGN_OR_RETURN(DcpCheckpoint dcp, DcpCheckpoint::open(path));
    s.path_ = dcp.dir();
    s.kind_ = "dcp";  // Megatron's too: diff compares the two as one kind
    s.metadata_ = dcp.summary();
    CKPT_RETURN_IF_ERROR(s.add_dcp_folder(path, "", ""));
    CKPT_RETURN_IF_ERROR(s.finish_tensor_list());
    return s;
  }
  if (kind != "ckptcheck")
    return Status::not_supported(path + ": a " + kind + " checkpoint, which " +
                                 "inspect cannot open as named tensors");
  // ckptcheck's own: a root or its `latest` resolved to the step it names; a step dir without a
  // manifest fails naming that.
  CKPT_ASSIGN_OR_RETURN(s.path_, resolve_checkpoint_path(match->dir));
  ManifestDigest digest;
  std::vector<ShardHeaderChunks> header_reads;  // version 2: each shard's header, read already
  CKPT_ASSIGN_OR_RETURN(Manifest manifest, read_manifest_file(s.path_, &digest, &header_reads));
  s.kind_ = "checkpoint";
  s.metadata_ = manifest_metadata(manifest, digest.computed);
  // Every shard opened on every core. A native shard whose header is the writer's layout of its
  // manifest chunks is opened from their records (shards/laid_out_native_shard.h): 16 headers of
  // 20,000 chunks each, parsed into a ChunkInfo a chunk, were a third of opening a 320k-chunk
  // checkpoint and 140 MB (issue 44). Any other shard's header is parsed and indexed. The index
  // refers to the chunks inside the file object, which stays where it is when the pointer moves.
  struct OpenedShard {
    std::unique_ptr<TensorFile> file;
    std::optional<std::vector<size_t>> index_of;  // laid out: each placed chunk's index in the file
    const std::vector<ManifestChunkRef>* records = nullptr;  // laid out: the file's chunks' records
    std::optional<FileChunkIndex> by_key;                    // parsed
  };
  const std::vector<std::vector<ManifestChunkRef>> placed = manifest_chunks_by_shard(manifest);
  CKPT_ASSIGN_OR_RETURN(
      std::vector<OpenedShard> opened,
      collect_parallel<OpenedShard>(manifest.shards.size(), [&](size_t i) -> Result<OpenedShard> {
        std::optional<LaidOutShard> laid_out =
            i < header_reads.size()
                ? open_native_shard_from_records(s.path_, manifest.shards[i], placed[i],
                                                 std::move(header_reads[i].in_header_order),
                                                 std::move(header_reads[i].metadata))
                : open_laid_out_native_shard(s.path_, manifest.shards[i], placed[i]);
        if (laid_out)
          return OpenedShard{std::move(laid_out->file), std::move(laid_out->index_of), laid_out->records,
                             std::nullopt};
        CKPT_ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> file, open_manifest_shard(s.path_, manifest, i));
        std::optional<FileChunkIndex> by_key(std::in_place, file->chunks());
        return OpenedShard{std::move(file), std::nullopt, nullptr, std::move(by_key)};
      }));
  for (OpenedShard& shard : opened) {
    s.files_.push_back(std::move(shard.file));
    s.described_.push_back(shard.records);
  }
  std::vector<size_t> placed_seen(opened.size(), 0);  // per shard: its chunks met so far, in manifest order
  s.tensors_.reserve(manifest.tensors.size());
  for (const ManifestTensor& t : manifest.tensors) {
    auto nbytes = checked_nbytes(t.shape, t.dtype);
    if (!nbytes)
      return Status::corruption(s.path_ + ": " + t.name + ": shape " + shape_to_string(t.shape) +
                                " overflows");
    SourceTensor st{t.name, t.component, t.dtype, t.shape, *nbytes, {}, ""};
    st.chunks.reserve(t.chunks.size());
    for (const ManifestChunk& mc : t.chunks) {
      const size_t seen = placed_seen[mc.shard]++;
      if (opened[mc.shard].index_of) {  // the header is the records' layout: this record's chunk
        st.chunks.push_back({mc.shard, (*opened[mc.shard].index_of)[seen], &mc.sha256});
        continue;
      }
      const TensorFile& file = *s.files_[mc.shard];
      size_t found = 0;
      const std::optional<size_t> index =
          opened[mc.shard].by_key->find(t.name, mc, &found) ? std::optional<size_t>(found) : std::nullopt;
      if (!index) {
        return Status::corruption(manifest.shards[mc.shard].path + ": has no chunk of " + t.name +
                                  " at offsets " + shape_to_string(mc.offsets));
      }
      const ChunkInfo& fc = file.chunks()[*index];
      if (fc.dtype != t.dtype || fc.global_shape != t.shape) {
        return Status::corruption(manifest.shards[mc.shard].path + ": chunk " + fc.label() + " is " +
                                  dtype_name(fc.dtype) + shape_to_string(fc.global_shape) +
                                  ", manifest says " + dtype_name(t.dtype) + shape_to_string(t.shape));
      }
      st.chunks.push_back({mc.shard, *index, &mc.sha256});  // the record moves into s.manifest_ below
    }
    s.tensors_.push_back(std::move(st));
  }
  s.manifest_ = std::move(manifest);
  CKPT_RETURN_IF_ERROR(s.finish_tensor_list());
  return s;
}

Result<Sha256Digest> TensorSource::hash_chunk(const SourceTensor& tensor, size_t chunk,
                                              const std::function<void(const uint8_t*, size_t)>& sink) const {
  const SourceChunk& sc = tensor.chunks[chunk];
  Sha256 hash;
  CKPT_RETURN_IF_ERROR(ckpt::stream_chunk(*files_[sc.file], sc.index, [&](const uint8_t* p, size_t n) {
    hash.update(p, n);
    if (sink) sink(p, n);
  }));
  return hash.finish();
}

const std::vector<ManifestChunkRef>* TensorSource::described(size_t file) const {
  return file < described_.size() ? described_[file] : nullptr;
}

size_t TensorSource::chunk_count(size_t file) const {
  const std::vector<ManifestChunkRef>* records = described(file);
  return records ? records->size() : files_[file]->chunks().size();
}

ChunkPlace TensorSource::place(const SourceChunk& sc) const {
  if (const std::vector<ManifestChunkRef>* records = described(sc.file)) {
    const ManifestChunk& c = *(*records)[sc.index].chunk;
    return {c.offsets, c.shape, c.data_offset, c.data_bytes, RecordedSha256(c.sha256)};
  }
  const ChunkInfo& c = files_[sc.file]->chunks()[sc.index];
  return {c.offsets, c.shape, c.data_offset, c.data_bytes, RecordedSha256(c.sha256)};
}

bool TensorSource::chunk_matches(const SourceTensor& tensor, size_t chunk,
                                 const Sha256Digest& computed) const {
  const SourceChunk& sc = tensor.chunks[chunk];
  const RecordedSha256 header = place(sc).header_sha256;
  return (header.empty() || header.matches(computed)) &&
         (!sc.manifest_sha256 || *sc.manifest_sha256 == computed);
}

ChunkCheck TensorSource::check_chunk(const SourceTensor& tensor, size_t chunk,
                                     const Sha256Digest& computed) const {
  const SourceChunk& sc = tensor.chunks[chunk];
  const ChunkPlace info = place(sc);
  ChunkCheck check{chunk_label(tensor.name, tensor.shape, info.offsets, info.shape), files_[sc.file]->path(),
                   sc.manifest_sha256 ? digest_hex(*sc.manifest_sha256) : std::string(), digest_hex(computed),
                   info.data_offset};
  // Both records must hold: the manifest's and the file's own header's.
  const std::string header = info.header_sha256.hex();
  if (check.ok() && !header.empty() && header != check.computed) check.stored = header;
  if (check.stored.empty()) check.stored = header;
  return check;
}

Result<ChunkCheck> TensorSource::stream_chunk(const SourceTensor& tensor, size_t chunk,
                                              const std::function<void(const uint8_t*, size_t)>& sink) const {
  CKPT_ASSIGN_OR_RETURN(const Sha256Digest computed, hash_chunk(tensor, chunk, sink));
  return check_chunk(tensor, chunk, computed);
}

namespace {

// Where chunk `c` of `t` starts in the tensor's row-major bytes when it is one run of bytes there
// (every dim after its first whole: a dim-0 split, a whole tensor, a scalar) that lies inside the
// tensor's `t.bytes`; nullopt for any other chunk, which is read whole and scattered.
std::optional<uint64_t> run_start(const SourceTensor& t, const ChunkPlace& c) {
  const std::vector<int64_t>& global_shape = t.shape;
  if (c.offsets.size() != global_shape.size() || c.shape.size() != global_shape.size()) return std::nullopt;
  uint64_t row = dtype_size(t.dtype);
  for (size_t d = 1; d < global_shape.size(); ++d) {
    if (c.offsets[d] != 0 || c.shape[d] != global_shape[d]) return std::nullopt;
    row *= static_cast<uint64_t>(global_shape[d]);
  }
  const uint64_t at = global_shape.empty() ? 0 : static_cast<uint64_t>(c.offsets[0]) * row;
  if (c.data_bytes > t.bytes || at > t.bytes - c.data_bytes) return std::nullopt;
  return at;
}

// Whether chunk `c` is a box inside `t` (its rank, offsets and shape inside the tensor's shape) whose
// bytes are the box's: where it can be read from in place.
bool box_lies_inside(const SourceTensor& t, const ChunkPlace& c) {
  const size_t rank = t.shape.size();
  if (c.offsets.size() != rank || c.shape.size() != rank) return false;
  uint64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t off = c.offsets[d], len = c.shape[d], global = t.shape[d];
    if (off < 0 || len < 0 || off > global || len > global - off) return false;
    elements *= static_cast<uint64_t>(len);  // bounded by the tensor's own element count
  }
  return elements * dtype_size(t.dtype) == c.data_bytes;
}

// Calls visit(tensor_offset, chunk_offset, bytes) for each run of chunk `c`'s bytes that meets
// [begin, end) of the tensor's row-major bytes, clipped to it: the whole chunk where it is one run
// of the tensor (run_start: a dim-0 split, a whole tensor, a scalar, any 1-D chunk), else each row
// of a box's last dim (contiguous in the chunk and in the tensor), skipping without a visit the
// rows of dim 0 outside the range. For a chunk that box_lies_inside.
template <typename Visit>
Status visit_chunk_runs(const SourceTensor& t, const ChunkPlace& c, uint64_t begin, uint64_t end,
                        Visit&& visit) {
  if (c.data_bytes == 0) return Status::ok();  // an empty box
  auto clipped = [&](uint64_t at, uint64_t in_chunk, uint64_t bytes) -> Status {
    const uint64_t from = std::max(at, begin), to = std::min(at + bytes, end);
    return from < to ? visit(from, in_chunk + (from - at), to - from) : Status::ok();
  };
  if (const std::optional<uint64_t> start = run_start(t, c)) return clipped(*start, 0, c.data_bytes);
  const size_t rank = t.shape.size(), element = dtype_size(t.dtype);         // 2 or more from here
  std::vector<uint64_t> stride(rank, element), chunk_stride(rank, element);  // bytes per step of each dim
  for (size_t d = rank - 1; d > 0; --d) {
    stride[d - 1] = stride[d] * static_cast<uint64_t>(t.shape[d]);
    chunk_stride[d - 1] = chunk_stride[d] * static_cast<uint64_t>(c.shape[d]);
  }
  const uint64_t run = static_cast<uint64_t>(c.shape[rank - 1]) * element;
  if (run == 0 || stride[0] == 0) return Status::ok();
  // The box's dim-0 indices whose tensor rows meet [begin, end).
  const int64_t first_row = static_cast<int64_t>(begin / stride[0]);
  const int64_t last_row = static_cast<int64_t>((end + stride[0] - 1) / stride[0]);  // exclusive
  const int64_t i0_begin = std::max<int64_t>(0, first_row - c.offsets[0]);
  const int64_t i0_end = std::min<int64_t>(c.shape[0], last_row - c.offsets[0]);
  std::vector<int64_t> index(rank, 0);  // inside the box; the last dim is the run
  for (int64_t i0 = i0_begin; i0 < i0_end; ++i0) {
    std::fill(index.begin(), index.end(), 0);
    index[0] = i0;
    for (;;) {  // every index of dims 1 .. rank-2 (none for a matrix)
      uint64_t at = 0, in_chunk = 0;
      for (size_t d = 0; d < rank; ++d) {
        at += static_cast<uint64_t>(c.offsets[d] + index[d]) * stride[d];
        in_chunk += static_cast<uint64_t>(index[d]) * chunk_stride[d];
      }
      CKPT_RETURN_IF_ERROR(clipped(at, in_chunk, run));
      size_t d = rank - 2;
      while (d >= 1) {
        if (++index[d] < c.shape[d]) break;
        index[d] = 0;
        --d;
      }
      if (d == 0) break;
    }
  }
  return Status::ok();
}

// Where chunk `c` of `t` lands in `bytes`, the tensor's buffer (t.bytes long), when it is one run
// of it; null for any other chunk.
uint8_t* run_destination(const SourceTensor& t, const ChunkPlace& c, std::vector<uint8_t>& bytes) {
  const std::optional<uint64_t> at = run_start(t, c);
  return at && bytes.size() == t.bytes ? bytes.data() + *at : nullptr;
}

}  // namespace

ScannedChunkDigests TensorSource::scan_chunk_digests(size_t jobs) const {
  return scan_files(jobs, {});
}

ScannedChunkDigests TensorSource::scan_files(size_t jobs, std::vector<std::vector<uint8_t*>> into) const {
  const auto& files = files_;
  ScannedChunkDigests out(files.size());
  std::vector<std::optional<ShardScanner>> scanners(files.size());
  const auto scannable = [](const TensorFile& file) {
    return has_header_digest(file.format_name()) && file.payload_source();
  };
  uint64_t total = 0;
  for (const auto& file : files) {
    if (scannable(*file)) total += file->payload_source()->size();
  }
  const uint64_t unit_bytes = scan_unit_bytes(total, resolve_jobs(jobs, SIZE_MAX));
  std::vector<ScanTask> units;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!scannable(*files[i])) continue;
    // A file opened from the manifest's records is planned from them, without its chunk table.
    auto planned = [&]() -> Result<ShardScanner> {
      const std::vector<ManifestChunkRef>* records = described(i);
      if (!records) return ShardScanner::plan(files[i]->path(), *files[i], ShardDigest::kNone, unit_bytes);
      std::vector<ScanChunk> chunks;
      chunks.reserve(records->size());
      for (const ManifestChunkRef& r : *records)
        chunks.push_back({r.chunk->data_offset, r.chunk->data_bytes, r.tensor->dtype});
      return ShardScanner::plan(files[i]->path(), files[i]->format_name(), std::move(chunks),
                                ShardDigest::kNone, unit_bytes);
    }();
    if (!planned.is_ok() || planned->needs_file()) continue;  // read chunk by chunk instead
    scanners[i].emplace(std::move(*planned));
    if (i < into.size()) scanners[i]->copy_payloads_to(std::move(into[i]));
    for (size_t u = 0; u < scanners[i]->unit_count(); ++u) units.push_back({&*scanners[i], u});
  }
  scan_units_in_parallel(units, jobs, nullptr, {});
  for (size_t i = 0; i < files.size(); ++i) {
    if (!scanners[i]) continue;
    Result<ShardScan> scan = scanners[i]->finish();
    if (scan.is_ok()) out[i] = std::move(scan->chunk_sha256);
  }
  return out;
}

Status TensorSource::check_coverage(const SourceTensor& tensor) const {
  uint64_t covered = 0;
  for (const SourceChunk& sc : tensor.chunks) covered += place(sc).data_bytes;
  if (covered == tensor.bytes) return Status::ok();
  return Status::corruption(path_ + ": " + tensor.name + ": chunks hold " + std::to_string(covered) +
                            " bytes, the tensor " + shape_to_string(tensor.shape) + " needs " +
                            std::to_string(tensor.bytes));
}

Result<LoadedTensor> TensorSource::allocate_tensor(const SourceTensor& tensor) const {
  // Bound the allocation by what the chunks claim before trusting the global shape.
  CKPT_RETURN_IF_ERROR(check_coverage(tensor));
  LoadedTensor out{tensor.name, tensor.component, tensor.dtype, tensor.shape, {}};
  out.bytes.assign(static_cast<size_t>(tensor.bytes), 0);
  return out;
}

Status TensorSource::fill_tensor(const SourceTensor& tensor, LoadedTensor& out) const {
  std::vector<uint8_t> chunk_bytes;
  const size_t element_size = dtype_size(tensor.dtype);
  for (size_t i = 0; i < tensor.chunks.size(); ++i) {
    const ChunkPlace info = place(tensor.chunks[i]);
    // A chunk that is one run of the tensor's bytes is read straight into place; any other is read
    // whole, then scattered.
    uint8_t* const into = run_destination(tensor, info, out.bytes);
    const bool direct = into != nullptr;
    uint64_t written = 0;
    chunk_bytes.clear();
    if (!direct) chunk_bytes.reserve(static_cast<size_t>(info.data_bytes));
    CKPT_ASSIGN_OR_RETURN(const Sha256Digest computed, hash_chunk(tensor, i, [&](const uint8_t* p, size_t n) {
                            if (!direct) {
                              chunk_bytes.insert(chunk_bytes.end(), p, p + n);
                            } else if (n <= info.data_bytes - written) {
                              std::memcpy(into + written, p, n);
                              written += n;
                            }
                          }));
    // A 320k-chunk state is read whole by diff and the drill: no label or message per good chunk.
    if (!chunk_matches(tensor, i, computed))
      return Status::corruption(check_chunk(tensor, i, computed).mismatch_message());
    if (!direct)
      scatter_chunk(tensor.shape, element_size, info.offsets, info.shape, chunk_bytes.data(),
                    out.bytes.data());
  }
  return Status::ok();
}

bool TensorSource::reads_in_place(const SourceTensor& tensor) const {
  for (const SourceChunk& sc : tensor.chunks)
    if (!box_lies_inside(tensor, place(sc))) return false;
  return true;
}

Status TensorSource::read_tensor_bytes(const SourceTensor& tensor, uint64_t byte_begin, uint8_t* out,
                                       size_t length) const {
  if (byte_begin > tensor.bytes || length > tensor.bytes - byte_begin)
    return Status::invalid_argument(path_ + ": " + tensor.name + ": bytes [" + std::to_string(byte_begin) +
                                    ", +" + std::to_string(length) + ") outside its " +
                                    std::to_string(tensor.bytes));
  // As read_tensor assembles it: zeros where no chunk lies, chunks in order, a later one over an
  // earlier one where they overlap.
  std::memset(out, 0, length);
  const uint64_t end = byte_begin + length;
  for (const SourceChunk& sc : tensor.chunks) {
    const ChunkPlace c = place(sc);
    if (!box_lies_inside(tensor, c))  // reads_in_place, checked as the chunks are read
      return Status::invalid_argument(path_ + ": " + tensor.name + ": a chunk lies outside the tensor");
    CKPT_RETURN_IF_ERROR(
        visit_chunk_runs(tensor, c, byte_begin, end, [&](uint64_t at, uint64_t in_chunk, uint64_t bytes) {
          return files_[sc.file]->read_chunk(sc.index, in_chunk, out + (at - byte_begin),
                                             static_cast<size_t>(bytes));
        }));
  }
  return Status::ok();
}

Result<LoadedTensor> TensorSource::read_tensor(const SourceTensor& tensor) const {
  CKPT_ASSIGN_OR_RETURN(LoadedTensor out, allocate_tensor(tensor));
  CKPT_RETURN_IF_ERROR(fill_tensor(tensor, out));
  return out;
}

Result<std::vector<LoadedTensor>> TensorSource::read_tensors() const {
  // Every buffer is made here, on the calling thread: its heap is in huge pages
  // (base/huge_pages.h) and the workers' arenas are not (a 400 MB state made by the workers took
  // ~40,000 page faults).
  std::vector<Result<LoadedTensor>> made;
  made.reserve(tensors_.size());
  for (const SourceTensor& t : tensors_) made.push_back(allocate_tensor(t));
  // Then the files verify's scan can read front to back are read so, every chunk that is one run of
  // its tensor copied into place as it is hashed: a pread and a hasher per ~1 KB chunk were most of
  // reading a 320k-chunk state (issue 44). A tensor with any chunk not so read, or not matching its
  // recorded hashes, is read chunk by chunk after, which names what is wrong as it always has.
  auto destination = [&](size_t i, size_t c) {
    const SourceChunk& sc = tensors_[i].chunks[c];
    return run_destination(tensors_[i], place(sc), made[i]->bytes);
  };
  std::vector<std::vector<uint8_t*>> into(files_.size());
  for (size_t f = 0; f < files_.size(); ++f) into[f].assign(chunk_count(f), nullptr);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!made[i].is_ok()) continue;
    for (size_t c = 0; c < tensors_[i].chunks.size(); ++c)
      into[tensors_[i].chunks[c].file][tensors_[i].chunks[c].index] = destination(i, c);
  }
  const ScannedChunkDigests scanned = scan_files(0, into);
  std::vector<Status> filled(tensors_.size(), Status::ok());
  run_parallel(tensors_.size(), resolve_jobs(0, tensors_.size()), [&](size_t i) {
    if (!made[i].is_ok()) return;
    const SourceTensor& t = tensors_[i];
    bool read = true;
    for (size_t c = 0; c < t.chunks.size() && read; ++c) {
      const SourceChunk& sc = t.chunks[c];
      // Copied into this tensor (not into another listing the same chunk), and as recorded.
      uint8_t* const to = destination(i, c);
      read = scanned[sc.file] && to && into[sc.file][sc.index] == to &&
             chunk_matches(t, c, (*scanned[sc.file])[sc.index]);
    }
    if (!read) filled[i] = fill_tensor(t, *made[i]);
  });
  std::vector<LoadedTensor> out;
  out.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {  // the first failure in tensors() order
    if (!made[i].is_ok()) return made[i].status();
    CKPT_RETURN_IF_ERROR(filled[i]);
    out.push_back(std::move(*made[i]));
  }
  return out;
}

Result<ScannedChunkDigests> TensorSource::check_tensors() const {
  ScannedChunkDigests digests = scan_files(0, {});
  // A chunk the scan did not read, or read otherwise than recorded, is read again on its own, as
  // read_tensor reads it, which names a read error or the hash it contradicts. Its digest is kept
  // by the tensor and set once all are done: the workers only read what the scan wrote.
  std::vector<std::vector<std::pair<size_t, Sha256Digest>>> read_again(tensors_.size());
  std::vector<Status> checked(tensors_.size(), Status::ok());
  run_parallel(tensors_.size(), resolve_jobs(0, tensors_.size()), [&](size_t i) {
    const SourceTensor& t = tensors_[i];
    checked[i] = check_coverage(t);
    for (size_t c = 0; c < t.chunks.size() && checked[i].is_ok(); ++c) {
      const SourceChunk& sc = t.chunks[c];
      if (digests[sc.file] && chunk_matches(t, c, (*digests[sc.file])[sc.index])) continue;
      Result<Sha256Digest> computed = hash_chunk(t, c, {});
      if (!computed.is_ok()) {
        checked[i] = computed.status();
      } else if (!chunk_matches(t, c, *computed)) {
        checked[i] = Status::corruption(check_chunk(t, c, *computed).mismatch_message());
      } else {
        read_again[i].emplace_back(c, *computed);
      }
    }
  });
  for (const Status& status : checked) CKPT_RETURN_IF_ERROR(status);  // the first in tensors() order
  for (size_t f = 0; f < files_.size(); ++f)
    if (!digests[f]) digests[f].emplace(chunk_count(f));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    for (const auto& [c, digest] : read_again[i]) {
      const SourceChunk& sc = tensors_[i].chunks[c];
      (*digests[sc.file])[sc.index] = digest;
    }
  }
  return digests;
}

}  // namespace ckpt
