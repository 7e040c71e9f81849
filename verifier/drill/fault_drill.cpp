#include "verifier/drill/fault_drill.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "formats/tensor_file_open.h"
#include "verifier/check/seal.h"
#include "verifier/drill/resume_comparison.h"
#include "verifier/process/child_process.h"

namespace ckpt {

namespace {

namespace fs = std::filesystem;

std::string fault_would_catch(bool built_in) {
  return built_in ? "`ckptcheck verify` before the resume (every shard and chunk SHA-256 in the manifest)"
                  : "a SHA-256 of every file recorded when the checkpoint was saved and checked before the "
                    "resume (what `ckptcheck verify` does for checkpoints ckptcheck writes)";
}

uint64_t file_size_of(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

// A seal or a signature: what the checkpoint is verified with, never the state a fault damages.
bool is_seal_file(const fs::path& p) {
  const std::string name = p.filename().string();
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name == kSealFileName || ends_with(kSealFileSuffix) || ends_with(".sig");
}

// The regular files of a checkpoint (itself, when it is one file), largest first; its seals and
// signatures left out (a fault damages the state they vouch for, not them).
std::vector<fs::path> checkpoint_files(const fs::path& checkpoint) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_regular_file(checkpoint, ec)) return {checkpoint};
  for (const auto& e : fs::recursive_directory_iterator(checkpoint, ec))
    if (e.is_regular_file() && !is_seal_file(e.path())) files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    const uint64_t x = file_size_of(a), y = file_size_of(b);
    return x != y ? x > y : a < b;
  });
  return files;
}

// The file a stale-file or drop-file fault picks: an optimizer file if the checkpoint has one (the
// state people forget), else the second largest (the largest is usually the model), else the only one.
fs::path pick_state_file(const std::vector<fs::path>& files) {
  for (const auto& f : files)
    if (f.filename().string().find("optim") != std::string::npos) return f;
  return files.size() > 1 ? files[1] : files.front();
}

// Flips the exponent's high bit in the middle element of the first tensor payload the readers find
// in `file` (so the damage is large, not a rounding error); the file's middle byte otherwise.
Result<std::string> flip_payload_byte(const fs::path& file) {
  uint64_t offset = file_size_of(file) / 2;
  std::string where = "middle byte";
  auto opened = open_tensor_file(file.string());
  if (opened.is_ok() && !(*opened)->chunks().empty()) {
    const auto& chunks = (*opened)->chunks();
    const ChunkInfo* best = &chunks[0];
    for (const auto& c : chunks)
      if (c.data_bytes > best->data_bytes) best = &c;
    const uint64_t size = dtype_size(best->dtype);
    if (best->data_bytes >= size && size > 0) {
      offset = best->data_offset + (best->data_bytes / size / 2) * size + size - 1;
      where = "tensor " + best->label();
    }
  }
  opened = Status::ok();  // closes the file before it is written
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  if (!f.read(&byte, 1))
    return Status::io_error(file.string() + ": cannot read byte " + std::to_string(offset));
  byte = static_cast<char>(byte ^ 0x40);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&byte, 1);
  if (!f) return Status::io_error(file.string() + ": cannot write byte " + std::to_string(offset));
  return "flipped bit 6 of byte " + std::to_string(offset) + " of " + file.filename().string() + " (" +
         where + ")";
}

}  // namespace

std::vector<std::string> checkpoint_companions(const std::string& checkpoint) {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::is_regular_file(checkpoint, ec)) return found;  // a directory's seal lies inside it
  const std::string seal = checkpoint + kSealFileSuffix;
  for (const std::string& p : {seal, seal + ".sig"})
    if (fs::is_regular_file(p, ec)) found.push_back(p);
  return found;
}

