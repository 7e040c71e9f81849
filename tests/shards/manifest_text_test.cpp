// manifest_to_json_text writes the manifest field by field (shards/manifest_text.h); these tests
// hold it to the bytes nlohmann::json's dump gives for the manifest's JSON object, built here the
// way every manifest committed so far was built, on values that take every path of the writer.
#include "shards/manifest_text.h"

#include <gtest/gtest.h>

#include "base/embedded_digest.h"
#include "base/sha256.h"
#include "shards/manifest.h"
#include "shards/manifest_fast_parse.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

// The manifest's JSON object as manifest_to_json_text built it before it wrote text directly.
nlohmann::json reference_object(const Manifest& m) {
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : m.shards) {
    shards.push_back({{"path", s.path},
                      {"format", s.format},
                      {"bytes", s.bytes},
                      {"sha256", s.sha256},
                      {"rank", s.rank},
                      {"sha256_of", s.sha256_of}});
  }
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& t : m.tensors) {
    nlohmann::json chunks = nlohmann::json::array();
    for (const auto& c : t.chunks) {
      chunks.push_back({{"shard", c.shard},
                        {"offsets", c.offsets},
                        {"shape", c.shape},
                        {"data_offset", c.data_offset},
                        {"data_bytes", c.data_bytes},
                        {"sha256", digest_hex(c.sha256)}});
    }
    nlohmann::json tensor = {
        {"name", t.name}, {"component", t.component}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}};
    if (m.chunk_records == ChunkRecords::kInManifest) tensor["chunks"] = chunks;
    tensors.push_back(tensor);
  }
  return {{"format", kManifestFormat},
          {"version", manifest_version_of(m.chunk_records)},
          {"step", m.step},
          {"created_utc", m.created_utc},
          {"world_size", m.world_size},
          {"strategy", m.strategy},
          {"config", m.config},
          {"pins", m.pins},
          {"extra", m.extra},
          {"shards", shards},
          {"tensors", tensors}};
}

Manifest awkward_manifest() {
  Manifest m;
  m.step = 1234567;
  m.created_utc = "2026-12-04T18:00:00Z";
  m.world_size = 16;
  m.strategy = "fsdp";
  m.config = {{"lr", 3e-4},
              {"betas", {0.9, 0.999}},
              {"name", "run \"quoted\" \\ back\tslash"},
              {"nested", {{"empty", nlohmann::json::object()}, {"list", nlohmann::json::array()}, {"n", -3}}},
              {"big", 18446744073709551615ull},
              {"flag", true},
              {"none", nullptr}};
  m.pins = {{"torch", "1.13.1"}, {"unicode", "caf\xc3\xa9 \xe2\x82\xac"}};
  m.shards.push_back({"shard_00000.bin", "native", 4096, std::string(64, 'a'), 0, "file"});
  m.shards.push_back({"dir/shard \"1\".bin", "safetensors", 0, std::string(64, 'b'), 15, "header"});
  ManifestTensor a{"model.w", "model", DType::kF32, {8, 4}, {}};
  a.chunks.push_back({0, {0, 0}, {4, 4}, 128, 64, *digest_from_hex(std::string(64, 'c'))});
  a.chunks.push_back({1, {4, 0}, {4, 4}, 0, 64, *digest_from_hex(std::string(64, 'd'))});
  ManifestTensor scalar{"optimizer.step", "optimizer", DType::kI64, {}, {}};
  scalar.chunks.push_back({0, {}, {}, 1 << 20, 8, *digest_from_hex(std::string(64, 'e'))});
  ManifestTensor odd{"na\xc3\xafve \"name\"\n\x01", "", DType::kBF16, {0}, {}};
  m.tensors = {a, scalar, odd};
  return m;
}

