#include "verifier/pins/drift.h"

#include <gtest/gtest.h>

namespace ckpt {
namespace {

nlohmann::json recorded_pins() {
  return {
      {"model_revision", "m1"},
      {"dataset_revision", "d1"},
      {"config_sha256", "c1"},
      {"seeds", {{"seed", 42}, {"data.shuffle_seed", 1234}}},
      {"dependencies", {{"libtorch", "1.13.0"}, {"zstd", "1.5.4"}}},
      {"container_fingerprint",
       {{"inputs", {{"os", {{"PRETTY_NAME", "Debian GNU/Linux 12 (bookworm)"}}}, {"threads", 1}}},
        {"sha256", "f1"}}},
  };
}

const DriftItem* find_item(const DriftReport& report, const std::string& field) {
  for (const DriftItem& item : report.items) {
    if (item.field == field) return &item;
  }
  return nullptr;
}

TEST(Drift, IdenticalPinsHaveNoDrift) {
  const DriftReport report = compare_pins(recorded_pins(), recorded_pins(), {});
  EXPECT_TRUE(report.items.empty());
  EXPECT_FALSE(report.blocking());
  EXPECT_EQ(report.summary(), "no drift\n");
}

TEST(Drift, EachRevisionAndSeedBlocks) {
  for (const char* field : {"model_revision", "dataset_revision", "config_sha256"}) {
    nlohmann::json now = recorded_pins();
    now[field] = "changed";
    const DriftReport report = compare_pins(recorded_pins(), now, {});
    ASSERT_EQ(report.items.size(), 1u) << field;
    EXPECT_EQ(report.items[0].field, field);
    EXPECT_EQ(report.items[0].severity, DriftSeverity::kBlocking);
    EXPECT_TRUE(report.blocking());
  }
  nlohmann::json now = recorded_pins();
  now["seeds"]["seed"] = 7;
  const DriftReport report = compare_pins(recorded_pins(), now, {});
  ASSERT_NE(find_item(report, "seeds.seed"), nullptr);
  EXPECT_EQ(find_item(report, "seeds.seed")->describe(), "seeds.seed: checkpoint 42, now 7");
  EXPECT_TRUE(report.blocking());
}

TEST(Drift, DependencyDifferenceWarnsAndNamesBothValues) {
  nlohmann::json now = recorded_pins();
  now["dependencies"]["libtorch"] = "2.1.0";
  const DriftReport report = compare_pins(recorded_pins(), now, {});
  ASSERT_EQ(report.items.size(), 1u);
  EXPECT_EQ(report.items[0].severity, DriftSeverity::kWarning);
  EXPECT_FALSE(report.blocking());
  EXPECT_EQ(report.summary(), "warning: dependencies.libtorch: checkpoint 1.13.0, now 2.1.0\n");
}

TEST(Drift, ContainerDifferenceNamesTheInputNotJustTheHash) {
  nlohmann::json now = recorded_pins();
  now["container_fingerprint"]["inputs"]["threads"] = 8;
  now["container_fingerprint"]["sha256"] = "f2";
  const DriftReport report = compare_pins(recorded_pins(), now, {});
  ASSERT_EQ(report.items.size(), 1u);
  EXPECT_EQ(report.items[0].field, "container_fingerprint.inputs.threads");
  EXPECT_EQ(report.items[0].severity, DriftSeverity::kWarning);

  // When only hashes were recorded the hash itself is what differs.
  nlohmann::json hash_only = {{"container_fingerprint", {{"sha256", "f1"}}}};
  nlohmann::json hash_now = {{"container_fingerprint", {{"sha256", "f2"}}}};
  const DriftReport hashes = compare_pins(hash_only, hash_now, {});
  ASSERT_EQ(hashes.items.size(), 1u);
  EXPECT_EQ(hashes.items[0].field, "container_fingerprint.sha256");
}

TEST(Drift, AllowedFieldIsOverriddenNotBlocking) {
  nlohmann::json now = recorded_pins();
  now["config_sha256"] = "c2";
  now["seeds"]["seed"] = 43;
  const DriftReport report = compare_pins(recorded_pins(), now, {"config_sha256", "seeds"});
  ASSERT_EQ(report.items.size(), 2u);
  EXPECT_EQ(find_item(report, "config_sha256")->severity, DriftSeverity::kOverridden);
  EXPECT_EQ(find_item(report, "seeds.seed")->severity, DriftSeverity::kOverridden);
  EXPECT_FALSE(report.blocking());
  // Allowing one field does not allow another.
  now["model_revision"] = "m2";
  EXPECT_TRUE(compare_pins(recorded_pins(), now, {"config_sha256", "seeds"}).blocking());
}

TEST(Drift, FieldMissingInRecordedIsReported) {
  nlohmann::json old = recorded_pins();
  old.erase("dataset_revision");
  old["dependencies"].erase("zstd");
  const DriftReport report = compare_pins(old, recorded_pins(), {});
  ASSERT_EQ(report.items.size(), 2u);
  // A checkpoint that never pinned its dataset cannot prove it is the same one.
  EXPECT_EQ(find_item(report, "dataset_revision")->describe(),
            "dataset_revision: checkpoint missing, now d1");
  EXPECT_EQ(find_item(report, "dataset_revision")->severity, DriftSeverity::kBlocking);
  EXPECT_EQ(find_item(report, "dependencies.zstd")->severity, DriftSeverity::kWarning);
  EXPECT_EQ(find_item(report, "dependencies.zstd")->recorded, "missing");
}

TEST(Drift, JsonListsEveryItem) {
  nlohmann::json now = recorded_pins();
  now["model_revision"] = "m2";
  now["dependencies"]["zstd"] = "1.5.5";
  const nlohmann::json j = compare_pins(recorded_pins(), now, {}).to_json();
  EXPECT_EQ(j["blocking"], true);
  ASSERT_EQ(j["items"].size(), 2u);
  EXPECT_EQ(j["items"][0]["field"], "dependencies.zstd");  // sorted by field
  EXPECT_EQ(j["items"][0]["severity"], "warning");
  EXPECT_EQ(j["items"][1]["recorded"], "m1");
  EXPECT_EQ(j["items"][1]["current"], "m2");
  EXPECT_EQ(j["items"][1]["severity"], "blocking");
}

}  // namespace
}  // namespace ckpt
