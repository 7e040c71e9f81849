// A plain LibTorch C++ training program that checkpoints through ckptcheck's public API and keeps
// the restore drill's contract (README, "The restore drill"), so that
//
//   ckptcheck drill --save-at 6 --kill both -- ./ckptcheck_libtorch_example
//
// proves it resumes exactly. Built against the installed package (find_package(ckptcheck)); see
// CMakeLists.txt beside it.
//
// Model: an MLP regressor (8 -> 32 -> 1, ReLU, dropout) on a fixed synthetic data set, Adam, a
// StepLR schedule, a dynamic loss scaler with GradScaler's fields, and a data order reshuffled
// every epoch from (shuffle_seed, epoch). Dropout draws from the global CPU generator, whose
// state is saved too. Every piece of state is named the way `ckptcheck verify` expects, so its
// checkpoints also pass `ckptcheck verify`.
//
// --bug NAME introduces a classic resume bug on purpose (the drill must catch each one):
//   forget-optimizer, forget-scheduler, forget-rng, forget-data-position.
#include <ckptcheck/ckptcheck_torch.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr int64_t kSamples = 256;
constexpr int64_t kFeatures = 8;
constexpr int64_t kBatch = 16;
constexpr int64_t kShuffleSeed = 11;
constexpr double kBaseLr = 1e-2;
constexpr unsigned kLrStepSize = 5;
constexpr double kLrGamma = 0.5;

const char* const kBugs[] = {"forget-optimizer", "forget-scheduler", "forget-rng", "forget-data-position"};

at::Tensor scalar(int64_t v) {
  return torch::tensor(v, torch::kLong);
}
at::Tensor scalar(double v) {
  return torch::tensor(v, torch::kDouble);
}

struct LossScaler {
  double scale = 1024.0, growth_factor = 2.0, backoff_factor = 0.5;
  int64_t growth_interval = 4, growth_tracker = 0;
};

struct Data {
  at::Tensor x, y;
  int64_t epoch = 0, cursor = 0;

  Data() {
    at::Generator g = at::detail::createCPUGenerator(7);
    x = torch::randn({kSamples, kFeatures}, g);
    y = torch::tanh(x.matmul(torch::randn({kFeatures, 1}, g))) + 0.1 * torch::randn({kSamples, 1}, g);
  }
  std::pair<at::Tensor, at::Tensor> next_batch() {
    if (cursor + kBatch > kSamples) {
      ++epoch;
      cursor = 0;
    }
    at::Generator g = at::detail::createCPUGenerator(kShuffleSeed + epoch);
    at::Tensor idx = torch::randperm(kSamples, g).slice(0, cursor, cursor + kBatch);
    cursor += kBatch;
    return {x.index_select(0, idx), y.index_select(0, idx)};
  }
};

struct Trainer {
  torch::nn::Sequential model{torch::nn::Linear(kFeatures, 32), torch::nn::ReLU(), torch::nn::Dropout(0.1),
                              torch::nn::Linear(32, 1)};
  torch::optim::Adam optimizer{model->parameters(), torch::optim::AdamOptions(kBaseLr)};
  torch::optim::StepLR scheduler{optimizer, kLrStepSize, kLrGamma};
  LossScaler scaler;
  Data data;
  int64_t step = 0, skipped = 0;

  double lr() const { return optimizer.param_groups()[0].options().get_lr(); }

