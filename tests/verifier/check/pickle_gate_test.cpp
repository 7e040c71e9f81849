// The pickle gate's rule, torch-free: which globals torch.load(weights_only=True) accepts, and that
// DCP metadata's getattr is accepted only as an attribute lookup on DCP's own classes.
#include "verifier/check/pickle_gate.h"

#include <gtest/gtest.h>

#include "formats/pickle_reader.h"
#include "tests/support/pickle_ops.h"

namespace ckpt {
namespace {

using namespace ckpt::pk;

TEST(PickleGate, WeightsOnlyAllowlistIsPyTorchs) {
  // Accepted by PyTorch 1.13 or 2.x (torch/_weights_only_unpickler.py).
  for (const char* name :
       {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor",
        "torch._utils._rebuild_parameter", "torch.FloatStorage", "torch.cuda.HalfStorage",
        "torch.storage.UntypedStorage", "torch.Size", "torch.bfloat16", "torch.device",
        "torch.nn.parameter.Parameter", "torch._tensor._rebuild_from_type_v2", "_codecs.encode",
        "__builtin__.set", "builtins.complex", "torch.LongTensor", "torch.sparse.FloatTensor"}) {
    EXPECT_TRUE(pickle_loader_accepts(PickleLoader::kTorchLoad, name)) << name;
  }
  // Refused by both: code, constructors of other classes, numpy (PyTorch refuses it unless added).
  for (const char* name : {"posix.system", "builtins.eval", "__builtin__.getattr", "builtins.getattr",
                           "argparse.Namespace", "numpy.core.multiarray._reconstruct", "numpy.dtype",
                           "copyreg._reconstructor", "torch.load", "torch.FloatStorageX", "torch.Evil",
                           "collections.defaultdict", "torch.distributed.checkpoint.metadata.Metadata"}) {
    EXPECT_FALSE(pickle_loader_accepts(PickleLoader::kTorchLoad, name)) << name;
  }
  EXPECT_TRUE(
      pickle_loader_accepts(PickleLoader::kDcpMetadata, "torch.distributed.checkpoint.metadata.Metadata"));
  EXPECT_FALSE(pickle_loader_accepts(PickleLoader::kDcpMetadata, "torch.distributed.checkpoint.metadata.os"));
}

// A .metadata-like pickle: {'m': getattr(<module.Class>, 'NAME')}.
std::vector<PickleGlobal> globals_of_getattr(const std::string& module, const std::string& cls,
                                             const std::string& attribute) {
  const std::string p = proto() + empty_dict() + mark() + str("m") + global("builtins", "getattr") + mark() +
                        global(module, cls) + str(attribute) + tuple() + reduce() + setitems() + stop();
  auto r = read_tensor_pickle(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "test.metadata");
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? r->globals : std::vector<PickleGlobal>{};
}

size_t refused(const std::vector<PickleGlobal>& globals, PickleLoader loader) {
  VerifyReport report;
  check_pickle_globals(globals, loader, {}, "x/.metadata", ".metadata", "", report);
  return report.errors.size();
}

TEST(PickleGate, DcpGetattrIsAcceptedOnlyAsALookupOnDcpClasses) {
  // How Python 3.11+ pickles TensorProperties' memory format enum member.
  const auto enum_member = globals_of_getattr("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING",
                                              "TORCH_CONTIGUOUS_FORMAT");
  EXPECT_EQ(refused(enum_member, PickleLoader::kDcpMetadata), 0u);
  EXPECT_EQ(refused(enum_member, PickleLoader::kTorchLoad), 2u) << "torch.load refuses both";
  // getattr(posix, 'system'): the lookup of a code-running attribute is refused with its class.
  const auto system = globals_of_getattr("posix", "system", "__call__");
  EXPECT_EQ(refused(system, PickleLoader::kDcpMetadata), 2u);
  // getattr on an accepted class but called some other way: refused.
  const std::string p =
      proto() + global("builtins", "getattr") + mark() + str("a") + str("b") + tuple() + reduce() + stop();
  auto r = read_tensor_pickle(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "t");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(refused(r->globals, PickleLoader::kDcpMetadata), 1u);
}

TEST(PickleGate, AllowedGlobalsAreExactAndTheMessageNamesWhereAndWhat) {
  PickleGlobal g;
  g.name = "posix.system";
  g.risk = PickleGlobalRisk::kDangerous;
  g.first_offset = 0x2a;
  g.count = 1;
  g.pickle = "archive/data.pkl";
  VerifyReport report;
  check_pickle_globals({g}, PickleLoader::kTorchLoad, {"os.system"}, "m.pt", "m.pt", "", report);
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].code, verify_code::kPickleGlobalRefused);
  const std::string& m = report.errors[0].message;
  EXPECT_EQ(m.rfind("m.pt: archive/data.pkl @0x2a: pickle global 'posix.system'", 0), 0u) << m;
  EXPECT_NE(m.find("would import posix and call system"), std::string::npos) << m;
  VerifyReport allowed;
  check_pickle_globals({g}, PickleLoader::kTorchLoad, {"posix.system"}, "m.pt", "m.pt", "", allowed);
  EXPECT_TRUE(allowed.errors.empty());
}

}  // namespace
}  // namespace ckpt
