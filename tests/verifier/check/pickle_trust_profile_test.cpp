// Trust profiles (verifier/check/pickle_trust_profile.h) over pickles built opcode by opcode: a
// class of a kind's profile is accepted where the pickle uses it as data (a dataclass rebuilt from
// its fields, an enum member, a path from its parts), refused when the same global is called any
// other way or named in a pickle of another kind, and every acceptance is named in the report.
#include "verifier/check/pickle_trust_profile.h"

#include <gtest/gtest.h>

#include "formats/pickle_reader.h"
#include "tests/support/pickle_ops.h"
#include "verifier/check/pickle_gate.h"

namespace ckpt {
namespace {

using namespace ckpt::pk;

constexpr const char* kPlanner = "torch.distributed.checkpoint.planner";

std::vector<PickleGlobal> globals_of(const std::string& body) {
  const std::string p = proto() + body + stop();
  auto r = read_tensor_pickle(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "t.metadata");
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? r->globals : std::vector<PickleGlobal>{};
}

VerifyReport gate(const std::vector<PickleGlobal>& globals, PickleLoader loader) {
  VerifyReport report;
  check_pickle_globals(globals, loader, {}, "ckpt/.metadata", ".metadata", "", report);
  return report;
}

// WriteItem(index=..., type=WriteItemType(2)) as Python <= 3.10 pickles it: NEWOBJ + BUILD of the
// field dict, the enum member REDUCE'd by value.
std::string write_item() {
  return global(kPlanner, "WriteItem") + empty_tuple() + newobj() + empty_dict() + mark() + str("type") +
         global(kPlanner, "WriteItemType") + int1(2) + "\x85" + reduce() + str("tensor_data") + "N" +
         setitems() + build();
}

TEST(PickleTrustProfile, ReaderRecordsHowEachGlobalIsUsed) {
  const auto globals = globals_of(write_item());
  ASSERT_EQ(globals.size(), 2u);
  EXPECT_EQ(globals[0].uses, kPickleUseConstructed);
  EXPECT_EQ(globals[1].uses, kPickleUseCalledWithScalar);
  const auto path =
      globals_of(global("pathlib", "PosixPath") + mark() + str("/") + str("ckpt") + tuple() + reduce());
  EXPECT_EQ(path[0].uses, kPickleUseCalledWithStrings);
  const auto called = globals_of(global(kPlanner, "WriteItem") + empty_list() + "\x85" + reduce());
  EXPECT_EQ(called[0].uses, kPickleUseOtherCall);
  EXPECT_EQ(called[0].other_calls, 1u);
}

TEST(PickleTrustProfile, DcpClassesUsedAsDataAreAcceptedAndNamed) {
  const VerifyReport r = gate(globals_of(write_item()), PickleLoader::kDcpMetadata);
  EXPECT_TRUE(r.errors.empty()) << r.errors[0].message;
  ASSERT_EQ(r.accepted_globals.size(), 2u);
  EXPECT_EQ(r.accepted_globals[0].name, "torch.distributed.checkpoint.planner.WriteItem");
  EXPECT_EQ(r.accepted_globals[0].by, "DCP metadata");
  EXPECT_NE(r.accepted_globals[0].use.find("rebuilt from its fields"), std::string::npos);
  // StorageMeta.checkpoint_id: a PosixPath rebuilt from its parts.
  const auto path =
      globals_of(global("pathlib", "PosixPath") + mark() + str("/") + str("ckpt") + tuple() + reduce());
  EXPECT_TRUE(gate(path, PickleLoader::kDcpMetadata).errors.empty());
}

TEST(PickleTrustProfile, TheSameGlobalUsedAnyOtherWayIsRefused) {
  // A dataclass called with a list, not rebuilt from fields.
  VerifyReport r = gate(globals_of(global(kPlanner, "WriteItem") + empty_list() + "\x85" + reduce()),
                        PickleLoader::kDcpMetadata);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("'torch.distributed.checkpoint.planner.WriteItem'"), std::string::npos);
  EXPECT_NE(r.errors[0].message.find("only as a record rebuilt from its fields"), std::string::npos)
      << r.errors[0].message;
  // A path built from something other than strings.
  r = gate(globals_of(global("pathlib", "PosixPath") + empty_list() + "\x85" + reduce()),
           PickleLoader::kDcpMetadata);
  EXPECT_EQ(r.errors.size(), 1u);
  // getattr(pathlib.PosixPath, 'unlink') then called on a path: neither the lookup nor the class is data.
  const std::string unlink = global("builtins", "getattr") + mark() + global("pathlib", "PosixPath") +
                             str("unlink") + tuple() + reduce() + mark() + str("/etc/passwd") + tuple() +
                             reduce();
  r = gate(globals_of(unlink), PickleLoader::kDcpMetadata);
  EXPECT_EQ(r.errors.size(), 2u);
  // An enum member by name whose result is then called.
  const std::string enum_call = global("builtins", "getattr") + mark() + global(kPlanner, "WriteItemType") +
                                str("TENSOR") + tuple() + reduce() + mark() + str("x") + tuple() + reduce();
  r = gate(globals_of(enum_call), PickleLoader::kDcpMetadata);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("'builtins.getattr'"), std::string::npos);
}

TEST(PickleTrustProfile, AProfileHoldsOnlyForItsOwnKind) {
  const auto plan = globals_of(global("megatron.core.dist_checkpointing.strategies.torch", "MCoreSavePlan") +
                               empty_tuple() + newobj() + empty_dict() + build());
  EXPECT_TRUE(gate(plan, PickleLoader::kMegatronMetadata).errors.empty());
  EXPECT_EQ(gate(plan, PickleLoader::kDcpMetadata).errors.size(), 1u) << "a plain DCP checkpoint";
  EXPECT_EQ(gate(plan, PickleLoader::kTorchLoad).errors.size(), 1u);
  const auto ns =
      globals_of(global("argparse", "Namespace") + empty_tuple() + newobj() + empty_dict() + build());
  EXPECT_TRUE(gate(ns, PickleLoader::kMegatronCommon).errors.empty());
  EXPECT_EQ(gate(ns, PickleLoader::kTorchLoad).errors.size(), 1u) << "a torch.save file";
  EXPECT_EQ(gate(globals_of(write_item()), PickleLoader::kTorchLoad).errors.size(), 2u);
  // TorchScript: the archive's own __torch__ classes, rebuilt from their state, and nothing else.
  const auto scripted =
      globals_of(global("__torch__", "Tiny") + empty_tuple() + newobj() + empty_dict() + build());
  EXPECT_TRUE(gate(scripted, PickleLoader::kTorchScript).errors.empty());
  EXPECT_EQ(gate(scripted, PickleLoader::kTorchLoad).errors.size(), 1u);
  const auto system = globals_of(global("posix", "system") + mark() + str("id") + tuple() + reduce());
  EXPECT_EQ(gate(system, PickleLoader::kTorchScript).errors.size(), 1u);
  const auto scripted_call =
      globals_of(global("__torch__", "Tiny") + mark() + str("id") + empty_list() + tuple() + reduce());
  EXPECT_EQ(gate(scripted_call, PickleLoader::kTorchScript).errors.size(), 1u);
}

}  // namespace
}  // namespace ckpt
