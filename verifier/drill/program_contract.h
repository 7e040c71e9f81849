// The contract between `ckptcheck drill` and the training program it drills (any program: a
// PyTorch script, a LibTorch binary, the built-in `ckptcheck train`). Keep these names exactly:
// programs are written against them.
//
// Environment of every run:
//   CKPTCHECK_CKPT_DIR    the directory the program writes its checkpoints into
//   CKPTCHECK_STEPS       train until this global step (absolute, counted from 0)
//   CKPTCHECK_SAVE_EVERY  save after each step that is a multiple of it
//   CKPTCHECK_METRICS     a JSON-lines file to append to: one {"step": int, "loss": number, ...}
//                         per optimizer step (any further numeric field is compared too; names
//                         ending in _ms or _seconds are timings, reported only), and after each
//                         checkpoint is durable {"event": "checkpoint", "step": int, "path": P}
//   CKPTCHECK_RESUME      unset on a fresh start; on a relaunch, the checkpoint to resume from
//   CKPTCHECK_ROLE        reference | subject | resumed | control (for the program's logs only)
// Optional fields of a step line, used by the drill's report and `plan` when present (shown as
// reported by the program) and "not measured" when absent, never 0:
//   tokens             tokens (or samples) this optimizer step consumed: tokens/s = tokens / step time
//   peak_memory_bytes  peak memory of one full step including the optimizer step. On GPU: reset
//                      the peak counter (torch.cuda.reset_peak_memory_stats), run one full step,
//                      read torch.cuda.max_memory_allocated. On CPU: the process's VmHWM over the
//                      step (reset first through /proc/self/clear_refs) less its VmRSS before the
//                      model was built. Not compared between runs.
//   data_wait_ms       time this step waited for its input batch (a timing: not compared)
// Without any of them the drill still measures from outside: step time and the save stall from
// when lines arrive, restore time from a relaunch to its first step, checkpoint bytes and bytes
// per component, and the process tree's resident set sampled from /proc
// (verifier/drill/run_measurements.h).
// {ckpt_dir}, {steps}, {save_every}, {metrics} and {resume} in the program's arguments are
// replaced by the same values, for programs configured by flags.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ckpt {

constexpr const char* kEnvCkptDir = "CKPTCHECK_CKPT_DIR";
constexpr const char* kEnvSteps = "CKPTCHECK_STEPS";
constexpr const char* kEnvSaveEvery = "CKPTCHECK_SAVE_EVERY";
constexpr const char* kEnvMetrics = "CKPTCHECK_METRICS";
constexpr const char* kEnvResume = "CKPTCHECK_RESUME";
constexpr const char* kEnvRole = "CKPTCHECK_ROLE";

struct ProgramRun {
  std::string role;  // reference | subject | resumed | control
  std::string ckpt_dir;
  int64_t steps = 0;
  int64_t save_every = 0;
  std::string metrics;
  std::string resume;  // "" on a fresh start
};

// "NAME=value" for every variable the run sets; CKPTCHECK_RESUME only when resuming.
std::vector<std::string> contract_environment(const ProgramRun& run);

// `args` with every {placeholder} replaced ({resume} by "" on a fresh start).
std::vector<std::string> substitute_placeholders(const std::vector<std::string>& args, const ProgramRun& run);

// The program's side of the contract (the public API, api/ckptcheck.h, wraps these).
// The run this process's environment describes; nullopt when CKPTCHECK_CKPT_DIR is unset.
// kInvalidArgument, naming the variable, when one is missing or not a number.
Result<std::optional<ProgramRun>> program_run_from_environment();
// One metrics line (no newline): {"step": step, "<name>": value, ...}; NaN and infinities as
// Python's json writes them (NaN, Infinity, -Infinity), which the drill reads as numbers.
std::string metrics_line(int64_t step, const std::vector<std::pair<std::string, double>>& values);
// The checkpoint event (no newline): {"event": "checkpoint", "step": step, "path": path}.
std::string checkpoint_event_line(int64_t step, const std::string& path);

}  // namespace ckpt
