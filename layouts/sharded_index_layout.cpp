// A sharded model's index (model.safetensors.index.json, pytorch_model.bin.index.json): a JSON file
// whose weight_map names the shard file of every tensor, the shards beside it.
#include <nlohmann/json.hpp>
#include <set>

#include "base/file_io.h"
#include "base/text.h"
#include "layouts/layout_registry.h"

namespace ckpt {

namespace {

constexpr uint64_t kMaxIndexBytes = 64ull << 20;  // weight_maps of 100k tensors are a few MB

class ShardedIndexLayout final : public Layout {
 public:
  const char* name() const override { return "sharded_index"; }
  const char* evidence_rule() const override {
    return "a regular file named *.index.json whose text is a JSON object (so never a tensor file's "
           "first bytes); its weight_map names the shards";
  }
  const char* resume_rule() const override {
    return "from_pretrained reads every shard weight_map names; weights only (--weights-only)";
  }
  const char* seal_ranges() const override {
    return "`seal` takes the folder holding the index: every file whole, and each tensor's range";
  }

  // The folder: the seal must cover the shards, which lie beside the index.
  std::string seal_subject(const LayoutMatch& match) const override { return parent_dir(match.dir); }

  std::optional<LayoutMatch> detect(const std::string& path) const override {
    if (!ends_with(path, ".index.json") || !is_regular_file(path)) return std::nullopt;
    Result<std::string> text = read_small_file(path, kMaxIndexBytes);
    size_t k = 0;
    while (text.is_ok() && k < text->size() && std::isspace(static_cast<unsigned char>((*text)[k]))) ++k;
    if (!text.is_ok() || k >= text->size() || (*text)[k] != '{') return std::nullopt;
    // "safetensors_index": the name verify has always reported, for .bin indexes too.
    LayoutMatch m = claim("safetensors_index", base_name(path) + " (a JSON object)", path);
    m.files.push_back({base_name(path), FileRole::kConfig, true, -1, "json/text"});
    // The shards, as far as the text names them; a malformed index is its reader's to report.
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    std::set<std::string> shards;
    if (j.is_object() && j.contains("weight_map") && j["weight_map"].is_object()) {
      for (const auto& [tensor, file] : j["weight_map"].items()) {
        if (file.is_string()) shards.insert(file.get<std::string>());
      }
    }
    for (const std::string& s : shards)
      m.files.push_back({s, FileRole::kModel, true, -1, file_loader_by_name(s)});
    return m;
  }
};

}  // namespace

const Layout& sharded_index_layout() {
  static const ShardedIndexLayout layout;
  return layout;
}

}  // namespace ckpt
