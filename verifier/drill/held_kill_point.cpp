#include "verifier/drill/held_kill_point.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/file_io.h"
#include "verifier/drill/storage_fault_drill.h"

namespace ckpt {

namespace fs = std::filesystem;

std::string held_kill_point_unavailable(const DrillOptions& o, const std::string& faultfs_program) {
  const char* env = std::getenv("CKPTCHECK_KILL_GATE");
  if (env && std::string(env) == "off") return "CKPTCHECK_KILL_GATE=off";
  if (o.launcher == "slurm")
    return "a Slurm step writes on other nodes, where no mount of this drill can hold it";
  // `launch` is killed, its ranks follow it by their parent-death signal, a moment later: a rank
  // released from the held request could run on in that moment.
  if (o.nproc > 0) return "the ranks of --nproc-per-node die after their launcher, not at the held request";
  const Status usable = check_storage_faults_usable(faultfs_program);
  return usable.is_ok() ? "" : usable.message();
}

Result<std::unique_ptr<HeldKillPoint>> HeldKillPoint::mount(const std::string& faultfs_program,
                                                            const std::string& dir) {
  std::unique_ptr<HeldKillPoint> h(new HeldKillPoint(dir, dir + ".held"));
  CKPT_RETURN_IF_ERROR(make_directory(h->held_ + "/backing"));
  faultfs::FaultMountOptions mo;
  mo.program = faultfs_program;
  mo.backing_dir = h->held_ + "/backing";
  mo.state_dir = h->held_ + "/state";
  mo.mountpoint = dir;
  mo.root_name = fs::path(dir).filename().string();
  CKPT_ASSIGN_OR_RETURN(h->mount_, faultfs::FaultMount::start(mo));
  return h;
}

HeldKillPoint::~HeldKillPoint() {
  (void)finish();
}

std::string HeldKillPoint::relative(const std::string& path) const {
  return fs::path(path).lexically_normal().lexically_relative(fs::path(dir_).lexically_normal()).string();
}

std::string HeldKillPoint::below(const std::string& path) const {
  const std::string rel = relative(path);
  if (rel.empty() || rel.rfind("..", 0) == 0) return path;  // outside the mount: read as it is
  return held_ + "/backing/" + rel;
}

Status HeldKillPoint::arm(const ProgramRun& run, bool after_save, int64_t step) {
  const std::string spec = after_save ? "after-save " + relative(run.metrics) + " " + std::to_string(step)
                                      : "during-save " + relative(run.metrics) + " " +
                                            relative(run.ckpt_dir) + " " + std::to_string(step);
  return mount_->command("gate " + spec).status();
}

Status HeldKillPoint::arm_after_step(const ProgramRun& run, int64_t step) {
  return mount_->command("gate after-step " + relative(run.metrics) + " " + std::to_string(step)).status();
}

Result<bool> HeldKillPoint::release_when_held(RunningProgram& child, double timeout_seconds,
                                              const std::function<Status()>& while_held, ChildExit* ended) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    auto reply = mount_->command("gate-wait 20");
    if (!reply.is_ok()) {
      ::kill(child.local_pid(), SIGKILL);
      (void)mount_->command("gate-release");
      (void)child.kill_and_reap();
      return reply.status();
    }
    if (reply->rfind("held ", 0) == 0) {
      const Status done = while_held();
      // Released whatever while_held did: the program must not sleep in the request for good.
      const auto released = mount_->command("gate-release");
      CKPT_RETURN_IF_ERROR(done);
      CKPT_RETURN_IF_ERROR(released.status());
      return true;
    }
    if (child.try_reap(ended)) return false;  // it ended on its own: the point was never reached
  }
  ::kill(child.local_pid(), SIGKILL);
  (void)mount_->command("gate-release");
  *ended = child.kill_and_reap();
  ended->timed_out = true;
  return false;
}