TEST(ManifestText, IsTheDumpOfTheManifestObjectWithItsDigest) {
  for (const Manifest& m : {awkward_manifest(), Manifest{}}) {
    nlohmann::json j = reference_object(m);
    embed_digest(j, kManifestDigestField);
    const std::string expected = j.dump(1) + "\n";
    const std::string text = manifest_to_json_text(m);
    EXPECT_EQ(text, expected);
    // Counted, then written into a string of that size: nothing grown by doubling (issue 44).
    EXPECT_EQ(text.capacity(), text.size());
    j.erase(kManifestDigestField);
    EXPECT_EQ(manifest_content_sha256(m), sha256_hex(j.dump()));
  }
}

TEST(ManifestText, ParsesBackWithAMatchingDigestFromOneParse) {
  const Manifest m = awkward_manifest();
  const std::string text = manifest_to_json_text(m);
  ManifestDigest digest;
  auto parsed = parse_manifest(text, "manifest.json", &digest);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().to_string();
  EXPECT_TRUE(digest.present);
  EXPECT_TRUE(digest.matches()) << digest.recorded << " vs " << digest.computed;
  auto from_text = manifest_digest(text, "manifest.json");
  ASSERT_TRUE(from_text.is_ok());
  EXPECT_EQ(from_text->computed, digest.computed);
  EXPECT_EQ(manifest_to_json_text(*parsed), text);

  // An edit after commit: both ways of computing the digest see it, and agree on the value.
  std::string edited = text;
  edited.replace(edited.find("fsdp"), 4, "ddp_");
  ManifestDigest edited_digest;
  ASSERT_TRUE(parse_manifest(edited, "manifest.json", &edited_digest).is_ok());
  EXPECT_FALSE(edited_digest.matches());
  EXPECT_EQ(edited_digest.computed, manifest_digest(edited, "manifest.json")->computed);
}

TEST(ManifestText, ChunkErrorsStillNameTheTensorAndChunk) {
  Manifest m = awkward_manifest();
  m.tensors[0].chunks[1].shard = 7;  // out of range: only two shards
  const auto parsed = parse_manifest(manifest_to_json_text(m), "manifest.json");
  ASSERT_FALSE(parsed.is_ok());
  EXPECT_EQ(parsed.status().message(),
            "manifest.json tensor 0 (model.w) chunk 1: shard index 7 but the manifest lists 2 shards");
}

// simdjson takes the writer's layout, and gives the fields and digest the reference path gives.
TEST(ManifestFastParse, ReadsWhatTheWriterWritesAsTheReferenceDoes) {
  const std::string text = manifest_to_json_text(awkward_manifest());
  ManifestDigest digest;
  const std::optional<Manifest> fast = parse_manifest_fast(text, &digest);
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(manifest_to_json_text(*fast), text);
  auto reference = manifest_digest(text, "manifest.json");
  ASSERT_TRUE(reference.is_ok());
  EXPECT_EQ(digest.recorded, reference->recorded);
  EXPECT_EQ(digest.computed, reference->computed);
  EXPECT_EQ(fast->config, awkward_manifest().config);
  EXPECT_TRUE(fast->config["big"].is_number_unsigned());
  EXPECT_TRUE(fast->config["nested"]["n"].is_number_integer());
}

// The digest read off the text decides only where it equals the recorded one. A manifest spelled
// otherwise (members in another order, another indent) is still judged by its content, as before.
TEST(ManifestFastParse, JudgesAManifestSpelledOtherwiseByItsContent) {
  const std::string text = manifest_to_json_text(awkward_manifest());
  const nlohmann::ordered_json sorted = nlohmann::ordered_json::parse(text);
  nlohmann::ordered_json reordered;  // "world_size" and "version" first: both follow "shards"
  reordered["world_size"] = sorted["world_size"];
  reordered["version"] = sorted["version"];
  for (const auto& [key, value] : sorted.items()) reordered[key] = value;
  for (const std::string& other : {reordered.dump(1), sorted.dump(4), sorted.dump()}) {
    ManifestDigest digest;
    const std::optional<Manifest> fast = parse_manifest_fast(other, &digest);
    ASSERT_TRUE(fast.has_value()) << other.substr(0, 200);
    EXPECT_TRUE(digest.matches()) << digest.recorded << " vs " << digest.computed;
    EXPECT_EQ(digest.computed, manifest_digest(other, "manifest.json")->computed);
    EXPECT_EQ(manifest_to_json_text(*fast), text);
  }
  // And one of those, edited, is still an edit.
  std::string edited = reordered.dump(1);
  edited.replace(edited.find("fsdp"), 4, "ddp_");
  ManifestDigest digest;
  EXPECT_FALSE(parse_manifest_fast(edited, &digest).has_value());
  ASSERT_TRUE(parse_manifest(edited, "manifest.json", &digest).is_ok());
  EXPECT_FALSE(digest.matches());
}

