#include "shards/manifest_text.h"

#include <charconv>
#include <cstring>
#include <memory>

#include "base/sha256.h"
#include "base/sha256_output.h"

namespace ckpt {

namespace {

// Where the text goes: a string (nlohmann's own adapter) or SHA-256 (Sha256Output).
using TextSink = nlohmann::detail::output_adapter_protocol<char>;

// nlohmann's dump(), compact (indent < 0) or pretty with `indent` spaces a level, as one writer.
class ManifestWriter {
 public:
  ManifestWriter(std::shared_ptr<TextSink> sink, int indent)
      : sink_(sink), indent_(indent), json_(sink, ' ', nlohmann::json::error_handler_t::strict) {}

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
        key("chunks", true);
        if (t.chunks.empty()) {
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
            string(k.sha256);
            key("shape");
            dims(k.shape);
            key("shard");
            number(static_cast<uint64_t>(k.shard));
            close('}');
          }
          close(']');
        }
        key("component");
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
    number(static_cast<int64_t>(kManifestVersion));
    key("world_size");
    number(m.world_size);
    close('}');
  }

 private:
  void newline() {
    sink_->write_character('\n');
    for (int i = 0; i < depth_ * indent_; ++i) sink_->write_character(' ');
  }
  void open(char c) {
    sink_->write_character(c);
    ++depth_;
  }
  void close(char c) {
    --depth_;
    if (indent_ >= 0) newline();
    sink_->write_character(c);
  }
  // Before each object member or array element: a comma after the first, then the line break.
  void element(bool first) {
    if (!first) sink_->write_character(',');
    if (indent_ >= 0) newline();
  }
  void key(const char* name, bool first = false) {
    element(first);
    string(name);
    put(indent_ >= 0 ? ": " : ":");
  }
  void string(const std::string& s) { string(s.data(), s.size()); }
  void string(const char* s) { string(s, std::strlen(s)); }
  void string(const char* s, size_t n) {
    // Plain ASCII as is; anything else (quotes, backslashes, control characters, UTF-8, which
    // nlohmann checks) goes through its own serializer, so the bytes and the errors are its own.
    for (size_t i = 0; i < n; ++i) {
      const auto b = static_cast<unsigned char>(s[i]);
      if (b < 0x20 || b >= 0x80 || b == '"' || b == '\\') {
        json_.dump(nlohmann::json(std::string(s, n)), false, false, 0);
        return;
      }
    }
    sink_->write_character('"');
    sink_->write_characters(s, n);
    sink_->write_character('"');
  }
  template <typename Int>
  void number(Int v) {
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
    sink_->write_characters(buf, static_cast<size_t>(end - buf));
  }
  void dims(const std::vector<int64_t>& d) {
    if (d.empty()) {
      put("[]");
      return;
    }
    open('[');
    for (size_t i = 0; i < d.size(); ++i) {
      element(i == 0);
      number(d[i]);
    }
    close(']');
  }
  void value(const nlohmann::json& j) {
    if (indent_ >= 0) {
      json_.dump(j, true, false, static_cast<unsigned>(indent_), static_cast<unsigned>(depth_ * indent_));
    } else {
      json_.dump(j, false, false, 0);
    }
  }

  void put(const char* s) { sink_->write_characters(s, std::strlen(s)); }

  std::shared_ptr<TextSink> sink_;
  int indent_;
  int depth_ = 0;
  nlohmann::detail::serializer<nlohmann::json> json_;
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
  std::string text;
  auto sink = std::make_shared<nlohmann::detail::output_string_adapter<char>>(text);
  ManifestWriter(sink, 1).write(manifest, &digest);
  text.push_back('\n');
  return text;
}

}  // namespace ckpt