  // One optimizer step; returns the metrics the drill compares.
  std::vector<std::pair<std::string, double>> train_step() {
    const auto start = std::chrono::steady_clock::now();
    auto [x, y] = data.next_batch();
    optimizer.zero_grad();
    at::Tensor loss = torch::mse_loss(model->forward(x), y);
    (loss * scaler.scale).backward();
    const double current_lr = lr(), scale = scaler.scale;
    double sq = 0;
    bool finite = true;
    for (auto& p : model->parameters()) {
      p.mutable_grad().div_(scaler.scale);
      sq += p.grad().pow(2).sum().item<double>();
      finite = finite && torch::isfinite(p.grad()).all().item<bool>();
    }
    if (finite) {
      optimizer.step();
      if (++scaler.growth_tracker == scaler.growth_interval) {
        scaler.scale *= scaler.growth_factor;
        scaler.growth_tracker = 0;
      }
    } else {  // an overflow: skip the update, back off
      scaler.scale *= scaler.backoff_factor;
      scaler.growth_tracker = 0;
      ++skipped;
    }
    scheduler.step();
    ++step;
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return {{"loss", loss.item<double>()},
            {"lr", current_lr},
            {"grad_norm", std::sqrt(sq)},
            {"loss_scale", scale},
            {"step_ms", ms}};
  }

  static std::string key_of(const at::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

  ckptcheck::TrainingState export_state() {
    ckptcheck::TrainingState s;
    s.step = step;
    s.metadata["program"] = "examples/libtorch";
    for (const auto& item : model->named_parameters()) {
      const std::string name = "model." + item.key();
      s.tensors[name] = item.value().detach().clone();
      auto found = optimizer.state().find(key_of(item.value()));
      if (found == optimizer.state().end()) continue;
      auto& adam = static_cast<torch::optim::AdamParamState&>(*found->second);
      s.tensors["optimizer." + name + ".exp_avg"] = adam.exp_avg().clone();
      s.tensors["optimizer." + name + ".exp_avg_sq"] = adam.exp_avg_sq().clone();
      s.tensors["optimizer." + name + ".step"] = scalar(adam.step());
    }
    s.tensors["scheduler.last_step"] = scalar(step);
    s.tensors["scheduler.base_lr"] = scalar(kBaseLr);
    s.tensors["scheduler.last_lr"] = scalar(lr());
    s.tensors["scaler.scale"] = scalar(scaler.scale);
    s.tensors["scaler.growth_factor"] = scalar(scaler.growth_factor);
    s.tensors["scaler.backoff_factor"] = scalar(scaler.backoff_factor);
    s.tensors["scaler.growth_interval"] = scalar(scaler.growth_interval);
    s.tensors["scaler.growth_tracker"] = scalar(scaler.growth_tracker);
    s.tensors["rng.cpu_state"] = at::detail::getDefaultCPUGenerator().get_state();
    s.tensors["data.epoch"] = scalar(data.epoch);
    s.tensors["data.cursor"] = scalar(data.cursor);
    s.tensors["data.shuffle_seed"] = scalar(kShuffleSeed);
    s.tensors["progress.global_step"] = scalar(step);
    s.tensors["progress.skipped_steps"] = scalar(skipped);
    return s;
  }

  // "" on success, else what is missing or wrong.
  std::string import_state(const ckptcheck::TrainingState& s, const std::string& bug) {
    const auto get = [&](const std::string& name, at::Tensor* out) {
      auto found = s.tensors.find(name);
      if (found == s.tensors.end()) return false;
      *out = found->second;
      return true;
    };
    at::Tensor t;
    torch::NoGradGuard no_grad;
    for (const auto& item : model->named_parameters()) {
      const std::string name = "model." + item.key();
      if (!get(name, &t)) return "missing " + name;
      item.value().copy_(t);
      if (bug == "forget-optimizer") continue;
      at::Tensor exp_avg, exp_avg_sq, adam_step;
      if (!get("optimizer." + name + ".exp_avg", &exp_avg) ||
          !get("optimizer." + name + ".exp_avg_sq", &exp_avg_sq) ||
          !get("optimizer." + name + ".step", &adam_step))
        return "missing optimizer state of " + name;
      auto state = std::make_unique<torch::optim::AdamParamState>();
      state->step(adam_step.item<int64_t>());
      state->exp_avg(exp_avg);
      state->exp_avg_sq(exp_avg_sq);
      optimizer.state()[key_of(item.value())] = std::move(state);
    }
    if (!get("progress.global_step", &t)) return "missing progress.global_step";
    step = t.item<int64_t>();
    if (!get("progress.skipped_steps", &t)) return "missing progress.skipped_steps";
    skipped = t.item<int64_t>();
    if (bug != "forget-scheduler") {
      if (!get("scheduler.last_step", &t)) return "missing scheduler.last_step";
      for (int64_t i = t.item<int64_t>(); i > 0; --i) scheduler.step();  // StepLR keeps no other state
      if (!get("scheduler.last_lr", &t) || t.item<double>() != lr())
        return "scheduler.last_lr differs after replay";
    }
    if (!get("scaler.scale", &t)) return "missing scaler.scale";
    scaler.scale = t.item<double>();
    if (!get("scaler.growth_tracker", &t)) return "missing scaler.growth_tracker";
    scaler.growth_tracker = t.item<int64_t>();
    if (bug != "forget-rng") {
      if (!get("rng.cpu_state", &t)) return "missing rng.cpu_state";
      at::Generator cpu = at::detail::getDefaultCPUGenerator();  // a handle to the global generator
      std::lock_guard<std::mutex> lock(cpu.mutex());
      cpu.set_state(t);
    }
    if (bug != "forget-data-position") {
      if (!get("data.epoch", &t)) return "missing data.epoch";
      data.epoch = t.item<int64_t>();
      if (!get("data.cursor", &t)) return "missing data.cursor";
      data.cursor = t.item<int64_t>();
    }
    return "";
  }
};

int usage(const char* message) {
  std::fprintf(stderr, "ckptcheck_libtorch_example: %s\n", message);
  std::fprintf(stderr,
               "usage: ckptcheck_libtorch_example [--bug forget-optimizer|forget-scheduler|forget-rng|"
               "forget-data-position]  (run under `ckptcheck drill -- ...`, or set CKPTCHECK_CKPT_DIR, "
               "CKPTCHECK_STEPS, CKPTCHECK_SAVE_EVERY and CKPTCHECK_METRICS)\n");
  return 2;
}

int fail(const ckptcheck::Status& status) {
  std::fprintf(stderr, "ckptcheck_libtorch_example: %s\n", status.message().c_str());
  return status.exit_code();
}

}  // namespace