Result<WatchOutcome> HeldKillPoint::kill_when_held(RunningProgram& child, const ProgramRun& run,
                                                   bool after_save, int64_t step, double timeout_seconds,
                                                   const StepObserver& on_step) {
  return kill_when_held_by(*mount_, "/" + relative(run.ckpt_dir), child, run, after_save, step,
                           timeout_seconds, on_step);
}

Result<WatchOutcome> HeldKillPoint::kill_when_held_by(const faultfs::FaultMount& gate,
                                                      const std::string& ckpt_on_gate, RunningProgram& child,
                                                      const ProgramRun& run, bool after_save, int64_t step,
                                                      double timeout_seconds, const StepObserver& on_step) {
  WatchOutcome out;
  // Read below the mount: while a request is held, the mount's only thread is asleep in it.
  MetricsTail tail(below(run.metrics), run.ckpt_dir);
  // The event of `step` (after-save: the kill point's; during-save: the arming one), kept from
  // whichever read of the log meets it. The held write is served before it is held, so a read
  // between a `gate-wait` that timed out and the next one can already meet the event line; a read
  // that threw it away left the kill with no announced path ("announced at step 4 as , not on
  // disk": a false FAIL, seen once in about 95 held kills of `ckptcheck_bench --only faultfs`).
  auto poll = [&]() {
    CheckpointEvent e;
    if (tail.poll_for_checkpoint(step, &e)) out.event = e;
  };
  int64_t shown = -1;
  // Whatever ends the watch, nothing may stay held: a reap would wait on the sleeping request.
  auto kill_release_reap = [&]() {
    ::kill(child.local_pid(), SIGKILL);
    const auto released = gate.command("gate-release");
    ChildExit e = child.kill_and_reap();
    return released.is_ok() ? Result<ChildExit>(e) : Result<ChildExit>(released.status());
  };
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    auto reply = gate.command("gate-wait 20");
    if (!reply.is_ok()) {
      (void)kill_release_reap();
      return reply.status();
    }
    if (reply->rfind("held ", 0) == 0) {
      const auto what = nlohmann::json::parse(reply->substr(5), nullptr, false);
      // The program sleeps in the held request: its metrics and files are what they were at the point.
      poll();
      if (after_save) {
        struct stat st;
        out.event_path_existed = ::stat(below(out.event.path).c_str(), &st) == 0;
      } else {
        const std::string path = what.is_object() ? what.value("path", std::string()) : "";
        out.created = fs::path(path).lexically_relative(ckpt_on_gate).string();
        out.trigger_op = what.is_object() ? what.value("op", std::string("create")) : "create";
      }
      out.last_step = tail.last_step();
      CKPT_ASSIGN_OR_RETURN(out.exit, kill_release_reap());
      out.triggered = true;
      return out;
    }
    poll();
    if (on_step && tail.last_step() > shown) on_step(shown = tail.last_step());
    ChildExit ended;
    if (child.try_reap(&ended)) {
      out.exit = ended;  // it ended on its own: the point was never reached
      out.last_step = tail.last_step();
      return out;
    }
  }
  CKPT_ASSIGN_OR_RETURN(out.exit, kill_release_reap());
  out.exit.timed_out = true;
  out.last_step = tail.last_step();
  return out;
}

Status HeldKillPoint::finish() {
  if (!mount_) return Status::ok();
  const Status stopped = mount_->stop();
  mount_.reset();
  CKPT_RETURN_IF_ERROR(stopped);
  // The mount point is an empty directory again; the backing dir takes its place.
  if (::rmdir(dir_.c_str()) != 0)
    return Status::io_error(dir_ +
                            ": cannot remove the held kill point's mount point: " + std::strerror(errno));
  if (::rename((held_ + "/backing").c_str(), dir_.c_str()) != 0)
    return Status::io_error(held_ + "/backing -> " + dir_ + ": " + std::strerror(errno));
  std::error_code ec;
  fs::remove_all(held_, ec);
  return Status::ok();
}

}  // namespace ckpt
