// The pickle gate: `verify` refuses a pickle that would run code when loaded. torch.load without
// weights_only=True imports and calls every global a pickle names (posix.system, builtins.exec, a
// class's constructor...). verify never imports or calls any of them (formats/pickle_reader.h); it
// fails the checkpoint for each global outside what the pickle's loader accepts with weights_only
// (formats/pickle_globals.h torch_weights_only_allows) unless the user reviewed it
// (`--allow-global MODULE.NAME`). `inspect` lists the same globals for forensics and keeps exit 0.
//
// Error code (stable, like checkpoint_verifier.h's):
//   pickle_global_refused   a pickle names a global its loader's weights-only allowlist does not
//                           hold and --allow-global does not name
#pragma once

#include <string>
#include <vector>

#include "formats/pickle_globals.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

namespace verify_code {
constexpr const char* kPickleGlobalRefused = "pickle_global_refused";
}  // namespace verify_code

// Which program reads the pickle. torch.save files are read by torch.load. A DCP `.metadata` is read
// by DCP's own reader with a plain pickle.load, so besides torch.load's allowlist the dataclasses DCP
// (and Megatron-Core's MCoreMetadata) write there are expected; anything else in it is refused too.
enum class PickleLoader { kTorchLoad, kDcpMetadata };

// Whether `full_name` ("module.qualname") is accepted for `loader` without --allow-global.
bool pickle_loader_accepts(PickleLoader loader, const std::string& full_name);

// One pickle_global_refused error for every global in `globals` that neither the loader nor
// `allowed` (--allow-global, exact "module.name") accepts, naming `file`, the pickle inside it, the
// offset and what torch.load(weights_only=False) would do. `context` prefixes the message (a DCP
// item's label), `shard` and `tensor` go in the fields.
void check_pickle_globals(const std::vector<PickleGlobal>& globals, PickleLoader loader,
                          const std::vector<std::string>& allowed, const std::string& file,
                          const std::string& shard, const std::string& tensor, VerifyReport& report);

}  // namespace ckpt
