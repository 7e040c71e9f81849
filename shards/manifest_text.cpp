#include "shards/manifest_text.h"

#include <memory>

#include "base/json_text_writer.h"
#include "base/sha256.h"
#include "base/sha256_output.h"

namespace ckpt {

namespace {

// Counts the bytes a writer gives it, and keeps none.
class CountingOutput : public TextSink {
 public:
  void write_character(char) override { ++count_; }
  void write_characters(const char*, std::size_t length) override { count_ += length; }
  size_t count() const { return count_; }

 private:
  size_t count_ = 0;
};

// nlohmann's dump() of the manifest, compact (indent < 0) or pretty with `indent` spaces a level.
class ManifestWriter : JsonTextWriter {
 public:
  using JsonTextWriter::JsonTextWriter;

  void write(const Manifest& m, const std::string* digest) {
    open('{');
    key("config", true);
    value(m.config);
    key("created_utc");
    string(m.created_utc);
    key("extra");
    value(m.extra);
    key("format");
    string(kManifestFormat);
    if (digest) {
      key(kManifestDigestField);
      string(*digest);
    }
    key("pins");
    value(m.pins);
    key("shards");
    if (m.shards.empty()) {
      put("[]");
    } else {
      open('[');
      for (size_t i = 0; i < m.shards.size(); ++i) {
        const ManifestShard& s = m.shards[i];
        element(i == 0);
        open('{');
        key("bytes", true);
        number(s.bytes);
        key("format");
        string(s.format);
        key("path");
        string(s.path);
        key("rank");
        number(s.rank);
        key("sha256");
        string(s.sha256);
        key("sha256_of");
        string(s.sha256_of);
        close('}');
      }
      close(']');
    }
    key("step");
    number(m.step);
    key("strategy");
    string(m.strategy);
    key("tensors");
    if (m.tensors.empty()) {
      put("[]");
    } else {
      open('[');
      for (size_t i = 0; i < m.tensors.size(); ++i) {
        const ManifestTensor& t = m.tensors[i];
        element(i == 0);
        open('{');
        // Version 2 lists no chunk: they are in the shard headers the shards' digests cover.
        const bool listed = m.chunk_records == ChunkRecords::kInManifest;
        if (listed) key("chunks", true);
        if (!listed) {
        } else if (t.chunks.empty()) {
          put("[]");
        } else {
          open('[');
          for (size_t c = 0; c < t.chunks.size(); ++c) {
            const ManifestChunk& k = t.chunks[c];
            element(c == 0);
            open('{');
            key("data_bytes", true);
            number(k.data_bytes);
            key("data_offset");
            number(k.data_offset);
            key("offsets");
            dims(k.offsets);
            key("sha256");
            char hex[2 * sizeof(k.sha256)];
            digest_hex_into(k.sha256, hex);
            string(hex, sizeof(hex));
            key("shape");
            dims(k.shape);
            key("shard");
            number(static_cast<uint64_t>(k.shard));
            close('}');
          }
          close(']');
        }
        key("component", !listed);
        string(t.component);
        key("dtype");
        string(dtype_name(t.dtype));
        key("name");
        string(t.name);
        key("shape");
        dims(t.shape);
        close('}');
      }
      close(']');
    }
    key("version");
    number(static_cast<int64_t>(manifest_version_of(m.chunk_records)));
    key("world_size");
    number(m.world_size);
    close('}');
  }
};

}  // namespace

std::string manifest_content_sha256(const Manifest& manifest) {
  Sha256 hash;
  auto sink = std::make_shared<Sha256Output>(hash);
  ManifestWriter(sink, -1).write(manifest, nullptr);
  sink->flush();
  return hash.finish_hex();
}

std::string manifest_pretty_text(const Manifest& manifest, const std::string& digest) {
  // Counted first, then written into a string of exactly that size: grown by doubling, the text of
  // 320,000 chunks (87 MB) took a 128 MB block, and the 64 MB one it outgrew was alive with it
  // while it was copied: ~190 MB at `convert`'s peak for 87 MB of text (issue 44). The count costs
  // one more pass of the writer, no memory.
  auto counter = std::make_shared<CountingOutput>();
  ManifestWriter(counter, 1).write(manifest, &digest);
  std::string text;
  text.reserve(counter->count() + 1);
  auto sink = std::make_shared<nlohmann::detail::output_string_adapter<char>>(text);
  ManifestWriter(sink, 1).write(manifest, &digest);
  text.push_back('\n');
  return text;
}

}  // namespace ckpt