int main(int argc, char** argv) {
  std::string bug;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bug") == 0 && i + 1 < argc) {
      bug = argv[++i];
      bool known = false;
      for (const char* b : kBugs) known = known || bug == b;
      if (!known) return usage(("unknown --bug " + bug).c_str());
    } else {
      return usage((std::string("unknown argument ") + argv[i]).c_str());
    }
  }
  auto run = ckptcheck::drill_run_from_environment();
  if (!run.ok()) return fail(run.status());
  if (!run->under_drill) return usage("CKPTCHECK_CKPT_DIR is not set");
  if (run->save_every <= 0) return usage("CKPTCHECK_SAVE_EVERY must be positive");

  torch::set_num_threads(1);  // one thread: the same reduction order every run, so runs are bit-exact
  torch::manual_seed(1234);
  Trainer trainer;
  if (!run->resume.empty()) {
    auto state = ckptcheck::load(run->resume);
    if (!state.ok()) return fail(state.status());
    const std::string problem = trainer.import_state(state.value(), bug);
    if (!problem.empty()) return fail(ckptcheck::Status::error(run->resume + ": " + problem));
  }

  ckptcheck::MetricsLog log(run->metrics);
  if (!log.status().ok()) return fail(log.status());
  ckptcheck::SaveOptions save_options;
  save_options.shards = 2;
  trainer.model->train();
  while (trainer.step < run->steps) {
    const auto metrics = trainer.train_step();
    if (auto logged = log.step(trainer.step, metrics); !logged.ok()) return fail(logged);
    if (trainer.step % run->save_every != 0) continue;
    auto saved = ckptcheck::save(run->ckpt_dir, trainer.export_state(), save_options);
    if (!saved.ok()) return fail(saved.status());
    if (auto logged = log.checkpoint(trainer.step, saved->dir); !logged.ok()) return fail(logged);
  }
  return 0;
}
