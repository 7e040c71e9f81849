#include "verifier/plan/hardware_catalog.h"

#include <gtest/gtest.h>

#include "tests/support/test_paths.h"

namespace ckpt {
namespace {

TEST(HardwareCatalog, ShippedCatalogHasTheFourAcceleratorsAndTwoReservations) {
  auto catalog = load_hardware_catalog(std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/hardware.yaml");
  ASSERT_TRUE(catalog.is_ok()) << catalog.status().to_string();
  ASSERT_EQ(catalog->accelerators.size(), 4u);
  EXPECT_EQ(catalog->accelerators[1].name, "H100 80GB");
  EXPECT_EQ(catalog->accelerators[1].memory_bytes, 81559.0 * 1024 * 1024);
  EXPECT_NE(catalog->accelerators[3].note.find("ROCm"), std::string::npos);
  ASSERT_EQ(catalog->reservations.size(), 2u);
  EXPECT_EQ(catalog->reservations[0].hours, 168.0);
  EXPECT_EQ(catalog->reservations[1].hours, 720.0);
  EXPECT_EQ(catalog->pipeline.preprocess, 12.0);
  EXPECT_EQ(catalog->gpus_per_node, 8);
}

const char kMinimal[] = R"(
gpus_per_node: 8
accelerators:
  - {name: X, memory_bytes: 100, runtime_overhead_bytes: 1, relative_speed: 1, usd_per_gpu_hour: 1}
pipeline: {download_hours: 1, preprocess_hours: 1, validation_hours: 1, export_hours: 1, copy_out_hours: 1}
reservations:
  - {name: long, hours: 720, gpus: 8, price_multiplier: 1}
  - {name: short, hours: 168, gpus: 8, price_multiplier: 1}
)";

TEST(HardwareCatalog, SortsReservationsShortestFirst) {
  auto catalog = parse_hardware_catalog(kMinimal, "c.yaml");
  ASSERT_TRUE(catalog.is_ok()) << catalog.status().to_string();
  EXPECT_EQ(catalog->reservations[0].name, "short");
}

TEST(HardwareCatalog, NamesTheBadKey) {
  std::string bad = kMinimal;
  bad.replace(bad.find("memory_bytes: 100"), 17, "memory_bytes: lots");
  auto catalog = parse_hardware_catalog(bad, "c.yaml");
  ASSERT_FALSE(catalog.is_ok());
  EXPECT_NE(catalog.status().message().find("c.yaml: accelerators[0].memory_bytes"), std::string::npos)
      << catalog.status().message();
  EXPECT_FALSE(parse_hardware_catalog("[unclosed", "c.yaml").is_ok());
  EXPECT_FALSE(parse_hardware_catalog("- a list", "c.yaml").is_ok());
}

TEST(HardwareCatalog, FoundBesideTheBinaryThenTheSourceTreeThenTheWorkingDirectory) {
  const auto candidates = hardware_catalog_candidates("/usr/bin/ckptcheck");
  ASSERT_EQ(candidates.size(), 3u);
  EXPECT_EQ(candidates[0], "/usr/share/ckptcheck/hardware.yaml");
  EXPECT_EQ(candidates[1], "/usr/fixtures/hardware.yaml");
  EXPECT_EQ(candidates[2], "fixtures/hardware.yaml");
  const std::string shipped = std::string(CKPTCHECK_SOURCE_DIR) + "/fixtures/hardware.yaml";
  auto found = find_hardware_catalog({"/nonexistent/hardware.yaml", shipped});
  ASSERT_TRUE(found.is_ok()) << found.status().to_string();
  EXPECT_EQ(*found, shipped);
  found = find_hardware_catalog({"/nonexistent/a.yaml", "/nonexistent/b.yaml"});
  ASSERT_FALSE(found.is_ok());
  EXPECT_NE(found.status().message().find("/nonexistent/a.yaml, /nonexistent/b.yaml"), std::string::npos);
  EXPECT_NE(found.status().message().find("--catalog"), std::string::npos);
}

}  // namespace
}  // namespace ckpt
