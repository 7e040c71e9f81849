// The typed value tree (formats/py_value.h) as the pickle reader builds it, on pickles CPython's
// pickle.dumps wrote (bytes below, made with Python 3.11): the distinctions JSON loses are kept, and
// one value written two ways is one value.
#include "formats/py_value.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/pickle_reader.h"

namespace ckpt {
namespace {

PyValuePtr read_value(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (size_t k = 0; k + 1 < hex.size(); k += 2)
    bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(k, 2), nullptr, 16)));
  auto read = read_tensor_pickle(bytes.data(), bytes.size(), "test.pkl");
  EXPECT_TRUE(read.is_ok()) << read.status().to_string();
  return read.is_ok() ? read->value : nullptr;
}

const PyValue& part(const PyValuePtr& dict, const std::string& key) {
  for (const auto& [name, value] : py_value_parts(*dict)) {
    if (name == key) return *value;
  }
  ADD_FAILURE() << "no part " << key;
  static const PyValue none;
  return none;
}

TEST(PyValue, AWideIntWrittenByLong1AndByProtocol0TextIsOneValue) {
  // 2**70 and -(2**70), protocol 2 (LONG1, two's complement) and protocol 0 (LONG, decimal text).
  const PyValuePtr binary = read_value("80028a090000000000000000402e");
  const PyValuePtr text = read_value("4c313138303539313632303731373431313330333432344c0a2e");
  const PyValuePtr negative_binary = read_value("80028a090000000000000000c02e");
  const PyValuePtr negative_text = read_value("4c2d313138303539313632303731373431313330333432344c0a2e");
  ASSERT_TRUE(binary && text && negative_binary && negative_text);
  EXPECT_EQ(binary->type, PyType::kBigInt);
  EXPECT_EQ(binary->s, "0x400000000000000000");
  EXPECT_TRUE(py_values_equal(*binary, *text));
  EXPECT_EQ(negative_binary->s, "-0x400000000000000000");
  EXPECT_TRUE(py_values_equal(*negative_binary, *negative_text));
  EXPECT_FALSE(py_values_equal(*binary, *negative_binary));
  EXPECT_EQ(py_type_name(*binary), "int");
  // Shown as Python shows it: decimal.
  EXPECT_EQ(py_value_repr(*binary), "1180591620717411303424");
  EXPECT_EQ(py_value_repr(*negative_binary), "-1180591620717411303424");
}

TEST(PyValue, TheDistinctionsJsonLosesAreKept) {
  // {'s': {1,2,3}, 'f': frozenset({1}), 't': (1,), 'l': [1], 'b': b'\x00\xff', 'x': 0.1, 'z': -0.0,
  //  'n': nan}, protocol 4.
  const PyValuePtr a = read_value(
      "8004955d000000000000007d94288c0173948f94284b014b024b03908c016694284b0191948c0174944b0185948c016c945d94"
      "4b016"
      "18c016294430200ff948c017894473fb999999999999a8c017a944780000000000000008c016e94477ff8000000000000752"
      "e");
  // {'s': {3,2,1} (items added in that order), 'f': {1}, 't': [1], 'l': (1,), 'b': b'\x00\xfe',
  //  'x': 0.1, 'z': 0.0, 'n': nan}.
  const PyValuePtr b = read_value(
      "8004955e000000000000007d94288c0173948f94284b034b024b01908c0166948f94284b01908c0174945d944b01618c016c94"
      "4b018"
      "5948c016294430200fe948c017894473fb999999999999a8c017a944700000000000000008c016e94477ff8000000000000752"
      "e");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(py_value_repr(part(a, "t")), "(1,)");
  EXPECT_EQ(py_value_repr(part(a, "l")), "[1]");
  EXPECT_EQ(py_value_repr(part(a, "f")), "frozenset({1})");
  EXPECT_EQ(py_value_repr(part(a, "b")), "b'\\x00\\xff'");
  EXPECT_EQ(py_value_repr(part(a, "z")), "-0.0");
  EXPECT_EQ(py_value_repr(part(a, "x")), "0.1");
  EXPECT_TRUE(py_values_equal(part(a, "s"), part(b, "s"))) << "a set in another order is the same set";
  EXPECT_TRUE(py_values_equal(part(a, "x"), part(b, "x")));
  EXPECT_TRUE(py_values_equal(part(a, "n"), part(b, "n"))) << "the same NaN";
  for (const char* key : {"f", "t", "l", "b", "z"})
    EXPECT_FALSE(py_values_equal(part(a, key), part(b, key))) << key;
  EXPECT_FALSE(py_values_equal(*a, *b));
  // Their JSON views cannot tell the tuple from the list: why nothing compares on JSON.
  EXPECT_EQ(py_value_to_json(part(a, "t")), py_value_to_json(part(b, "t")));
}

TEST(PyValue, TextThatIsNotUtf8ComparesByItsBytes) {
  // '\udcff' and '\udcfe', protocol 2: lone surrogates, which pickle writes with 'surrogatepass'.
  const PyValuePtr a = read_value("80025803000000edb3bf71002e");
  const PyValuePtr b = read_value("80025803000000edb3be71002e");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->type, PyType::kStr);
  EXPECT_FALSE(py_values_equal(*a, *b));
  EXPECT_EQ(py_value_repr(*a), "'\\xed\\xb3\\xbf'");
  EXPECT_EQ(py_value_to_json(*a), py_value_to_json(*b)) << "both are U+FFFD in JSON";
}

TEST(PyValue, JsonReadAsJsonLoadGivesIt) {
  const PyValuePtr v = py_value_from_json(nlohmann::json::parse(R"({"step": 3, "lr": 0.5, "tags": ["a"]})"));
  EXPECT_EQ(py_value_repr(*v), "{'lr': 0.5, 'step': 3, 'tags': ['a']}");  // nlohmann orders keys
  EXPECT_EQ(py_value_repr(*py_value_from_json(nlohmann::json::parse("[1, 2, 3]")), 5), "[1, 2…");
}

}  // namespace
}  // namespace ckpt
