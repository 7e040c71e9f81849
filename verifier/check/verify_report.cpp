#include "verifier/check/verify_report.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "base/byte_units.h"
#include "base/sha256_blocks.h"
#include "base/text.h"

namespace ckpt {

namespace {

bool contains_code(const std::vector<VerifyIssue>& issues, const std::string& code) {
  for (const auto& i : issues) {
    if (i.code == code) return true;
  }
  return false;
}

nlohmann::json issues_to_json(const std::vector<VerifyIssue>& issues) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& i : issues) {
    list.push_back({{"code", i.code}, {"shard", i.shard}, {"tensor", i.tensor}, {"message", i.message}});
  }
  return list;
}

// "[code] shard tensor: message", without repeating the shard when the message starts with it
// ("x.pt: x.pt: ..." read as two files).
// "[code] shard tensor: message". Where the message itself begins with the file (the shard, or a
// path ending in it) and names no tensor, the shard is not written twice: "[code] path: message".
std::string issue_line(const char* prefix, const VerifyIssue& i) {
  std::string line = std::string(prefix) + "[" + i.code + "]";
  if (i.shard.empty() && i.tensor.empty()) return line + " " + i.message + "\n";
  const size_t colon = i.message.find(": ");
  const std::string head = colon == std::string::npos ? std::string() : i.message.substr(0, colon);
  const bool names_the_shard =
      !i.shard.empty() && i.tensor.empty() && (head == i.shard || ends_with(head, "/" + i.shard));
  if (names_the_shard) return line + " " + i.message + "\n";
  if (!i.shard.empty()) line += " " + i.shard;
  if (!i.tensor.empty()) line += " " + i.tensor;
  return line + ": " + i.message + "\n";
}

// The refused globals of one file's pickle, from `first` on (consecutive findings, as the gate adds
// them), as one line: "[pickle_global_refused] shard: FILE: ROLE: PICKLE @0x2 names 3 globals the
// loader refuses: 'a.b' (dangerous, @0x2), ...; what to do". Returns how many findings it took.
size_t refused_globals_line(const VerifyReport& r, size_t first, std::string& text) {
  const VerifyIssue& head = r.errors[first];
  const RefusedGlobal& g0 = head.refused_global;
  size_t end = first + 1;
  while (end < r.errors.size() && r.errors[end].code == head.code && r.errors[end].shard == head.shard &&
         r.errors[end].tensor == head.tensor && !r.errors[end].refused_global.name.empty() &&
         r.errors[end].refused_global.file == g0.file && r.errors[end].refused_global.pickle == g0.pickle)
    ++end;
  if (end - first == 1) {  // one global: its full sentence says it best
    text += issue_line("", head);
    return 1;
  }
  // Listed by risk, the worst first; each global's offset and effect are in its own finding (--json).
  constexpr size_t kListed = 12;
  std::map<std::string, std::vector<std::string>> by_risk;
  for (size_t k = first; k < end; ++k)
    by_risk[r.errors[k].refused_global.risk].push_back(r.errors[k].refused_global.name);
  std::string globals;
  size_t listed = 0;
  for (const char* risk : {"dangerous", "executes"}) {
    const auto it = by_risk.find(risk);
    if (it == by_risk.end()) continue;
    std::string names;
    for (const std::string& n : it->second) {
      if (listed++ < kListed) names += (names.empty() ? "'" : ", '") + n + "'";
    }
    if (!names.empty()) globals += (globals.empty() ? "" : "; ") + it->first + ": " + names;
    by_risk.erase(it);
  }
  for (const auto& [risk, list] : by_risk) {
    std::string names;
    for (const std::string& n : list) {
      if (listed++ < kListed) names += (names.empty() ? "'" : ", '") + n + "'";
    }
    if (!names.empty()) globals += (globals.empty() ? "" : "; ") + risk + ": " + names;
  }
  if (listed > kListed) globals += " and " + std::to_string(listed - kListed) + " more";
  const auto role = r.file_roles.find(head.shard);
  const std::string pickle = g0.file + (g0.pickle.empty() ? "" : ": " + g0.pickle);
  const std::string line =
      "[" + head.code + "]" + (head.shard.empty() ? "" : " " + head.shard) +
      (head.tensor.empty() ? "" : " " + head.tensor) + ": " +
      (role != r.file_roles.end() ? role->second + ": " : "") + pickle + " @" + hex_offset(g0.offset) +
      " names " + std::to_string(end - first) + " globals its loader refuses (" + globals +
      "), which torch.load(weights_only=False) would import and call; nothing was imported or called. "
      "Do not load it unless you trust its writer; after reviewing them, pass each with --allow-global "
      "NAME (or list them for --allow-globals-from). --json has one finding per global";
  text += line + "\n";
  return end - first;
}

// "1 shard", "2 shards".
std::string count_of(size_t n, const char* one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

}  // namespace

void VerifyReport::add_error(std::string code, std::string shard, std::string tensor, std::string message) {
  errors.push_back({std::move(code), std::move(shard), std::move(tensor), std::move(message)});
}

void VerifyReport::add_warning(std::string code, std::string shard, std::string tensor, std::string message) {
  warnings.push_back({std::move(code), std::move(shard), std::move(tensor), std::move(message)});
}

bool VerifyReport::has_error(const std::string& code) const {
  return contains_code(errors, code);
}
bool VerifyReport::has_warning(const std::string& code) const {
  return contains_code(warnings, code);
}

bool RootVerifyReport::ok() const {
  for (const auto& c : checkpoints) {
    if (!c.ok()) return false;
  }
  return true;
}

