// sha256_without_whitespace reads a document's content digest off its text (base/embedded_digest.h):
// for any text nlohmann's dump() writes with sorted keys, compact or pretty, it must be the digest
// of the compact dump without the digest member, wherever that member sits; any other spelling must
// hash to something else (the caller then recomputes), and what is not one object gives nothing.
#include "base/embedded_digest.h"

#include <gtest/gtest.h>

#include "base/sha256.h"

namespace ckpt {
namespace {

constexpr const char* kField = "doc_sha256";

// Documents whose digest member is first, in the middle, last, or alone, with strings that hold
// whitespace, quotes, backslashes, commas and braces, and a member of the same name one level down
// (which is content, and kept).
std::vector<nlohmann::json> documents() {
  const nlohmann::json awkward = {{"a b", "x, y: {z}"},
                                  {"quote", "say \"hi\"\\"},
                                  {"tab", "\t\n \r"},
                                  {"nested", {{kField, "kept"}, {"list", {1, -2.5, nullptr, true}}}},
                                  {"empty", nlohmann::json::object()},
                                  {"unicode", "caf\xc3\xa9"}};
  std::vector<nlohmann::json> out;
  for (const char* key : {"a", "m", "z"}) {  // sorted before, among and after the other keys
    nlohmann::json j = awkward;
    j[key] = 1;
    out.push_back(j);
  }
  out.push_back(nlohmann::json::object());
  for (auto& j : out) j[kField] = std::string(64, 'f');
  // First of all: sorts before every other key.
  nlohmann::json first = {{"zz", 1}};
  first["d"] = "0";
  first["doc_sha256"] = std::string(64, 'f');
  out.push_back(first);
  return out;
}

TEST(Sha256WithoutWhitespace, IsTheDigestOfTheCompactDumpLessTheMember) {
  for (const nlohmann::json& j : documents()) {
    nlohmann::json content = j;
    content.erase(kField);
    const std::string expected = sha256_hex(content.dump());
    for (int indent : {-1, 0, 1, 4}) {
      const std::string text = j.dump(indent) + (indent >= 0 ? "\n" : "");
      EXPECT_EQ(sha256_without_whitespace(text, kField), expected) << text;
    }
  }
  // No member of that name: the whole content.
  const nlohmann::json plain = {{"a", {1, 2}}, {"b", "c d"}};
  EXPECT_EQ(sha256_without_whitespace(plain.dump(2), kField), sha256_hex(plain.dump()));
}

TEST(Sha256WithoutWhitespace, OtherSpellingsHashToSomethingElse) {
  const nlohmann::json j = documents()[1];
  nlohmann::json content = j;
  content.erase(kField);
  const std::string canonical = sha256_hex(content.dump());
  const std::string text = j.dump(1);
  ASSERT_EQ(sha256_without_whitespace(text, kField), canonical);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string out = text;
    const size_t at = out.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return out.replace(at, from.size(), to);
  };
  for (const std::string& other : {
           replaced("\"m\": 1", "\"m\": 1.0"),     // a number spelled otherwise
           replaced("caf\xc3\xa9", "caf\\u00e9"),  // an escape where the dump writes the byte
           replaced("\"a b\"", "\"a  b\""),        // whitespace inside a string is content
           replaced("\"empty\": {}", "\"empty\": {},\n \"extra\": 0"),  // a member added
       }) {
    const auto digest = sha256_without_whitespace(other, kField);
    ASSERT_TRUE(digest.has_value()) << other;
    EXPECT_NE(*digest, canonical) << other;
  }
}

TEST(Sha256WithoutWhitespace, RefusesWhatIsNotOneObjectWithAStringDigest) {
  for (const std::string& text : {
           std::string("[1, 2]"),
           std::string(""),
           std::string("{\"a\": 1} {}"),
           std::string("{\"a\": 1} x"),
           std::string("{\"a\": \"never closed}"),
           std::string("{\"a\": 1"),
           std::string("{\"doc_sha256\": 3, \"a\": 1}"),
           std::string("{\"a\": 1, }"),
           std::string("{, \"a\": 1}"),
       }) {
    EXPECT_FALSE(sha256_without_whitespace(text, kField).has_value()) << text;
  }
}

}  // namespace
}  // namespace ckpt