Result<std::string> damage_checkpoint_copy(const std::string& fault, const CheckpointEvent& checkpoint,
                                           const CheckpointEvent& older, const std::string& dir,
                                           std::string* copy_path) {
  const fs::path source = checkpoint.path;
  const fs::path copy = fs::path(dir) / source.filename();
  *copy_path = copy.string();
  std::error_code ec;
  fs::copy(source, copy, fs::copy_options::recursive, ec);
  if (ec) return Status::io_error("fault " + fault + ": copy " + source.string() + ": " + ec.message());
  // The seal beside a single file (and its signature) goes with it: a program that verifies its
  // checkpoint before loading it must see the copy as it would see the checkpoint.
  for (const std::string& companion : checkpoint_companions(source.string())) {
    const fs::path to = fs::path(dir) / fs::path(companion).filename();
    fs::copy_file(companion, to, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::io_error("fault " + fault + ": copy " + companion + ": " + ec.message());
  }
  std::vector<fs::path> files = checkpoint_files(copy);
  if (files.empty()) return Status::corruption(source.string() + ": the checkpoint holds no file");
  std::string damage;
  if (fault == "truncate") {
    const uint64_t size = file_size_of(files[0]);
    fs::resize_file(files[0], size / 2, ec);
    damage = "cut " + files[0].filename().string() + " from " + std::to_string(size) + " to " +
             std::to_string(size / 2) + " bytes";
  } else if (fault == "bitflip") {
    CKPT_ASSIGN_OR_RETURN(damage, flip_payload_byte(files[0]));
  } else if (fault == "drop-file") {
    if (files.size() < 2) return std::string();
    const fs::path victim = pick_state_file(files);
    fs::remove(victim, ec);
    damage = "deleted " + fs::relative(victim, copy, ec).string();
  } else {  // stale-file
    if (older.path.empty()) return std::string();
    if (fs::is_regular_file(copy)) {
      fs::copy_file(older.path, copy, fs::copy_options::overwrite_existing, ec);
      damage =
          "replaced " + copy.filename().string() + " by the step-" + std::to_string(older.step) + " file";
    } else {
      const fs::path victim = pick_state_file(files);
      const fs::path rel = fs::relative(victim, copy, ec);
      const fs::path stale = fs::path(older.path) / rel;
      fs::copy_file(stale, victim, fs::copy_options::overwrite_existing, ec);
      damage = "swapped in " + rel.string() + " from the step-" + std::to_string(older.step) + " checkpoint";
    }
  }
  if (ec) return Status::io_error("fault " + fault + ": " + ec.message());
  return damage;
}

void record_fault_run(DrillRecord& record, const std::string& fault, const std::string& damage,
                      const ChildExit& e, const std::string& metrics, const std::string& ckpt_dir,
                      const std::string& stderr_log, const FaultGolden& golden) {
  auto log = read_metrics_log(metrics, ckpt_dir);
  const size_t steps = log.is_ok() ? log->steps.size() : 0;
  FaultResult r;
  r.fault = fault;
  if (!e.ok() && steps == 0) {
    r.outcome = FaultOutcome::kRefused;
    r.detail = damage + "; the program refused it (" + e.describe() + "): " + log_tail(stderr_log, 200);
  } else {
    bool diverged = !e.ok() || !log.is_ok();
    if (!diverged) {
      for (const auto& d : compare_step_metrics(*golden.steps, log->steps, golden.tolerance))
        diverged = diverged || !d.passed;
      if (golden.final_state) {
        auto final_state = announced_snapshot(*log, golden.final_step, "the fault run");
        if (!final_state.is_ok()) {
          diverged = true;
        } else {
          for (const auto& [name, c] : compare_snapshots(*golden.final_state, *final_state, golden.tolerance))
            diverged = diverged || !c.passed;
        }
      }
    }
    r.outcome = diverged ? FaultOutcome::kSilentDivergence : FaultOutcome::kSilentMatch;
    r.detail = damage + "; the program resumed without complaint (" + std::to_string(steps) +
               " steps logged, " + e.describe() + ") and " + (diverged ? "diverged from " : "matched ") +
               golden.name;
    r.would_catch = fault_would_catch(golden.built_in);
  }
  const bool refused = r.outcome == FaultOutcome::kRefused;
  r.passed = refused;
  record.add_check({"fault_" + fault,
                    "",
                    refused,
                    std::string(fault_outcome_name(r.outcome)) + ": " + r.detail,
                    {{"outcome", fault_outcome_name(r.outcome)},
                     {"damage", damage},
                     {"exit", e.describe()},
                     {"steps_logged", steps}}},
                   "fault " + fault + ": " + fault_outcome_name(r.outcome) + ": " + r.detail +
                       (refused ? "" : "; would have been caught by " + r.would_catch));
  record.out.faults.push_back(std::move(r));
}

}  // namespace ckpt