// Whatever is not exactly that layout goes to the nlohmann path, whose errors and digest are the
// reference: a field the writer does not write, one written twice, another spelling, a float where
// an integer belongs, an edit after commit.
TEST(ManifestFastParse, LeavesEverythingElseToTheReferencePath) {
  const std::string text = manifest_to_json_text(awkward_manifest());
  auto replaced = [&](const std::string& from, const std::string& to) {
    return testing::replaced_once(text, from, to);
  };
  const std::vector<std::string> others = {
      replaced("\"step\": 1234567", "\"step\": 1234567,\n \"unknown\": 1"),
      replaced("\"step\": 1234567", "\"step\": 1234567,\n \"step\": 1234568"),
      replaced("\"data_bytes\": 64", "\"data_bytes\": 64, \"data_bytes\": 64"),
      replaced("\"step\": 1234567", "\"step\": 1234567.0"),
      replaced("\"strategy\": \"fsdp\"", "\"strategy\": \"ddp\""),
      replaced("\"dtype\": \"F32\"", "\"dtype\": \"f32\""),
      // The On-Demand reader takes values where they lie: what follows the root, a value of
      // another type and a repeated key inside a config object must still leave it.
      text + "{}",
      text + "x",
      replaced("\"step\": 1234567", "\"step\": \"1234567\""),
      replaced("\"data_offset\": 0", "\"data_offset\": -0"),
      replaced("\"offsets\": [", "\"offsets\": [-1, "),
      replaced("\"shards\": [", "\"shards\": {\"a\": ["),
  };
  for (const std::string& other : others) {
    ManifestDigest digest;
    EXPECT_FALSE(parse_manifest_fast(other, &digest).has_value()) << other.substr(0, 400);
  }
  // The edit after commit is still named, by the reference path.
  ManifestDigest digest;
  ASSERT_TRUE(parse_manifest(others[4], "manifest.json", &digest).is_ok());
  EXPECT_FALSE(digest.matches());
  EXPECT_EQ(digest.computed, manifest_digest(others[4], "manifest.json")->computed);
  // A float step is refused with the reference's message.
  EXPECT_EQ(parse_manifest(others[3], "manifest.json").status().message(),
            "manifest.json: field 'step': expected an integer, got number");
}

// awkward_manifest as version 2 writes it: its shards native ones whose headers are hashed (the
// only shards whose headers hold every field of a chunk's record).
Manifest awkward_manifest_in_headers() {
  Manifest m = awkward_manifest();
  m.chunk_records = ChunkRecords::kInShardHeaders;
  for (ManifestShard& s : m.shards) {
    s.format = "native";
    s.sha256_of = "header";
  }
  return m;
}

