// `ckptcheck convert SRC DST --format F [--shards N]`: rewrites any tensor source as a new committed
// checkpoint under the root DST, through write_checkpoint, so the commit protocol (temp dir,
// fsync, manifest last, rename, `latest`) applies. Lossless: tensor bytes are copied as read, and
// when SRC is a checkpoint its step, world size, strategy, config, pins and extra are carried over.
// SRC is checked whole first, then copied chunk by chunk (verifier/tensors/source_conversion.h):
// memory does not grow with the state.
// Exit 0: committed; 1: SRC's bytes are damaged; 2: bad flags, unreadable SRC, or DST already holds
// a checkpoint of that step (a committed checkpoint is never rewritten).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/huge_pages.h"
#include "base/progress.h"
#include "formats/shard_formats.h"
#include "shards/checkpoint_writer.h"
#include "verifier/cli/commands.h"
#include "verifier/tensors/checkpoint_diff.h"
#include "verifier/tensors/source_conversion.h"

namespace ckpt {
namespace {

// What a foreign file knows of the training state: at most a step in its metadata.
CheckpointMetadata metadata_of(const TensorSource& source, int64_t step_override) {
  CheckpointMetadata meta;
  if (const Manifest* m = source.manifest()) {
    meta = {m->step, m->world_size, m->strategy, m->config, m->pins, m->extra};
  } else {
    // The step diff reads too (global_step, step, iteration), so a converted copy diffs SAME.
    if (const auto step = step_of(source.metadata())) meta.step = static_cast<int64_t>(*step);
  }
  if (step_override >= 0) meta.step = step_override;
  return meta;
}

class ConvertCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub =
        app.add_subcommand("convert", "Rewrite a checkpoint or tensor file as a new committed checkpoint");
    sub->add_option("src", src_, "checkpoint dir or root, tensor file or safetensors index")->required();
    sub->add_option("dst", dst_, "checkpoint root to commit the new checkpoint into")->required();
    sub->add_option("--format", format_, "shard format of the new checkpoint")->required();
    sub->add_option("--shards", shards_, "shard files in the new checkpoint")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    sub->add_option("--manifest-version", manifest_version_,
                    "2 (the default for --format native): the chunk records in the native shard headers "
                    "only, a manifest ~25x smaller (read by builds from 2026-12); 1: every record also "
                    "listed in manifest.json (read by every build; always so for other formats)")
        ->check(CLI::IsMember({kManifestVersionChunksListed, kManifestVersionChunksInHeaders}));
    sub->add_option("--step", step_, "step to record (default: SRC's step, or 0 for a file that has none)")
        ->check(CLI::NonNegativeNumber);
    return sub;
  }

  int run() override {
    if (!find_shard_format(format_)) {
      std::string known;
      for (const auto& n : shard_format_names()) known += (known.empty() ? "" : ", ") + n;
      return fail(Status::invalid_argument("unknown --format '" + format_ + "' (known: " + known + ")"));
    }
    // Unless asked, version 2 where the shards can hold the records.
    if (manifest_version_ == 0)
      manifest_version_ =
          format_ == "native" ? kManifestVersionChunksInHeaders : kManifestVersionChunksListed;
    const bool in_headers = manifest_version_ == kManifestVersionChunksInHeaders;
    if (in_headers && format_ != "native") {
      return fail(Status::invalid_argument("--manifest-version " + std::to_string(manifest_version_) +
                                           " keeps the chunk records in native shard headers; --format " +
                                           format_ + " has none (use --format native or --manifest-version " +
                                           std::to_string(kManifestVersionChunksListed) + ")"));
    }
    Progress progress;  // on a terminal only; cleared before any message
    auto failed = [&progress](const Status& status) {
      progress.finish();
      return fail(status);
    };
    progress.message("convert: opening SRC");
    auto source = TensorSource::open(src_);
    if (!source.is_ok()) return failed(source.status());
    // What the open parsed and let go is not needed again: the writer threads' buffers and lists
    // would otherwise be held beside it at the save's peak.
    release_freed_heap_top();
    progress.message("convert: checking every chunk of SRC");
    auto checked = SourceConversion::check(*source);
    if (!checked.is_ok()) return failed(checked.status());
    if (progress.enabled()) {
      checked->on_progress([&progress](uint64_t done, uint64_t total) {
        progress.update("convert: bytes copied", static_cast<long long>(done), static_cast<long long>(total));
      });
    }
    CheckpointWriteOptions options;
    options.num_shards = shards_;
    options.format = format_;
    options.chunk_records = in_headers ? ChunkRecords::kInShardHeaders : ChunkRecords::kInManifest;
    auto committed = checked->write(dst_, metadata_of(*source, step_), options);
    progress.finish();
    if (!committed.is_ok()) {
      // Anything the writer refuses (an existing step, a full disk) is about DST, not SRC's bytes;
      // so is a SRC file changed since its check (its bytes were good when checked).
      std::fprintf(stderr, "ckptcheck convert: %s\n", committed.status().to_string().c_str());
      return kExitUsage;
    }
    std::printf("committed %s: %zu tensors, %llu bytes, %zu %s shards, step %lld\n", committed->dir.c_str(),
                checked->views().size(), static_cast<unsigned long long>(committed->bytes), shards_,
                format_.c_str(), static_cast<long long>(committed->manifest.step));
    return kExitOk;
  }

 private:
  static int fail(const Status& status) { return report_failure("convert", status); }

  std::string src_;
  std::string dst_;
  std::string format_;
  size_t shards_ = 1;
  int manifest_version_ = 0;  // 0: as --format allows (2 for native, else 1)
  int64_t step_ = -1;
};

}  // namespace

std::unique_ptr<Command> make_convert_command() {
  return std::make_unique<ConvertCommand>();
}

}  // namespace ckpt
