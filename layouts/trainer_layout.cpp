#include "layouts/trainer_layout.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "base/file_io.h"
#include "base/text.h"
#include "formats/dcp_checkpoint.h"

namespace ckpt {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() < 19 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "<prefix><digits><suffix>" -> the digits as a number, or -1.
int numbered(const std::string& name, const std::string& prefix, const std::string& suffix) {
  if (name.size() <= prefix.size() + suffix.size() || !starts_with(name, prefix) || !ends_with(name, suffix))
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return all_digits(digits) && digits.size() < 9 ? std::stoi(digits) : -1;
}

bool is_model_weights(const std::string& n) {
  return n == "model.safetensors" || n == "pytorch_model.bin" || n == "adapter_model.safetensors" ||
         n == "adapter_model.bin" || (starts_with(n, "model-") && ends_with(n, ".safetensors")) ||
         (starts_with(n, "pytorch_model-") && ends_with(n, ".bin"));
}

// FSDP's files (accelerate utils/fsdp_utils.py save_fsdp_model / save_fsdp_optimizer, which the
// Trainer and save_state call under FSDP): FULL_STATE_DICT pytorch_model_fsdp[_<i>].bin and
// optimizer[_<i>].bin; LOCAL_STATE_DICT pytorch_model_fsdp[_<i>]_rank<r>.bin; SHARDED_STATE_DICT
// the DCP folders pytorch_model_fsdp_<i>/ and optimizer_<i>/.
bool is_fsdp_model_file(const std::string& n) {
  return starts_with(n, "pytorch_model_fsdp") && ends_with(n, ".bin");
}

LayoutFile hf_file(const std::string& n) {
  LayoutFile f{n, FileRole::kOther, false, -1, ""};
  if (is_model_weights(n) || is_fsdp_model_file(n)) {
    f.role = FileRole::kModel;
  } else if (n == "optimizer.pt" || n == "optimizer.bin" || numbered(n, "optimizer_", ".bin") >= 0) {
    f.role = FileRole::kOptimizer;
  } else if (n == "scheduler.pt") {
    f.role = FileRole::kScheduler;
  } else if (n == "scaler.pt") {
    f.role = FileRole::kScaler;
  } else if (n == "rng_state.pth" || (f.rank = numbered(n, "rng_state_", ".pth")) >= 0) {
    f.role = FileRole::kRng;
  } else if (n == "trainer_state.json") {
    f.role = FileRole::kTrainerState;
  } else if (n == "training_args.bin") {
    f.role = FileRole::kTrainingArgs;
  } else if (ends_with(n, ".json")) {
    f.role = FileRole::kConfig;
  }
  f.loaded_on_resume = f.role != FileRole::kTrainingArgs && f.role != FileRole::kOther;
  return f;
}

LayoutFile accelerate_file(const std::string& n) {
  LayoutFile f{n, FileRole::kOther, false, -1, ""};
  const bool weights = (starts_with(n, "model") && ends_with(n, ".safetensors")) ||
                       (starts_with(n, "pytorch_model") && ends_with(n, ".bin"));
  if (weights) {
    f.role = FileRole::kModel;
  } else if (starts_with(n, "optimizer") && ends_with(n, ".bin")) {
    f.role = FileRole::kOptimizer;
  } else if (starts_with(n, "scheduler") && ends_with(n, ".bin")) {
    f.role = FileRole::kScheduler;
  } else if (n == "scaler.pt") {
    f.role = FileRole::kScaler;
  } else if ((f.rank = numbered(n, "random_states_", ".pkl")) >= 0) {
    f.role = FileRole::kRng;
  } else if (numbered(n, "custom_checkpoint_", ".pkl") >= 0 ||
             (starts_with(n, "sampler") && ends_with(n, ".bin")) || n == "dl_state_dict.bin") {
    f.role = FileRole::kCustomState;
  } else if (ends_with(n, ".json")) {
    f.role = FileRole::kConfig;
  }
  f.loaded_on_resume = f.role != FileRole::kOther && f.role != FileRole::kConfig;
  return f;
}

LayoutFile deepspeed_file(const std::string& n) {
  LayoutFile f{n, FileRole::kOther, false, -1, ""};
  std::string rest = n;
  if (starts_with(rest, "bf16_")) rest = rest.substr(5);
  if (numbered(n, "mp_rank_", "_model_states.pt") >= 0) {
    f.role = FileRole::kModel;
  } else if (starts_with(rest, "zero_pp_rank_") && ends_with(rest, "_model_states.pt")) {
    f.role = FileRole::kModel;
    f.rank = std::atoi(rest.c_str() + 13);
  } else if (starts_with(rest, "zero_pp_rank_") && ends_with(rest, "_optim_states.pt")) {
    f.role = FileRole::kOptimizer;
    f.rank = std::atoi(rest.c_str() + 13);
  }
  f.loaded_on_resume = f.role != FileRole::kOther;
  if (f.loaded_on_resume) f.loader = kDeepSpeedLoader;
  return f;
}

std::vector<std::string> subdirs(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_directory(ec)) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool has_deepspeed_states(const std::vector<std::string>& files) {
  return std::any_of(files.begin(), files.end(),
                     [](const std::string& n) { return deepspeed_file(n).role == FileRole::kModel; });
}

// Any of DeepSpeed's files (model or optimizer states): a tag folder, whole or not.
bool has_deepspeed_files(const std::vector<std::string>& files) {
  return std::any_of(files.begin(), files.end(),
                     [](const std::string& n) { return deepspeed_file(n).role != FileRole::kOther; });
}

// A tag `latest` may name: one folder directly below (DeepSpeed joins it to the save dir).
bool is_tag_name(const std::string& t) {
  return !t.empty() && t.find('/') == std::string::npos && t != "." && t != "..";
}

// `tag` names a folder directly in `dir`, and one holding DeepSpeed's files (whole or not).
bool names_tag_folder(const std::string& dir, const std::string& tag) {
  return is_tag_name(tag) && is_directory(dir + "/" + tag);
}
bool names_deepspeed_tag(const std::string& dir, const std::string& tag) {
  return names_tag_folder(dir, tag) && has_deepspeed_files(files_directly_in(dir + "/" + tag));
}

// The subfolders of `dir` holding DeepSpeed's files, by name.
std::vector<std::string> deepspeed_tag_folders(const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& sub : subdirs(dir)) {
    if (has_deepspeed_files(files_directly_in(dir + "/" + sub))) out.push_back(sub);
  }
  return out;
}

