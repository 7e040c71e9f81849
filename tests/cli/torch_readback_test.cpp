// Files written by torch itself, each beside what torch read back from it (<file>.torch.json: every
// tensor's name, dtype, shape and the SHA-256 of its bytes): inspect must list the same tensors, name
// by name, dtype by dtype and byte for byte; verify must pass them; damaged copies must be refused.
//  - tests/data/torch211: torch 2.11 + CUDA on an NVIDIA H200 (scripts/device/gpu_checks.sh): DCP from
//    DDP, FSDP2 and 2-rank FSDP2, every dtype in torch.save and safetensors, a Lightning 2.6
//    ModelCheckpoint file, an HF Trainer (transformers 5.17) checkpoint folder.
//  - tests/data/torch_readback: Debian's torch 1.13 (the same make_dtypes.py: complex64/128, views),
//    and v3_layout.pt, crafted to torch >= 2.1's _rebuild_tensor_v3 layout (make_torch_v3_fixture.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/byte_source.h"
#include "formats/zip_archive.h"
#include "tests/support/test_paths.h"
#include "tests/support/test_support.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;
namespace fs = std::filesystem;

const std::string kReadbackData = std::string(CKPTCHECK_SOURCE_DIR) + "/tests/data/";
// DCP 2.x records its checkpoint_id, a pathlib.PosixPath, in StorageMeta: verify's DCP trust profile
// (issue 42) accepts it, so the real DCPs below pass with no flag ("-").
// HF's Trainer pickles numpy's RNG state (an ndarray) into rng_state.pth; torch.load(weights_only=True)
// refuses those globals too, so the test names them as a user would after reviewing them.
const std::string kNumpyGlobals =
    "--allow-global numpy._core.multiarray._reconstruct --allow-global numpy.ndarray --allow-global "
    "numpy.dtype";

struct Case {
  std::string path;             // under tests/data/
  std::string torch_json;       // under tests/data/: what torch read back
  std::string member;           // for a folder's record: the file's key in "files"
  std::string verify_args;      // empty: verify is not run on this one (see kNotVerified)
  std::set<std::string> extra;  // tensors we list that torch.load's tensors do not (numpy arrays)
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"torch211/dcp_ddp", "torch211/dcp_ddp.torch.json", "", "-", {}},
      {"torch211/dcp_fsdp2", "torch211/dcp_fsdp2.torch.json", "", "-", {}},
      {"torch211/dcp_fsdp2_2rank", "torch211/dcp_fsdp2_2rank.torch.json", "", "-", {}},
      {"torch211/dtypes.pt", "torch211/dtypes.pt.torch.json", "", "--weights-only", {}},
      {"torch211/dtypes.safetensors", "torch211/dtypes.safetensors.torch.json", "", "--weights-only", {}},
      // Its ModelCheckpoint state holds kth_value = inf (Lightning's top-k sentinel): verify passes it.
      {"torch211/lightning.ckpt", "torch211/lightning.ckpt.torch.json", "", "-", {}},
      {"torch211/hf_checkpoint-2/model.safetensors",
       "torch211/hf_checkpoint-2.torch.json",
       "model.safetensors",
       "--weights-only",
       {}},
      {"torch211/hf_checkpoint-2/optimizer.pt",
       "torch211/hf_checkpoint-2.torch.json",
       "optimizer.pt",
       "-",
       {}},
      {"torch211/hf_checkpoint-2/rng_state.pth",
       "torch211/hf_checkpoint-2.torch.json",
       "rng_state.pth",
       "--weights-only " + kNumpyGlobals,
       {"numpy.1"}},
      {"torch211/hf_checkpoint-2/scheduler.pt",
       "torch211/hf_checkpoint-2.torch.json",
       "scheduler.pt",
       "",
       {}},
      {"torch_readback/torch113_dtypes.pt",
       "torch_readback/torch113_dtypes.pt.torch.json",
       "",
       "--weights-only",
       {}},
      {"torch_readback/v3_layout.pt", "torch_readback/v3_layout.pt.torch.json", "", "--weights-only", {}},
  };
  return all;
}

nlohmann::json parse(const CommandResult& r) {
  auto j = nlohmann::json::parse(r.output, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.output;
  return j;
}

class TorchReadbackTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(CKPTCHECK_BIN, X_OK), 0) << CKPTCHECK_BIN << " is not built (make build)";
  }
  nlohmann::json torch_tensors() const {
    const nlohmann::json record = read_json_file(kReadbackData + GetParam().torch_json);
    return GetParam().member.empty() ? record.at("tensors")
                                     : record.at("files").at(GetParam().member).at("tensors");
  }
};

