// `ckptcheck pilot --config F [--matrix] [--scaling 1,2,3] [--steps N] [--report-dir D] [--json]`:
// the measurements a long run's plan needs (verifier/pilot/pilot_study.h). Exit 0 when every check
// passed, 1 when one failed (recompute changed the numerics, bf16 outside --loss-rtol), 2 on error.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/byte_units.h"
#include "base/file_io.h"
#include "base/progress.h"
#include "verifier/cli/commands.h"
#include "verifier/cli/option_flags.h"
#include "verifier/pilot/pilot_html.h"
#include "verifier/pilot/pilot_study.h"

namespace ckpt {
namespace {

class PilotCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand(
        "pilot",
        "measure precision x activation checkpointing (--matrix) and data-parallel scaling (--scaling)");
    sub->add_option("--config", o_.config_path, "the built-in workload's pilot config YAML")->required();
    sub->add_flag(
        "--matrix", o_.matrix,
        "run fp32 and bf16 autocast, each with activation checkpointing off and on; compare memory, "
        "time and numerics");
    sub->add_option("--scaling", o_.scaling_worlds,
                    "world sizes to measure through `launch` (e.g. 1,2,3) and model data-parallel scaling on")
        ->delimiter(',')
        ->check(CLI::Range(1, 1024));
    sub->add_option("--steps", o_.steps, "steps per run (default: the config's steps)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--loss-rtol", o_.matrix_options.loss_rtol,
                    "bf16 passes within this relative loss difference of fp32")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--report-dir", report_dir_, "write report.json and report.html here");
    sub->add_option("--work-dir", o_.work_dir, "scratch runs go in a fresh dir inside this one");
    sub->add_option("--child-timeout", o_.child_timeout_seconds,
                    "seconds any one run may take before it is killed")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_flag("--json", json_, "print report.json to stdout");
    return sub;
  }

  int run() override {
    Progress progress;
    const PilotStudy study = run_pilot_study(o_, &progress);
    if (study.exit_code == kExitUsage) {
      std::fprintf(stderr, "ckptcheck pilot: error: %s\n",
                   with_flags(study.error, pilot_field_flags()).c_str());
      return kExitUsage;
    }
    if (!report_dir_.empty()) {
      Status written = write_report(study.report);
      if (!written.is_ok()) {
        std::fprintf(stderr, "ckptcheck pilot: %s\n", written.to_string().c_str());
        return kExitUsage;
      }
    }
    if (json_) {
      std::printf("%s\n", study.report.dump(1).c_str());
    } else {
      print_text(study.report);
    }
    return study.exit_code;
  }

 private:
  Status write_report(const nlohmann::json& report) const {
    CKPT_RETURN_IF_ERROR(make_directory(report_dir_));
    CKPT_RETURN_IF_ERROR(write_file_atomically(report_dir_ + "/report.json", report.dump(1) + "\n"));
    return write_file_atomically(report_dir_ + "/report.html", render_pilot_html(report));
  }

  void print_text(const nlohmann::json& report) const {
    std::printf("pilot: %s, %lld steps per run, %d cores\n", o_.config_path.c_str(),
                static_cast<long long>(report.value("steps", 0)), report.value("cores", 0));
    if (report.contains("matrix")) std::printf("\n%s", matrix_table(report["matrix"]).c_str());
    if (report.contains("scaling")) {
      const nlohmann::json& sc = report["scaling"];
      std::printf("\nscaling (%s)\n", sc.contains("model") ? sc["model"]["formula"].get<std::string>().c_str()
                                                           : sc.value("model_error", "").c_str());
      std::printf("%-6s %-24s %11s %11s %7s %11s %11s %11s %11s\n", "world", "role", "step s", "model s",
                  "error", "compute s", "model", "comm s", "model");
      for (const auto& v : sc.value("validation", nlohmann::json::array())) {
        std::string role = v["calibration"].get<bool>() ? "calibration" : "held out";
        if (v["oversubscribed"].get<bool>()) role += ", oversubscribed";
        std::printf("%-6d %-24s %11.4f %11.4f %+6.0f%% %11.4f %11.4f %11.4f %11.4f\n",
                    v["world_size"].get<int>(), role.c_str(), v["measured_step_seconds"].get<double>(),
                    v["predicted_step_seconds"].get<double>(), 100 * v["step_relative_error"].get<double>(),
                    v["measured_compute_seconds"].get<double>(), v["predicted_compute_seconds"].get<double>(),
                    v["measured_communication_seconds"].get<double>(),
                    v["predicted_communication_seconds"].get<double>());
      }
      std::printf(
          "(step: the modelled parts, forward+backward + optimizer + input wait + all-reduce; compute: "
          "forward+backward)\n");
      if (sc.contains("gradient_bytes"))
        std::printf("gradients all-reduced per step: %.2f MiB\n",
                    sc["gradient_bytes"].get<double>() / kBytesPerMiB);
    }
    if (!report_dir_.empty()) std::printf("report: %s/report.html\n", report_dir_.c_str());
    std::printf("work dir: %s\n", report.value("work_dir", "").c_str());
  }

  PilotStudyOptions o_;
  std::string report_dir_;
  bool json_ = false;
};

}  // namespace

const FieldFlags& pilot_field_flags() {
  static const FieldFlags flags = {
      {"config_path", "--config"}, {"matrix", "--matrix"},     {"scaling_worlds", "--scaling"},
      {"steps", "--steps"},        {"work_dir", "--work-dir"}, {"child_timeout_seconds", "--child-timeout"}};
  return flags;
}

std::unique_ptr<Command> make_pilot_command() {
  return std::make_unique<PilotCommand>();
}

}  // namespace ckpt