// `latest`'s tag, trailing whitespace dropped ("" when unreadable).
std::string latest_tag(const std::string& dir) {
  auto tag = read_small_file(dir + "/latest", 4096);
  std::string t = tag.is_ok() ? *tag : std::string();
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  size_t lead = 0;  // DeepSpeed reads it with .strip(): both ends
  while (lead < t.size() && std::isspace(static_cast<unsigned char>(t[lead]))) ++lead;
  return t.substr(lead);
}

// Evidence found in one folder, by layout; empty strings where none.
struct Evidence {
  std::string hf, accelerate, deepspeed;
  int count() const { return !hf.empty() + !accelerate.empty() + !deepspeed.empty(); }
};

Evidence evidence_in(const std::string& dir, const std::vector<std::string>& files) {
  Evidence e;
  const auto has = [&](const std::string& n) {
    return std::find(files.begin(), files.end(), n) != files.end();
  };
  if (has("trainer_state.json")) e.hf = "trainer_state.json";
  for (const std::string& n : files) {
    const FileRole r = accelerate_file(n).role;
    const bool own = r == FileRole::kRng || (r == FileRole::kCustomState && ends_with(n, ".pkl")) ||
                     (r == FileRole::kOptimizer) || (r == FileRole::kScheduler);
    if (own && e.accelerate.empty() && !(r == FileRole::kOptimizer && n == "optimizer.pt")) e.accelerate = n;
  }
  // HF's Trainer writes optimizer.pt, never optimizer.bin; but a Trainer under DeepSpeed leaves
  // global_stepN/ beside its own files, which is the Trainer's folder, not a DeepSpeed root.
  if (!e.hf.empty() && e.accelerate == "optimizer.bin") e.accelerate.clear();
  if (has_deepspeed_states(files)) e.deepspeed = "DeepSpeed model states";
  if (has("latest")) {
    // DeepSpeed's `latest`: naming a tag folder of its files (whole or not), a global_step* folder
    // that is missing, or no folder at all beside folders of its files; its reader then names what a
    // resume would hit. ckptcheck's own roots keep a `latest` too (naming a step_* folder with a
    // manifest), which is no DeepSpeed evidence.
    const std::string t = latest_tag(dir);
    const bool names_tag = names_deepspeed_tag(dir, t);
    const bool names_missing_tag = starts_with(t, "global_step") && !is_directory(dir + "/" + t);
    const bool broken_beside_tags = !names_tag_folder(dir, t) && !deepspeed_tag_folders(dir).empty();
    if (names_tag || names_missing_tag || broken_beside_tags) e.deepspeed = "latest";
  }
  // The Trainer or save_state under DeepSpeed: `latest` and its tag folder are the engine's part of
  // their folder (add_engine_files), not a DeepSpeed root of its own.
  if ((!e.hf.empty() || !e.accelerate.empty()) && e.deepspeed == "latest") e.deepspeed.clear();
  return e;
}

