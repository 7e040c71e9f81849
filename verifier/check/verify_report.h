// What `verify` found in one checkpoint (or, with --all, in every checkpoint of a root), and how it
// is printed: a human summary whose first line is the verdict, or one JSON object for machines.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ckpt {

// A refused pickle global, as data (the message says the same in words): what lets the text report
// group a file's refused globals into one line without reading messages back.
struct RefusedGlobal {
  std::string name;     // "posix.system"
  std::string risk;     // "dangerous" | "executes" | ...
  std::string file;     // the file's path
  std::string pickle;   // the pickle inside it ("archive/data.pkl"), empty for a file that is one
  uint64_t offset = 0;  // of the first opcode naming it, in that pickle
};

// One finding. `code` is a stable identifier from checkpoint_verifier.h (scripts match on it);
// `shard` and `tensor` are empty when the finding is about neither.
struct VerifyIssue {
  std::string code;
  std::string shard;
  std::string tensor;
  std::string message;
  RefusedGlobal refused_global = {};  // set (name not empty) on pickle_global_refused findings
};

// A pickle global the gate accepted beyond torch.load's weights-only allowlist: by a kind's trust
// profile, where the pickle used it as data (verifier/check/pickle_trust_profile.h), or because the
// user reviewed it (--allow-global, --allow-globals-from).
struct AcceptedGlobal {
  std::string name;    // "torch.distributed.checkpoint.planner.WriteItem"
  std::string by;      // the profile's name, or "reviewed (--allow-global)"
  std::string pickle;  // the file and the pickle inside it
  std::string use;     // "rebuilt from its fields 4x"
};

// One piece of training state a resume needs, recognised in a foreign checkpoint by its structure
// (verifier/check/resume_state.h).
struct ResumeStateFound {
  std::string part;   // optimizer | scheduler | scaler | rng | step | incomplete_optimizer
  std::string where;  // its dotted path ("opt", "rng.torch"), after "FILE: " in a folder; "" = the whole file
};

struct VerifyReport {
  std::string path;
  // What was verified ("ckptcheck", "dcp", "torch_save", ...: verifier/check/checkpoint_kind.h) and
  // whether a seal covered it; empty for a report of a path that names no checkpoint.
  std::string kind;
  bool sealed = false;
  int64_t step = -1;  // -1 when none was found (null in --json)
  std::vector<VerifyIssue> errors;
  std::vector<VerifyIssue> warnings;
  std::vector<std::string> uncommitted;  // temp dirs and manifest-less step dirs next to the checkpoint
  std::vector<AcceptedGlobal> accepted_globals;  // `--json`: "accepted_globals"
  // Foreign checkpoints: the resume state found, wherever it sits (empty for ckptcheck's own, whose
  // manifest names every component, and with --weights-only).
  std::vector<ResumeStateFound> resume_state;
  // What each file (by shard name) is, in its checkpoint's words ("optimizer state, loaded on
  // resume"), where a layout knows it: the text report names it on the file's grouped refusal line.
  std::map<std::string, std::string> file_roles;
  size_t shards = 0;
  size_t tensors = 0;
  uint64_t bytes_hashed = 0;
  double seconds = 0;

  // Invariant: a checkpoint passes iff no check reported an error; warnings never fail it.
  bool ok() const { return errors.empty(); }
  void add_error(std::string code, std::string shard, std::string tensor, std::string message);
  void add_warning(std::string code, std::string shard, std::string tensor, std::string message);
  void add_accepted_global(AcceptedGlobal accepted);  // once per global, acceptor and pickle
  bool has_error(const std::string& code) const;
  bool has_warning(const std::string& code) const;
};

// Moves `from`'s errors, warnings and hashed bytes to the end of `into`: how a check split over
// threads, or a seal's report, joins the one report in a fixed order.
void merge_report(VerifyReport&& from, VerifyReport& into);

// `verify --all`: every committed checkpoint of a root, plus the root's uncommitted leftovers.
struct RootVerifyReport {
  std::string root;
  std::vector<VerifyReport> checkpoints;
  std::vector<std::string> uncommitted;
  bool ok() const;
};

// "optimizer at 'opt', scheduler at 'sched', step at 'step'" (the top level has no quotes).
std::string describe_resume_state(const std::vector<ResumeStateFound>& found);

nlohmann::json report_to_json(const VerifyReport& report);
nlohmann::json report_to_json(const RootVerifyReport& report);
// Verdict line first ("PASS step_00000008: 3 shards, ..." / "FAIL ..."), then one line per error
// and warning: "[code] shard tensor: message" / "warning: [code] shard tensor: message". A file's
// pickle_global_refused findings (one per global in JSON) are one line: the file and its role, the
// globals listed compactly with their risk and offset, and what to do.
std::string report_to_text(const VerifyReport& report);
std::string report_to_text(const RootVerifyReport& report);

}  // namespace ckpt
