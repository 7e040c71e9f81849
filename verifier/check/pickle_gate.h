// The pickle gate: `verify` refuses a pickle that would run code when loaded. torch.load without
// weights_only=True imports and calls every global a pickle names (posix.system, builtins.exec, a
// class's constructor...). verify never imports or calls any of them (formats/pickle_reader.h); it
// fails the checkpoint for each global outside what the pickle's loader accepts: torch.load's
// weights-only allowlist (formats/pickle_globals.h torch_weights_only_allows), then the loader's
// trust profile, for classes used as data only (verifier/check/pickle_trust_profile.h), then what
// the user reviewed (`--allow-global MODULE.NAME`, `--allow-globals-from FILE`). Every global a
// profile or the user accepted is listed in the report (VerifyReport::accepted_globals). `inspect`
// lists the same globals for forensics and keeps exit 0.
//
// Error code (stable, like checkpoint_verifier.h's):
//   pickle_global_refused   a pickle names a global its loader does not accept (or uses a class
//                           of its profile other than as data) and no reviewed list names it
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "formats/pickle_globals.h"
#include "verifier/check/pickle_trust_profile.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

namespace verify_code {
constexpr const char* kPickleGlobalRefused = "pickle_global_refused";
}  // namespace verify_code

// Whether `full_name` ("module.qualname") is accepted for `loader` by name alone: torch.load's
// weights-only allowlist, or a class of the loader's profile (which check_pickle_globals accepts
// only where the pickle uses it as data).
bool pickle_loader_accepts(PickleLoader loader, const std::string& full_name);

// One pickle_global_refused error for every global in `globals` that neither the loader nor
// `allowed` (--allow-global, exact "module.name") accepts, naming `file`, the pickle inside it, the
// offset and what torch.load(weights_only=False) would do. `context` prefixes the message (a DCP
// item's label), `shard` and `tensor` go in the fields. What a profile or `allowed`
// accepted is added to report.accepted_globals.
void check_pickle_globals(const std::vector<PickleGlobal>& globals, PickleLoader loader,
                          const std::vector<std::string>& allowed, const std::string& file,
                          const std::string& shard, const std::string& tensor, VerifyReport& report);

// `--allow-globals-from FILE`: one MODULE.NAME per line; blank lines and `#` comments (whole-line
// or trailing) ignored. kIoError when FILE cannot be read, kInvalidArgument naming FILE and the
// line when a line is not one MODULE.NAME.
Result<std::vector<std::string>> read_allowed_globals_file(const std::string& path);
// Whether `name` is spelled as one MODULE.NAME (no wildcard, no blank, no leading or trailing dot).
bool is_global_name(const std::string& name);

}  // namespace ckpt