// What the engine under a Trainer or save_state folder keeps beside it. DeepSpeed: `latest` naming
// the tag folder (global_stepN/ for the Trainer, pytorch_model/ for save_state) whose files
// load_checkpoint reads, model and optimizer both; the weights file beside it is for from_pretrained,
// not read on resume (deepspeed_load_checkpoint / model.load_checkpoint load the tag). FSDP
// SHARDED_STATE_DICT: the DCP folders pytorch_model_fsdp_<i>/ and optimizer_<i>/.
void add_engine_files(const std::string& dir, TrainerLayout& out) {
  const std::string tag = latest_tag(dir);
  const bool deepspeed = names_deepspeed_tag(dir, tag);
  const std::vector<std::string> tags = deepspeed || !is_regular_file(dir + "/latest")
                                            ? std::vector<std::string>()
                                            : deepspeed_tag_folders(dir);
  if (!tags.empty()) {
    // DeepSpeed's folders are here, but `latest` does not lead to one: load_checkpoint fails first.
    std::string names;
    for (const std::string& t : tags) names += (names.empty() ? "" : ", ") + t + "/";
    out.defect = Status::not_found(
        dir + "/latest names '" + tag + "', " +
        (names_tag_folder(dir, tag) ? "a folder holding none of DeepSpeed's files" : "no folder here") +
        ": DeepSpeed's load_checkpoint would fail (its files are in " + names + ")");
  }
  if (deepspeed) {
    for (LayoutFile& f : out.files) {
      if (f.role == FileRole::kModel) f.loaded_on_resume = false;
    }
    out.files.push_back({"latest", FileRole::kLatestTag, true, -1, kDeepSpeedLoader});
    for (const std::string& n : files_directly_in(dir + "/" + tag)) {
      LayoutFile f = deepspeed_file(n);
      f.name = tag + "/" + n;
      out.files.push_back(std::move(f));
    }
  }
  for (const std::string& sub : subdirs(dir)) {
    const bool model = numbered(sub, "pytorch_model_fsdp_", "") >= 0;
    const bool optimizer = numbered(sub, "optimizer_", "") >= 0;
    // Listed whether or not DCP's .metadata is there: the resume reads the folder by its name, and
    // the DCP reader says what is missing from it.
    if (model || optimizer)
      out.files.push_back({sub, model ? FileRole::kModel : FileRole::kOptimizer, true, -1, kDcpLoader});
  }
}

