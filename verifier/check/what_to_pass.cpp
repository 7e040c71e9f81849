#include "verifier/check/what_to_pass.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <vector>

#include "base/file_io.h"
#include "base/text.h"
#include "layouts/layout_registry.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"

namespace ckpt {

namespace {

// Bounds the scan of a huge folder: the hint needs a few names, not all of them.
constexpr size_t kMaxEntries = 4096;
constexpr size_t kNamesShown = 4;

std::vector<std::string> entries_of(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name[0] == '.') continue;
    names.push_back(name);
    if (names.size() >= kMaxEntries) break;
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The step a name carries ("step_6.pt", "step_00000006", "checkpoint-6", "iter_0000006"), or -1.
long long step_in_name(const std::string& name) {
  const size_t end = name.find_first_of('.') == std::string::npos ? name.size() : name.find_first_of('.');
  size_t begin = end;
  while (begin > 0 && name[begin - 1] >= '0' && name[begin - 1] <= '9') --begin;
  if (begin == end || end - begin > 18) return -1;
  return std::atoll(name.substr(begin, end - begin).c_str());
}

// The one layout that claims `path` as a checkpoint of its own (not found from above it: a root, a
// run folder), nullopt when none does or two do.
std::optional<LayoutMatch> checkpoint_itself(const std::string& path) {
  Result<std::optional<LayoutMatch>> match = detect_layout(path);
  if (!match.is_ok() || !*match || !(*match)->given.empty()) return std::nullopt;
  return std::move(*match);
}

// What one entry is, as the hint names it; "" when it is nothing verify reads.
std::string what_is(const std::string& path, std::string* detail) {
  const Result<std::optional<LayoutMatch>> match = detect_layout(path);
  if (!match.is_ok() || !*match) return "";  // nothing, or two layouts' (refused when passed)
  const LayoutMatch& m = **match;
  if (is_directory(path)) {
    if (m.kind == "sealed_directory") return "";  // only its seal says what it is
    if (m.kind != "ckptcheck") return m.kind;
    // A step dir without a manifest was never committed: nothing to pass.
    if (m.given.empty()) return path_exists(path + "/" + kManifestFileName) ? "checkpoint" : "";
    const CheckpointListing listing = list_checkpoints(path);
    if (listing.committed.empty()) return "";
    *detail = "latest " + base_name(listing.committed.back());
    return "checkpoint root";
  }
  if (!is_regular_file(path) || !m.given.empty()) return "";  // a root's `latest` is the root's
  return m.kind + " file";
}

// The checkpoints one level down `dir`, as what_to_pass_instead() describes them.
std::string checkpoints_below(const std::string& dir, const std::string& command) {
  // Kinds in order of first appearance, each with its entries (name, detail).
  std::vector<std::string> kinds;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> found;
  for (const std::string& name : entries_of(dir)) {
    std::string detail;
    const std::string what = what_is(dir + "/" + name, &detail);
    if (what.empty()) continue;
    if (!found.count(what)) kinds.push_back(what);
    found[what].emplace_back(name, detail);
  }
  if (kinds.empty()) return "";
  std::string out = "it holds, one level down: ";
  std::string example;
  long long example_step = -2;
  for (size_t k = 0; k < kinds.size(); ++k) {
    const auto& list = found[kinds[k]];
    out += k ? "; " : "";
    out += list.size() == 1 ? "a " + kinds[k] : std::to_string(list.size()) + " " + kinds[k] + "s";
    out += " (";
    for (size_t i = 0; i < list.size() && i < kNamesShown; ++i) {
      out += (i ? ", " : "") + list[i].first + (list[i].second.empty() ? "" : ", " + list[i].second);
    }
    if (list.size() > kNamesShown) out += ", ...";
    out += ")";
    // The example: the newest by the step in its name, else the first found.
    for (const auto& [name, detail] : list) {
      const long long step = step_in_name(name);
      if (example.empty() || step > example_step) {
        example = name;
        example_step = step;
      }
    }
  }
  const bool one = kinds.size() == 1 && found[kinds[0]].size() == 1;
  return out + ": pass " + (one ? "it" : "one of them") + ", e.g. `ckptcheck " + command + " " + dir + "/" +
         example + "`";
}

}  // namespace

std::string what_to_pass_instead(const std::string& raw_path, const std::string& command) {
  const std::string path = strip_trailing_slashes(raw_path);
  if (is_directory(path)) return checkpoints_below(path, command);
  if (!is_regular_file(path)) return "";
  const std::string dir = parent_dir(path);
  const Result<std::optional<LayoutMatch>> found = detect_layout(dir);
  if (!found.is_ok() || !*found) return "";
  const std::optional<LayoutMatch>& folder = *found;
  // Only its seal says what a sealed folder is; a root is no checkpoint of its own (its step is).
  if (folder->kind == "sealed_directory" || (folder->kind == "ckptcheck" && !folder->given.empty()))
    return "";
  // A manifest.json that does not parse makes no checkpoint of its directory.
  if (folder->kind == "ckptcheck" && !read_manifest_fields(dir).is_ok()) return "";
  return "it is a file of the " + folder->kind + " checkpoint " + dir + ": pass the directory, `ckptcheck " +
         command + " " + dir + "`";
}

Status with_what_to_pass(const std::string& path, const std::string& command, const Status& status) {
  const StatusCode code = status.code();
  if (code != StatusCode::kNotFound && code != StatusCode::kIoError && code != StatusCode::kNotSupported)
    return status;
  // A checkpoint directory whose own file failed (a DCP data file missing, a shard unreadable) was
  // the right thing to pass: its files are not what to pass instead.
  if (is_directory(path)) {
    const std::optional<LayoutMatch> folder = checkpoint_itself(strip_trailing_slashes(path));
    if (folder && (folder->kind == "dcp" || folder->kind == "megatron_torch_dist" ||
                   folder->kind == "ckptcheck" || folder->kind == "model_folder"))
      return status;
  }
  const std::string hint = what_to_pass_instead(path, command);
  if (hint.empty()) return status;
  const std::string message = status.message() + "; " + hint;
  if (code == StatusCode::kNotFound) return Status::not_found(message);
  return code == StatusCode::kIoError ? Status::io_error(message) : Status::not_supported(message);
}

}  // namespace ckpt
