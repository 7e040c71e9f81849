// HDF5 files ckptcheck did not write (Keras weights and the like), read-only. The fixture
// tests/data/hdf5/keras_like.weights.h5 is written by h5py (scripts/make_hdf5_fixtures.py); its
// expected.json holds numpy's hashes of every readable dataset and why each other one is refused.
// Built only with HDF5 (CKPTCHECK_WITH_HDF5), like formats/hdf5_file.cpp.
#ifdef CKPTCHECK_WITH_HDF5
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "base/file_io.h"
#include "base/sha256.h"
#include "formats/hdf5_file.h"
#include "tests/support/byte_mutations.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using testing::TempDir;

const std::string kKeras = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/hdf5/keras_like.weights.h5";

nlohmann::json expected_hdf5_fixtures() {
  const auto bytes =
      testing::read_file_bytes(std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/hdf5/expected.json");
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

TEST(Hdf5Generic, ReadsEveryPlainDatasetOfAKerasLikeFile) {
  const nlohmann::json e = expected_hdf5_fixtures();
  auto r = open_hdf5(kKeras);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const TensorFile& f = **r;
  // Chunks of one dataset, in global-offset order, concatenate to its row-major bytes here: the only
  // chunked readable dataset is split along dim 0.
  std::map<std::string, std::vector<size_t>> by_name;
  for (size_t i = 0; i < f.chunks().size(); ++i) by_name[f.chunks()[i].name].push_back(i);
  ASSERT_EQ(by_name.size(), e["tensors"].size());
  for (const auto& [name, want] : e["tensors"].items()) {
    ASSERT_TRUE(by_name.count(name)) << name;
    std::vector<uint8_t> all;
    for (size_t i : by_name[name]) {
      const ChunkInfo& c = f.chunks()[i];
      EXPECT_EQ(dtype_name(c.dtype), want["dtype"].get<std::string>()) << name;
      EXPECT_EQ(c.global_shape, want["shape"].get<std::vector<int64_t>>()) << name;
      EXPECT_EQ(c.component, "model");
      auto bytes = read_whole_chunk(f, i);
      ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
      all.insert(all.end(), bytes->begin(), bytes->end());
    }
    EXPECT_EQ(sha256_hex(all.data(), all.size()), want["sha256"].get<std::string>()) << name;
  }
  std::vector<std::vector<int64_t>> rows;
  for (size_t i : by_name["extra/chunked_rows"]) rows.push_back(f.chunks()[i].offsets);
  EXPECT_EQ(rows, e["chunked_rows_chunks"].get<std::vector<std::vector<int64_t>>>());
  EXPECT_EQ(f.chunks()[by_name["extra/chunked_rows"].back()].shape, std::vector<int64_t>({2, 4}));
  EXPECT_NE(f.payload_source(), nullptr);  // every readable dataset is plain byte ranges

  // Every other dataset is listed with its type, shape and the reason, never an error.
  const nlohmann::json& unsupported = f.metadata()["unsupported_datasets"];
  ASSERT_EQ(unsupported.size(), e["unsupported"].size()) << unsupported.dump();
  for (const auto& u : unsupported) {
    const std::string path = u["path"];
    ASSERT_TRUE(e["unsupported"].contains(path)) << path;
    EXPECT_NE(u["reason"].get<std::string>().find(e["unsupported"][path].get<std::string>()),
              std::string::npos)
        << path << ": " << u.dump();
    EXPECT_TRUE(u["shape"].is_array()) << u.dump();
  }
  EXPECT_EQ(f.metadata()["hdf5_generic_datasets"], e["tensors"].size() + e["unsupported"].size());
}

// A file with one contiguous float32 dataset and no ckptcheck attributes, written with the C API.
std::string plain_file(const std::string& dir, const char* name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string path = dir + "/" + name;
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[2] = {2, 3};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t ds = H5Dcreate2(f, "/w", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const float v[6] = {1, 2, 3, 4, 5, 6};
  H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(f);
  return path;
}

TEST(Hdf5Generic, ADatasetWithoutOurAttributesIsReadByItsHdf5Type) {
  TempDir tmp;
  auto r = open_hdf5(plain_file(tmp.path(), "plain.h5"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ((*r)->chunks().size(), 1u);
  const ChunkInfo& c = (*r)->chunks()[0];
  EXPECT_EQ(c.name, "w");
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_EQ(c.shape, std::vector<int64_t>({2, 3}));
  float v[6];
  ASSERT_TRUE((*r)->read_chunk(0, 0, v, sizeof(v)).is_ok());
  EXPECT_EQ(v[5], 6.0f);
  EXPECT_TRUE((*r)->metadata()["unsupported_datasets"].empty());
}

TEST(Hdf5Generic, PayloadOffsetsOutsideTheFileAreCorruptionForGenericDatasetsToo) {
  ::setenv("CKPTCHECK_TEST_HDF5_CHILD_FAULT", "bad-offset", 1);
  auto r = open_hdf5(kKeras);
  ::unsetenv("CKPTCHECK_TEST_HDF5_CHILD_FAULT");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("outside the file"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find(kKeras + ": dataset '/"), std::string::npos) << r.status().to_string();
}

TEST(Hdf5Generic, ATruncatedFileIsAnErrorNotACrash) {
  TempDir tmp;
  auto bytes = testing::read_file_bytes(kKeras);
  for (size_t keep : {size_t{0}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    testing::write_file_bytes(tmp / "t.h5", std::vector<uint8_t>(bytes.begin(), bytes.begin() + keep));
    auto r = open_hdf5(tmp / "t.h5");
    if (r.is_ok()) {  // libhdf5 may still find every object when only unused tail bytes are gone
      for (size_t c = 0; c < (*r)->chunks().size(); ++c) (void)read_whole_chunk(**r, c);
    } else {
      EXPECT_NE(r.status().message().find(tmp / "t.h5"), std::string::npos) << r.status().to_string();
    }
  }
}

// Mutations of the Keras-like file, metadata included, reach the generic path's judgment of every
// chunk table; the test process must only ever see a Status.
TEST(Hdf5Generic, MutationsNeverCrash) {
  const auto valid = testing::read_file_bytes(kKeras);
  TempDir tmp;
  const std::string mutant = tmp / "m.h5";
  std::mt19937_64 rng(4242);
  IsolationLimits limits;
  limits.wall_seconds = 5;
  int opened = 0;
  const int n = std::min(fuzz_iterations(), built_with_address_sanitizer() ? 200 : 500);
  for (int i = 0; i < n; ++i) {
    testing::write_file_bytes(mutant, mutate(valid, rng));
    auto r = open_hdf5(mutant, limits);
    if (!r.is_ok()) continue;
    ++opened;
    for (size_t c = 0; c < (*r)->chunks().size(); ++c) {
      std::vector<uint8_t> buf((*r)->chunks()[c].data_bytes);
      EXPECT_TRUE((*r)->read_chunk(c, 0, buf.data(), buf.size()).is_ok());
    }
  }
  EXPECT_GT(opened, 0);
}

}  // namespace
}  // namespace ckpt
#endif  // CKPTCHECK_WITH_HDF5