Result<TrainerLayout> layout_of(const std::string& dir, const std::vector<std::string>& files,
                                const Evidence& e) {
  TrainerLayout out;
  out.dir = dir;
  if (!e.hf.empty()) {
    out.kind = TrainerLayoutKind::kHfTrainer;
    out.evidence = e.hf;
    for (const std::string& n : files) out.files.push_back(hf_file(n));
    add_engine_files(dir, out);
    return out;
  }
  if (!e.accelerate.empty()) {
    out.kind = TrainerLayoutKind::kAccelerate;
    out.evidence = e.accelerate;
    for (const std::string& n : files) out.files.push_back(accelerate_file(n));
    add_engine_files(dir, out);
    return out;
  }
  out.kind = TrainerLayoutKind::kDeepSpeed;
  if (e.deepspeed == "latest") {
    const std::string t = latest_tag(dir);
    if (!is_tag_name(t))
      return Status::corruption(dir + "/latest names no tag folder ('" + t +
                                "'): DeepSpeed's load_checkpoint reads its tag from it and would fail");
    if (!is_directory(dir + "/" + t))
      return Status::not_found(dir + "/latest names '" + t +
                               "', which is missing: DeepSpeed's resume would fail");
    out.dir = dir + "/" + t;
    out.given = dir;
    out.evidence = "latest -> " + t;
    for (const std::string& n : files_directly_in(out.dir)) out.files.push_back(deepspeed_file(n));
    return out;
  }
  out.evidence = "DeepSpeed model states";
  for (const std::string& n : files) out.files.push_back(deepspeed_file(n));
  return out;
}

}  // namespace

const char* trainer_layout_name(TrainerLayoutKind kind) {
  switch (kind) {
    case TrainerLayoutKind::kHfTrainer: return "hf_trainer";
    case TrainerLayoutKind::kAccelerate: return "accelerate";
    case TrainerLayoutKind::kDeepSpeed: return "deepspeed";
  }
  return "hf_trainer";
}

bool TrainerLayout::under_deepspeed() const {
  return kind != TrainerLayoutKind::kDeepSpeed &&
         std::any_of(files.begin(), files.end(),
                     [](const LayoutFile& f) { return f.loader == kDeepSpeedLoader; });
}

const LayoutFile* TrainerLayout::find(FileRole role) const {
  for (const LayoutFile& f : files) {
    if (f.role == role) return &f;
  }
  return nullptr;
}

std::vector<const LayoutFile*> TrainerLayout::all(FileRole role) const {
  std::vector<const LayoutFile*> out;
  for (const LayoutFile& f : files) {
    if (f.role == role) out.push_back(&f);
  }
  return out;
}

long long layout_step_from_dir_name(const std::string& name) {
  for (const char* prefix : {"checkpoint-", "checkpoint_", "global_step"}) {
    const std::string p = prefix;
    if (starts_with(name, p) && all_digits(name.substr(p.size()))) return std::stoll(name.substr(p.size()));
  }
  return -1;
}

Result<std::optional<TrainerLayout>> detect_trainer_layout(const std::string& raw) {
  const std::string path = strip_trailing_slashes(raw);
  if (!is_directory(path)) return std::optional<TrainerLayout>();
  const std::vector<std::string> files = files_directly_in(path);
  const Evidence here = evidence_in(path, files);
  if (here.count() > 1) {
    return Status::ambiguous(path + ": holds the files of two trainers (" +
                             (here.hf.empty() ? "" : "HF Trainer: " + here.hf + "; ") +
                             (here.accelerate.empty() ? "" : "Accelerate: " + here.accelerate + "; ") +
                             (here.deepspeed.empty() ? "" : "DeepSpeed: " + here.deepspeed) +
                             "): which one resumes decides what must be there; refused");
  }
  if (here.count() == 1) {
    CKPT_ASSIGN_OR_RETURN(TrainerLayout layout, layout_of(path, files, here));
    return std::optional<TrainerLayout>(std::move(layout));
  }
  // A run directory: the trainer resumes from its highest-numbered checkpoint folder, whatever it
  // holds (transformers' get_last_checkpoint takes the highest checkpoint-<n> directory; Accelerate's
  // automatic naming the highest checkpoint_<n>). A run directory is one where some checkpoint
  // folder shows a trainer's evidence; the highest of that naming is the one a resume takes.
  std::string best_sound, best_any;
  long long sound_step = -1, any_step = -1;
  const std::vector<std::string> subs = subdirs(path);
  for (const std::string& sub : subs) {
    const long long step = layout_step_from_dir_name(sub);
    if (step < 0 || (!starts_with(sub, "checkpoint"))) continue;
    const std::string dir = path + "/" + sub;
    if (evidence_in(dir, files_directly_in(dir)).count() == 1 && step > sound_step) {
      sound_step = step;
      best_sound = sub;
    }
  }
  if (best_sound.empty()) return std::optional<TrainerLayout>();
  const std::string naming = best_sound.substr(0, std::string("checkpoint-").size());  // "checkpoint-" or "_"
  for (const std::string& sub : subs) {
    const long long step = layout_step_from_dir_name(sub);
    if (step > any_step && starts_with(sub, naming)) {
      any_step = step;
      best_any = sub;
    }
  }
  CKPT_ASSIGN_OR_RETURN(auto inner, detect_trainer_layout(path + "/" + best_sound));
  if (inner && best_any != best_sound) {
    // The resume would take the newer folder, which is no checkpoint of the same trainer.
    const std::string evidence = inner->evidence;
    inner->defect = Status::not_found(path + "/" + best_any + ": the highest " + naming + "N folder, which " +
                                      (inner->kind == TrainerLayoutKind::kAccelerate
                                           ? "load_state() with automatic checkpoint naming"
                                           : "the Trainer's resume_from_checkpoint=True") +
                                      " takes, holds no " + evidence + " (" +
                                      std::to_string(files_directly_in(path + "/" + best_any).size()) +
                                      " files): a resume from this run fails there; pass " + path + "/" +
                                      best_sound + " to check the newest whole one");
    inner->dir = path + "/" + best_any;
  }
  if (inner) inner->given = path;
  return inner;
}

}  // namespace ckpt