TEST_P(TorchReadbackTest, InspectListsWhatTorchReadByteForByte) {
  const Case& c = GetParam();
  const auto r = run_ckptcheck("inspect --json '" + kReadbackData + c.path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = parse(r);
  std::map<std::string, nlohmann::json> ours;
  for (const auto& t : report.at("tensors")) ours[t.at("name").get<std::string>()] = t;
  std::set<std::string> torch_names;
  for (const auto& want : torch_tensors()) {
    const std::string name = want.at("name");
    torch_names.insert(name);
    ASSERT_TRUE(ours.count(name)) << c.path << ": torch read '" << name << "', inspect does not list it";
    const auto& got = ours[name];
    EXPECT_EQ(got.at("dtype"), want.at("dtype")) << c.path << ": " << name;
    EXPECT_EQ(got.at("shape"), want.at("shape")) << c.path << ": " << name;
    if (want.contains("chunks") && want.at("chunks").size() > 1) {  // DCP sharded over ranks: chunk by chunk
      ASSERT_EQ(got.at("chunks").size(), want.at("chunks").size()) << c.path << ": " << name;
      for (size_t k = 0; k < want.at("chunks").size(); ++k)
        EXPECT_EQ(got.at("chunks")[k].at("sha256"), want.at("chunks")[k].at("sha256"))
            << c.path << ": " << name;
    } else {
      EXPECT_EQ(got.value("sha256", ""), want.at("sha256")) << c.path << ": " << name;
    }
  }
  for (const auto& [name, t] : ours)
    EXPECT_TRUE(torch_names.count(name) || c.extra.count(name))
        << c.path << ": inspect lists '" << name << "'";
}

TEST_P(TorchReadbackTest, VerifyPassesIt) {
  const Case& c = GetParam();
  if (c.verify_args.empty()) return;  // see the case's comment; inspect above still reads it exactly
  const std::string args = c.verify_args == "-" ? "" : c.verify_args + " ";
  const auto r = run_ckptcheck("verify " + args + "'" + kReadbackData + c.path + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("PASS ", 0), 0u) << r.output;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return gtest_param_name(info.param.path);
}

INSTANTIATE_TEST_SUITE_P(Files, TorchReadbackTest, ::testing::ValuesIn(cases()), case_name);

// A copy of `from` (a file or a folder) in `dir`; returns its path.
std::string copy_into(const TempDir& dir, const std::string& from) {
  const std::string to = dir / fs::path(from).filename().string();
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

void flip_byte(const std::string& path, uint64_t offset) {
  auto bytes = read_file_bytes(path);
  ASSERT_LT(offset, bytes.size()) << path;
  bytes[offset] ^= 0x40;
  write_file_bytes(path, bytes);
}

void truncate_to(const std::string& path, uint64_t size) {
  auto bytes = read_file_bytes(path);
  bytes.resize(size);
  write_file_bytes(path, bytes);
}

TEST(TorchReadbackDamage, FlippedStorageByteInTorch211ZipsFailsItsCrc) {
  for (const std::string file :
       {"torch211/dtypes.pt", "torch211/lightning.ckpt", "torch211/hf_checkpoint-2/optimizer.pt"}) {
    TempDir dir;
    const std::string copy = copy_into(dir, kReadbackData + file);
    uint64_t at = 0;
    {
      auto source = FileByteSource::open(copy);
      ASSERT_TRUE(source.is_ok()) << copy;
      auto zip = ZipArchive::open(**source);
      ASSERT_TRUE(zip.is_ok()) << copy;
      for (const auto& e : zip->entries()) {
        if (e.name.find("/data/") != std::string::npos && e.size > 0) {
          at = e.data_offset + e.size / 2;
          break;
        }
      }
    }
    ASSERT_GT(at, 0u) << copy << ": no storage entry";
    flip_byte(copy, at);
    const auto r = run_ckptcheck("verify --weights-only '" + copy + "'");
    EXPECT_EQ(r.exit_code, 1) << file << ": " << r.output;
    EXPECT_NE(r.output.find("FAIL "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("CRC"), std::string::npos) << file << ": " << r.output;
  }
}

TEST(TorchReadbackDamage, TruncatedTorch211SafetensorsAndDcpAreRefused) {
  {
    TempDir dir;
    const std::string copy = copy_into(dir, kReadbackData + "torch211/dtypes.safetensors");
    truncate_to(copy, fs::file_size(copy) - 7);
    const auto r = run_ckptcheck("verify --weights-only '" + copy + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("FAIL "), std::string::npos) << r.output;
  }
  {
    TempDir dir;
    const std::string copy = copy_into(dir, kReadbackData + "torch211/dcp_fsdp2_2rank");
    truncate_to(copy + "/__1_0.distcp", fs::file_size(copy + "/__1_0.distcp") / 2);
    const auto r = run_ckptcheck("verify '" + copy + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("__1_0.distcp"), std::string::npos) << r.output;
  }
  {  // a rank's file gone: its half of every sharded tensor is missing
    TempDir dir;
    const std::string copy = copy_into(dir, kReadbackData + "torch211/dcp_fsdp2_2rank");
    fs::remove(copy + "/__0_0.distcp");
    const auto r = run_ckptcheck("verify '" + copy + "'");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("__0_0.distcp"), std::string::npos) << r.output;
  }
}

TEST(TorchReadbackDamage, DcpStorageMetaPathIsAcceptedByTheDcpProfileOnly) {
  // The same PosixPath global the DCP profile accepts in .metadata is refused in a plain torch.save
  // pickle (tests/data/torch211's DCPs pass with no flag: VerifyPassesIt above).
  const auto r = run_ckptcheck("verify --json '" + kReadbackData + "torch211/dcp_fsdp2'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pathlib.PosixPath"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ckpt
