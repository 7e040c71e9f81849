// inspect and verify on an HDF5 file ckptcheck did not write (tests/data/hdf5/keras_like.weights.h5,
// written by h5py through scripts/make_hdf5_fixtures.py): every dataset listed, the plain ones read,
// the others named as unsupported with the reason, never an error or a crash.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "base/file_io.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::run_ckptcheck;

const std::string kData = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/hdf5";
const std::string kKeras = kData + "/keras_like.weights.h5";

nlohmann::json json_of(const testing::CommandResult& r) {
  return nlohmann::json::parse(r.output.substr(0, r.output.rfind('}') + 1));
}

nlohmann::json expected() {
  const auto bytes = testing::read_file_bytes(kData + "/expected.json");
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

TEST(Hdf5GenericCommand, InspectListsEveryDatasetAndNamesTheUnsupportedOnes) {
  const nlohmann::json e = expected();
  const auto r = run_ckptcheck("inspect --json --stats '" + kKeras + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r);
  EXPECT_EQ(j["kind"], "hdf5");
  std::map<std::string, nlohmann::json> tensors;
  for (const auto& t : j["tensors"]) tensors[t["name"]] = t;
  ASSERT_EQ(tensors.size(), e["tensors"].size()) << r.output;
  for (const auto& [name, want] : e["tensors"].items()) {
    ASSERT_TRUE(tensors.count(name)) << name;
    EXPECT_EQ(tensors[name]["dtype"], want["dtype"]) << name;
    EXPECT_EQ(tensors[name]["shape"], want["shape"]) << name;
    if (tensors[name]["chunks"].size() == 1) {
      EXPECT_EQ(tensors[name]["sha256"], want["sha256"]) << name;
    }
  }
  EXPECT_EQ(tensors["extra/chunked_rows"]["chunks"].size(), 3u);
  EXPECT_EQ(tensors["extra/with_nan"]["stats"]["nan"], 1) << r.output;
  EXPECT_EQ(tensors["extra/with_nan"]["stats"]["inf"], 1) << r.output;
  ASSERT_EQ(j["metadata"]["unsupported_datasets"].size(), e["unsupported"].size()) << r.output;

  const auto table = run_ckptcheck("inspect '" + kKeras + "'");
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("unsupported /extra/gzip F32 [8]: filtered (gzip)"), std::string::npos)
      << table.output;
  EXPECT_NE(table.output.find("unsupported /extra/names string"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("layers/dense/vars/0"), std::string::npos) << table.output;
}

TEST(Hdf5GenericCommand, VerifyCountsNonFiniteValuesAndWarnsOfUnsupportedDatasets) {
  const nlohmann::json e = expected();
  const auto r = run_ckptcheck("verify --json --weights-only '" + kKeras + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // extra/with_nan holds a NaN and an Inf
  const auto j = json_of(r);
  ASSERT_EQ(j["errors"].size(), 1u) << r.output;
  EXPECT_EQ(j["errors"][0]["code"], "nonfinite_values") << r.output;
  EXPECT_EQ(j["errors"][0]["tensor"], "extra/with_nan") << r.output;
  EXPECT_EQ(j["errors"][0]["message"], "1 NaN and 1 Inf of 4 F64 elements") << r.output;
  size_t unsupported = 0;
  for (const auto& w : j["warnings"]) {
    if (w["code"] != "dataset_unsupported") continue;
    ++unsupported;
    EXPECT_TRUE(e["unsupported"].contains(w["tensor"].get<std::string>())) << w.dump();
  }
  EXPECT_EQ(unsupported, e["unsupported"].size()) << r.output;
}

// Keras 2 full-model files (scripts/make_hdf5_fixtures.py): a Lambda layer's marshalled bytecode
// in model_config is code keras.models.load_model runs, refused in both modes and named by layer.
const std::string kKerasGate = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/gate/";

TEST(Hdf5GenericCommand, KerasLambdaCodeIsRefusedInBothModesAndNamedByInspect) {
  for (const std::string mode : {"", "--weights-only "}) {
    const auto r = run_ckptcheck("verify --json " + mode + "'" + kKerasGate + "keras_lambda.h5'");
    EXPECT_EQ(r.exit_code, 1) << mode << r.output;
    const auto j = json_of(r);
    bool named = false;
    for (const auto& e : j["errors"]) {
      if (e["code"] != "keras_code_refused") continue;
      named = e["tensor"] == "scale_by_two" &&
              e["message"].get<std::string>().find(
                  "root attribute 'model_config', layer 'scale_by_two' (Lambda): "
                  "marshalled Python bytecode") != std::string::npos;
    }
    EXPECT_TRUE(named) << r.output;
  }
  // The weights themselves are fine: the clean model of the same shape passes.
  auto r = run_ckptcheck("verify --weights-only '" + kKerasGate + "keras_clean.h5'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_ckptcheck("inspect '" + kKerasGate + "keras_lambda.h5'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("WARNING: " + kKerasGate + "keras_lambda.h5 layer 'scale_by_two' (Lambda)"),
            std::string::npos)
      << r.output;
  r = run_ckptcheck("inspect '" + kKerasGate + "keras_clean.h5'");
  EXPECT_EQ(r.output.find("WARNING"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