// Version 2 lists no chunk, and its digest still covers every other field: the text is the dump of
// the manifest object without chunk lists, and both parsers read it back, with no chunks (the
// reader fills them from the shard headers, shards/shard_header_chunks.h).
TEST(ManifestText, VersionTwoListsNoChunkAndDigestsTheRest) {
  const Manifest m = awkward_manifest_in_headers();
  nlohmann::json j = reference_object(m);
  embed_digest(j, kManifestDigestField);
  const std::string text = manifest_to_json_text(m);
  EXPECT_EQ(text, j.dump(1) + "\n");
  EXPECT_EQ(text.find("\"chunks\""), std::string::npos);
  EXPECT_NE(text.find("\"version\": 2"), std::string::npos);
  ManifestDigest fast_digest, reference_digest;
  const std::optional<Manifest> fast = parse_manifest_fast(text, &fast_digest);
  const auto reference = parse_manifest_reference(text, "manifest.json", &reference_digest);
  ASSERT_TRUE(fast.has_value());
  ASSERT_TRUE(reference.is_ok()) << reference.status().to_string();
  for (const Manifest* parsed : {&*fast, &*reference}) {
    EXPECT_EQ(parsed->chunk_records, ChunkRecords::kInShardHeaders);
    for (const ManifestTensor& t : parsed->tensors) EXPECT_TRUE(t.chunks.empty()) << t.name;
    EXPECT_EQ(manifest_to_json_text(*parsed), text);
  }
  EXPECT_TRUE(fast_digest.matches());
  EXPECT_EQ(fast_digest.computed, reference_digest.computed);
  // The same manifest as version 1 is another text with another digest: the version is covered.
  EXPECT_NE(manifest_content_sha256(m), manifest_content_sha256(awkward_manifest()));
}

// The text with its digest member taken out (as manifests written before digests were).
std::string without_digest(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text);
  j.erase(kManifestDigestField);
  return j.dump(1) + "\n";
}

// What a version does not allow is refused by both parsers: chunk lists in version 2 (they would
// be records no header check covers), a version 2 shard whose header cannot hold the records, a
// version 1 tensor without its chunk list, a version this build does not know, and a version 2
// manifest without its digest (only manifests written before digests, all version 1, lack it).
TEST(ManifestText, EachVersionHoldsItsChunksWhereItSays) {
  const std::string v2 = manifest_to_json_text(awkward_manifest_in_headers());
  const std::string v1 = manifest_to_json_text(awkward_manifest());
  const std::vector<std::pair<std::string, std::string>> refused = {
      {testing::replaced_once(v2, "\"component\": \"model\"", "\"chunks\": [],\n   \"component\": \"model\""),
       "manifest.json tensor 0 (model.w): lists chunks, which a version 2 manifest keeps in its shard "
       "headers"},
      {testing::replaced_once(v2, "\"format\": \"native\"", "\"format\": \"safetensors\""),
       "manifest.json shard 0: 'shard_00000.bin' is a safetensors shard whose header is hashed; a version 2 "
       "manifest's shards are native shards whose header is hashed (it holds their chunk records)"},
      {testing::replaced_once(v2, "\"sha256_of\": \"header\"", "\"sha256_of\": \"file\""),
       "manifest.json shard 0: 'shard_00000.bin' is a native shard whose file is hashed; a version 2 "
       "manifest's shards are native shards whose header is hashed (it holds their chunk records)"},
      {testing::replaced_once(v1, "\"version\": 1", "\"version\": 2"), ""},
      {testing::replaced_once(v2, "\"version\": 2", "\"version\": 1"), ""},
      {testing::replaced_once(v2, "\"version\": 2", "\"version\": 3"),
       "manifest.json: manifest version 3, this build reads 1 and 2"},
      {without_digest(v2),
       "manifest.json: a version 2 manifest without manifest_sha256 (every writer of version 2 records it: "
       "the manifest was edited)"},
  };
  for (const auto& [text, message] : refused) {
    ManifestDigest digest;
    EXPECT_FALSE(parse_manifest_fast(text, &digest).has_value()) << text.substr(0, 300);
    const auto parsed = parse_manifest(text, "manifest.json");
    ASSERT_FALSE(parsed.is_ok()) << text.substr(0, 300);
    if (!message.empty()) {
      EXPECT_EQ(parsed.status().message(), message);
    }
  }
}

}  // namespace
}  // namespace ckpt