namespace ckpt {

namespace {

// The evidence `kind` shows in `dir` itself, "" when none (the registry's view of evidence_in).
std::string trainer_evidence_of(const std::string& dir, TrainerLayoutKind kind) {
  const Evidence e = evidence_in(dir, files_directly_in(dir));
  switch (kind) {
    case TrainerLayoutKind::kHfTrainer: return e.hf;
    case TrainerLayoutKind::kAccelerate: return e.accelerate;
    case TrainerLayoutKind::kDeepSpeed: return e.deepspeed;
  }
  return "";
}

}  // namespace

std::optional<LayoutMatch> trainer_layout_match(const std::string& raw, TrainerLayoutKind kind) {
  const std::string path = strip_trailing_slashes(raw);
  if (!is_directory(path)) return std::nullopt;
  if (is_native_step_folder(path)) return std::nullopt;  // ckptcheck's own, `latest` and all
  LayoutMatch m;
  m.layout = trainer_layout_name(kind);
  m.kind = m.layout;
  m.dir = path;
  const Result<std::optional<TrainerLayout>> found = detect_trainer_layout(path);
  if (!found.is_ok()) {
    if (found.status().code() == StatusCode::kAmbiguous) {
      // Two trainers' evidence here: each claims the folder, and the registry refuses it naming both.
      m.evidence = trainer_evidence_of(path, kind);
      if (m.evidence.empty()) return std::nullopt;
      return m;
    }
    // Only DeepSpeed's `latest` fails to resolve: its claim, with the failure as its defect.
    if (kind != TrainerLayoutKind::kDeepSpeed) return std::nullopt;
    m.evidence = "latest";
    m.defect = found.status();
    return m;
  }
  if (!*found || (*found)->kind != kind) return std::nullopt;
  const TrainerLayout& layout = **found;
  m.dir = layout.dir;
  m.given = layout.given;
  m.evidence = layout.evidence;
  m.files = layout.files;
  m.defect = layout.defect;
  for (LayoutFile& f : m.files) {
    if (f.loader.empty()) f.loader = file_loader_by_name(f.name);
  }
  return m;
}

TrainerLayout trainer_layout_of(const LayoutMatch& match) {
  TrainerLayout layout;
  for (TrainerLayoutKind kind :
       {TrainerLayoutKind::kHfTrainer, TrainerLayoutKind::kAccelerate, TrainerLayoutKind::kDeepSpeed}) {
    if (match.kind == trainer_layout_name(kind)) layout.kind = kind;
  }
  layout.dir = match.dir;
  layout.given = match.given;
  layout.evidence = match.evidence;
  layout.files = match.files;
  layout.defect = match.defect;
  return layout;
}

}  // namespace ckpt