void merge_report(VerifyReport&& from, VerifyReport& into) {
  for (auto& e : from.errors) into.errors.push_back(std::move(e));
  for (auto& w : from.warnings) into.warnings.push_back(std::move(w));
  for (auto& a : from.accepted_globals) into.add_accepted_global(std::move(a));
  for (auto& [shard, role] : from.file_roles) into.file_roles.emplace(shard, std::move(role));
  into.bytes_hashed += from.bytes_hashed;
}

void VerifyReport::add_accepted_global(AcceptedGlobal accepted) {
  for (const auto& a : accepted_globals) {
    if (a.name == accepted.name && a.by == accepted.by && a.pickle == accepted.pickle) return;
  }
  accepted_globals.push_back(std::move(accepted));
}

static nlohmann::json accepted_to_json(const std::vector<AcceptedGlobal>& accepted) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : accepted)
    out.push_back({{"global", a.name}, {"by", a.by}, {"pickle", a.pickle}, {"use", a.use}});
  return out;
}

std::string describe_resume_state(const std::vector<ResumeStateFound>& found) {
  std::string out;
  for (const ResumeStateFound& f : found) {
    out += (out.empty() ? "" : ", ") + f.part + " at " +
           (f.where.empty() ? "the top level" : "'" + f.where + "'");
  }
  return out;
}

nlohmann::json report_to_json(const VerifyReport& r) {
  nlohmann::json resume_state = nlohmann::json::array();
  for (const auto& f : r.resume_state) resume_state.push_back({{"part", f.part}, {"where", f.where}});
  return {{"ok", r.ok()},
          {"path", r.path},
          {"kind", r.kind},
          {"sealed", r.sealed},
          {"step", r.step >= 0 ? nlohmann::json(r.step) : nlohmann::json()},  // null: no step found
          {"errors", issues_to_json(r.errors)},
          {"warnings", issues_to_json(r.warnings)},
          {"uncommitted", r.uncommitted},
          {"accepted_globals", accepted_to_json(r.accepted_globals)},
          {"resume_state", resume_state},
          {"shards", r.shards},
          {"tensors", r.tensors},
          {"bytes_hashed", r.bytes_hashed},
          // The SHA-256 code that produced every digest checked (base/sha256_blocks.h): it is on the
          // trust path, so a report says which one ran.
          {"sha256_kernel", active_sha256_kernel_description()},
          {"seconds", r.seconds}};
}

nlohmann::json report_to_json(const RootVerifyReport& r) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : r.checkpoints) list.push_back(report_to_json(c));
  return {{"ok", r.ok()}, {"path", r.root}, {"checkpoints", list}, {"uncommitted", r.uncommitted}};
}

namespace {

// The globals a profile accepted, one line per pickle and profile (a real folder's RNG files and
// ZeRO states name three each, per rank): the pickle, the profile, then each global and its use.
std::string accepted_globals_lines(const std::vector<AcceptedGlobal>& accepted) {
  std::vector<std::pair<std::string, std::vector<const AcceptedGlobal*>>> groups;  // first-seen order
  for (const AcceptedGlobal& a : accepted) {
    const std::string key = a.pickle + '\n' + a.by;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back(&a);
  }
  std::string text;
  for (const auto& [key, members] : groups) {
    const AcceptedGlobal& first = *members.front();
    if (members.size() == 1) {
      text += "accepted: pickle global " + first.name + " (" + first.by + "; " + first.use + ") in " +
              first.pickle + "\n";
      continue;
    }
    text += "accepted: " + std::to_string(members.size()) + " pickle globals (" + first.by + ") in " +
            first.pickle + ": ";
    for (size_t i = 0; i < members.size(); ++i)
      text += (i ? ", " : "") + members[i]->name + " (" + members[i]->use + ")";
    text += "\n";
  }
  return text;
}

}  // namespace

std::string report_to_text(const VerifyReport& r) {
  // A sealed foreign checkpoint has no step of ours to report.
  const std::string step = r.step >= 0 ? "step " + std::to_string(r.step) + ", " : "";
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.2f s", r.seconds);
  const std::string summary =
      ": " + step + count_of(r.shards, "shard") + ", " + count_of(r.tensors, "tensor") + ", " +
      byte_size_text(static_cast<double>(r.bytes_hashed)) + " hashed in " + seconds + ", " +
      count_of(r.errors.size(), "error") + ", " + count_of(r.warnings.size(), "warning") + "\n";
  std::string text = std::string(r.ok() ? "PASS " : "FAIL ") + r.path + summary;
  if (!r.resume_state.empty()) text += "resume state: " + describe_resume_state(r.resume_state) + "\n";
  for (size_t k = 0; k < r.errors.size();) {
    if (!r.errors[k].refused_global.name.empty()) {
      k += refused_globals_line(r, k, text);
      continue;
    }
    text += issue_line("", r.errors[k++]);
  }
  for (const auto& w : r.warnings) text += issue_line("warning: ", w);
  for (const auto& u : r.uncommitted) text += "uncommitted: " + u + "\n";
  text += accepted_globals_lines(r.accepted_globals);
  return text;
}

std::string report_to_text(const RootVerifyReport& r) {
  size_t failed = 0;
  for (const auto& c : r.checkpoints) failed += c.ok() ? 0 : 1;
  std::string text = std::string(r.ok() ? "PASS " : "FAIL ") + r.root + ": " +
                     std::to_string(r.checkpoints.size()) + " committed checkpoints, " +
                     std::to_string(failed) + " failed, " + std::to_string(r.uncommitted.size()) +
                     " uncommitted\n";
  for (const auto& c : r.checkpoints) text += report_to_text(c);
  for (const auto& u : r.uncommitted) text += "uncommitted: " + u + "\n";
  return text;
}

}  // namespace ckpt
