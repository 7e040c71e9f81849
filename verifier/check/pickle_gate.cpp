#include "verifier/check/pickle_gate.h"

#include <algorithm>
#include <sstream>

#include "base/file_io.h"
#include "base/text.h"

namespace ckpt {

namespace {

// builtins.getattr is how Python 3.11+ pickles an enum member (getattr(WriteItemType, 'SHARD')):
// accepted when every call looked up a member name (enum_member_name_ok) of an enum the loader's
// profile holds, and its result was never called nor passed where a loader calls it; refused
// otherwise (getattr(posix, 'system'), getattr(PosixPath, 'unlink'), getattr(WriteItemType,
// '__init__'), whose __globals__ reach builtins).
bool is_accepted_attribute_lookup(PickleLoader loader, const PickleGlobal& g) {
  if (g.name != "builtins.getattr" && g.name != "__builtin__.getattr") return false;
  if (g.other_calls != 0 || g.attribute_lookups.empty()) return false;
  for (const std::string& lookup : g.attribute_lookups) {
    const size_t dot = lookup.rfind('.');
    if (dot == std::string::npos) return false;
    const std::string enum_class = lookup.substr(0, dot);
    if (profile_shape(loader, enum_class) != PickleDataShape::kEnum) return false;
    if (!enum_member_name_ok(loader, enum_class, lookup.substr(dot + 1))) return false;
  }
  return true;
}

const char* shape_words(PickleDataShape shape) {
  switch (shape) {
    case PickleDataShape::kRecord: return "a record rebuilt from its fields (NEWOBJ(cls, ()) then BUILD)";
    case PickleDataShape::kEnum: return "an enum member (REDUCE(cls, (value,)) or getattr(cls, 'NAME'))";
    case PickleDataShape::kPath: return "a path rebuilt from its parts (REDUCE(cls, (str, ...)))";
    case PickleDataShape::kValue: return "a named value, never called";
    case PickleDataShape::kHelper: return "a helper its loader interprets";
    case PickleDataShape::kNumpyArray:
      return "numpy's pickling of an array (_reconstruct(ndarray, (0,), b'b'))";
  }
  return "data";
}

}  // namespace

bool pickle_loader_accepts(PickleLoader loader, const std::string& full_name) {
  const size_t dot = full_name.rfind('.');
  if (dot == std::string::npos) return false;
  if (torch_weights_only_allows(full_name.substr(0, dot), full_name.substr(dot + 1))) return true;
  return profile_shape(loader, full_name).has_value();
}

void check_pickle_globals(const std::vector<PickleGlobal>& globals, PickleLoader loader,
                          const std::vector<std::string>& allowed, const std::string& file,
                          const std::string& shard, const std::string& tensor, VerifyReport& report) {
  for (const PickleGlobal& g : globals) {
    const size_t dot = g.name.rfind('.');
    if (dot != std::string::npos && torch_weights_only_allows(g.name.substr(0, dot), g.name.substr(dot + 1)))
      continue;
    const std::string pickle = file + (g.pickle.empty() ? "" : ": " + g.pickle);
    const auto shape = profile_shape(loader, g.name);
    if ((shape && used_as(g, *shape)) || is_accepted_attribute_lookup(loader, g)) {
      report.add_accepted_global({g.name, pickle_profile_name(loader), pickle,
                                  pickle_uses_text(g.uses) + ", named " + std::to_string(g.count) + "x"});
      continue;
    }
    if (std::find(allowed.begin(), allowed.end(), g.name) != allowed.end()) {
      report.add_accepted_global({g.name, "reviewed (--allow-global)", pickle,
                                  pickle_uses_text(g.uses) + ", named " + std::to_string(g.count) + "x"});
      continue;
    }
    std::string outside;
    if (shape) {
      outside = std::string("is in the ") + pickle_profile_name(loader) + " profile only as " +
                shape_words(*shape) + ", but this pickle uses it otherwise (" + pickle_uses_text(g.uses) +
                ")";
    } else if (loader == PickleLoader::kTorchLoad) {
      outside = "is outside torch.load(weights_only=True)'s allowlist";
    } else {
      outside =
          std::string("is outside what its reader expects (torch.load's weights-only allowlist and the ") +
          pickle_profile_name(loader) + " profile)";
    }
    const std::string where = pickle + " @" + hex_offset(g.first_offset);
    report.add_error(verify_code::kPickleGlobalRefused, shard, tensor,
                     where + ": pickle global '" + g.name + "' (" + pickle_global_risk_name(g.risk) +
                         ", named " + std::to_string(g.count) + "x) " + outside +
                         "; torch.load(weights_only=False) would " + pickle_global_effect(g.name, g.risk) +
                         ". Nothing was imported or called; after reviewing it, pass --allow-global " +
                         g.name);
    report.errors.back().refused_global = {g.name, pickle_global_risk_name(g.risk), file, g.pickle,
                                           g.first_offset};
  }
}

bool is_global_name(const std::string& g) {
  return !g.empty() && g.find('.') != std::string::npos && g.front() != '.' && g.back() != '.' &&
         g.find_first_of(" \t\r\n*") == std::string::npos;
}

Result<std::vector<std::string>> read_allowed_globals_file(const std::string& path) {
  constexpr uint64_t kMaxListBytes = 1 << 20;  // a reviewed list, not a data file
  auto text = read_small_file(path, kMaxListBytes);
  if (!text.is_ok()) return Status::io_error("--allow-globals-from " + path + ": " + text.status().message());
  std::vector<std::string> out;
  std::istringstream lines(*text);
  std::string line;
  for (size_t line_no = 1; std::getline(lines, line); ++line_no) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    if (!is_global_name(line)) {
      return Status::invalid_argument("--allow-globals-from " + path + ":" + std::to_string(line_no) + ": '" +
                                      line + "' is not one MODULE.NAME (posix.system, argparse.Namespace)");
    }
    out.push_back(line);
  }
  return out;
}

}  // namespace ckpt
