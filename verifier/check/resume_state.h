// Training state a resume needs, recognised in a foreign checkpoint by its structure wherever it
// sits, not by the key it was saved under: `{"model", "opt", "sched", "rng", "step"}` holds an
// optimizer and a scheduler as surely as `{"optimizer", "scheduler"}` does.
//
//   optimizer  a dict with `state` and `param_groups` (torch.optim.Optimizer.state_dict(), at any
//              depth: Lightning's optimizer_states.0, a DCP's flattened "opt.state.*")
//   scheduler  a dict with `last_epoch` and `_last_lr`, `base_lrs` or `_step_count`
//              (torch.optim.lr_scheduler.*.state_dict())
//   scaler     a dict with `scale` and `_growth_tracker` (torch.cuda.amp.GradScaler.state_dict())
//   rng        torch.get_rng_state()'s ByteTensor (5056 bytes; a CUDA generator's 16 under a key
//              naming rng, random or cuda), numpy's ('MT19937', keys[624], pos, has_gauss, cached)
//              or a Generator's {"bit_generator", "state"}, Python's random.getstate()
//              (3, (625 ints), gauss_next)
//   step       an integer `step`, `global_step`, `iteration`, `epoch`, ... outside an optimizer's
//              per-parameter state
// Half an optimizer state dict (`param_groups` without `state`) is reported as such: a resume
// would fail to load it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/tensor_file.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

// The keys and values of a foreign checkpoint as one tree: every tensor at its dotted path as
// {"__tensor__": {"dtype": "U8", "shape": [5056]}}, every non-tensor value (TensorFile::metadata())
// at its own. Add any number of files or a DCP's fqns; then ask what resume state it holds.
class ResumeStateTree {
 public:
  // `file` prefixes what is found ("optimizer.pt: opt"); "" for a single file or directory.
  void add_file(const TensorFile& file, const std::string& label = "");
  void add_tensor(const std::string& dotted_path, DType dtype, const std::vector<int64_t>& shape,
                  const std::string& label = "");
  void add_value(const std::string& dotted_path, const nlohmann::json& value, const std::string& label = "");

  // What the tree holds, in the order of ResumeStateFound::part, then by path.
  std::vector<ResumeStateFound> find() const;

 private:
  nlohmann::json& node_at(const std::string& label, const std::string& dotted_path);
  nlohmann::json root_ = nlohmann::json::object();  // label -> tree
};

// Whether `found` holds `part` ("optimizer", "scheduler", "scaler", "rng", "step").
bool holds_resume_part(const std::vector<ResumeStateFound>& found, const std::string& part);

// The optimizer_state_missing message for a checkpoint (`what`: "no optimizer state ...") given what
// else it holds. Only when it holds no resume state but a step counter does it suggest
// --weights-only: a file that carries a scheduler, a scaler or an RNG state was saved to be resumed,
// and switching the check off would hide the missing optimizer.
std::string optimizer_missing_advice(const std::string& what, const std::vector<ResumeStateFound>& found);

}  // namespace ckpt
