#include "verifier/process/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

namespace ckpt {

namespace {

volatile sig_atomic_t g_forward_signal = 0;

void remember_signal(int sig) {
  g_forward_signal = sig;
}

// Restores the previous handlers when the launch ends.
class SignalForwarding {
 public:
  SignalForwarding() {
    g_forward_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = remember_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalForwarding() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace

bool LaunchOutcome::all_ok() const {
  for (const RankExit& r : ranks) {
    if (!r.exit.ok()) return false;
  }
  return !ranks.empty();
}

std::vector<std::string> LaunchOutcome::report_lines() const {
  std::vector<std::string> lines;
  for (const RankExit& r : ranks) {
    std::string what;
    if (r.exit.exited) {
      what = "exit " + std::to_string(r.exit.exit_code);
    } else if (r.exit.signaled) {
      what = std::string("killed by ") + signal_name(r.exit.signal);
      if (std::strcmp(signal_name(r.exit.signal), "signal") == 0) what += " " + std::to_string(r.exit.signal);
    } else {
      what = "unknown end";
    }
    if (r.outlived_finish) {
      what += " (still running after another rank had exited 0: stopped at the end of the finish window)";
    } else if (r.stopped_by_launcher) {
      what += " (stopped after another rank failed)";
    }
    lines.push_back("rank " + std::to_string(r.rank) + ": " + what);
  }
  return lines;
}

Result<int> pick_free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::io_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    return Status::io_error("cannot bind a loopback port: " + err);
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

std::vector<std::string> torchrun_environment(const LaunchOptions& o, int local_rank, int master_port,
                                              bool omp_num_threads_set) {
  const int world = o.nnodes * o.nproc_per_node;
  const std::string rank = std::to_string(global_rank(o, local_rank));
  std::vector<std::string> env = {"RANK=" + rank,
                                  "LOCAL_RANK=" + std::to_string(local_rank),
                                  "WORLD_SIZE=" + std::to_string(world),
                                  "LOCAL_WORLD_SIZE=" + std::to_string(o.nproc_per_node),
                                  "GROUP_RANK=" + std::to_string(o.node_rank),
                                  "ROLE_RANK=" + rank,
                                  "ROLE_WORLD_SIZE=" + std::to_string(world),
                                  "ROLE_NAME=default",
                                  "MASTER_ADDR=" + o.master_addr,
                                  "MASTER_PORT=" + std::to_string(master_port)};
  if (!omp_num_threads_set) env.push_back("OMP_NUM_THREADS=1");
  return env;
}

std::vector<std::string> slurm_task_torchrun_environment(const SlurmTask& task,
                                                         const std::string& master_addr,
                                                         bool omp_num_threads_set) {
  LaunchOptions node;
  node.nproc_per_node = task.tasks_on_this_node;
  node.nnodes = task.num_nodes;
  node.node_rank = task.node_id;
  node.master_addr = master_addr;
  std::vector<std::string> env =
      torchrun_environment(node, task.local_id, slurm_master_port(task), omp_num_threads_set);
  // Slurm numbers the ranks (block or cyclic distribution) and may put more tasks on some nodes:
  // its own numbers win over node_rank x nproc_per_node.
  const std::string rank = std::to_string(task.proc_id), world = std::to_string(task.num_tasks);
  for (std::string& v : env) {
    const std::string name = v.substr(0, v.find('='));
    if (name == "RANK" || name == "ROLE_RANK") v = name + "=" + rank;
    if (name == "WORLD_SIZE" || name == "ROLE_WORLD_SIZE") v = name + "=" + world;
  }
  return env;
}

Result<LaunchOptions> launch_options_from_slurm(const SlurmTask& task, int nproc_per_node,
                                                const std::string& master_addr) {
  if (task.tasks_on_this_node != 1)
    return Status::invalid_argument(
        "--nproc-per-node under Slurm starts the ranks of a node itself: run one "
        "launch per node (srun --ntasks-per-node=1), not " +
        std::to_string(task.tasks_on_this_node));
  LaunchOptions o;
  o.nproc_per_node = nproc_per_node;
  o.nnodes = task.num_nodes;
  o.node_rank = task.node_id;
  o.master_addr = master_addr;
  o.master_port = slurm_master_port(task);
  return o;
}

Result<LaunchOutcome> launch_ranks(const LaunchOptions& o) {
  if (o.nproc_per_node < 1) return Status::invalid_argument("nproc_per_node must be >= 1");
  if (o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes)
    return Status::invalid_argument("node_rank " + std::to_string(o.node_rank) + " is not in 0.." +
                                    std::to_string(o.nnodes - 1) + " (nnodes " + std::to_string(o.nnodes) +
                                    ")");
  if (o.nnodes > 1 && o.master_port == 0)
    return Status::invalid_argument(
        "master_port: with more than one node every node must be given the same "
        "port (a free port picked here is unknown to the others)");
  if (o.argv.empty()) return Status::invalid_argument("launch: no command after --");
  LaunchOutcome out;
  out.master_port = o.master_port;
  if (out.master_port == 0) {
    CKPT_ASSIGN_OR_RETURN(out.master_port, pick_free_loopback_port());
  }
  SignalForwarding forwarding;
  std::vector<ChildProcess> ranks;  // a rank still running when this returns early is SIGKILLed
  for (int r = 0; r < o.nproc_per_node; ++r) {
    SpawnOptions spawn;
    spawn.argv = o.argv;
    spawn.env = torchrun_environment(o, r, out.master_port, std::getenv("OMP_NUM_THREADS") != nullptr);
    CKPT_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn(spawn));
    ranks.push_back(std::move(child));
    out.ranks.push_back({global_rank(o, r), {}, false});
  }
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> failed_at, finished_at;
  bool killed = false;
  size_t running = ranks.size();
  while (running > 0) {
    if (g_forward_signal != 0) {
      const int sig = g_forward_signal;
      g_forward_signal = 0;
      for (ChildProcess& rank : ranks) rank.send_signal(sig);
      if (!failed_at) failed_at = Clock::now();  // whoever ignores it is SIGKILLed after the grace
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (!ranks[i].try_reap(&out.ranks[i].exit)) continue;
      --running;
      if (!out.ranks[i].exit.ok() && !failed_at) failed_at = Clock::now();
      if (out.ranks[i].exit.ok() && !finished_at) finished_at = Clock::now();
    }
    const bool finish_window_over =
        finished_at &&
        std::chrono::duration<double>(Clock::now() - *finished_at).count() >= o.finish_window_seconds;
    // Peers of a dead rank normally fail on their own at the next collective; the grace period
    // lets them report why. Past it, a rank blocked elsewhere is SIGKILLed: the launch never hangs.
    const bool grace_over =
        failed_at && std::chrono::duration<double>(Clock::now() - *failed_at).count() >= o.grace_seconds;
    if ((grace_over || finish_window_over) && running > 0 && !killed) {
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (!ranks[i].running()) continue;
        ranks[i].send_signal(SIGKILL);
        out.ranks[i].stopped_by_launcher = true;
        out.ranks[i].outlived_finish = !grace_over;
      }
      killed = true;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return out;
}

}  // namespace ckpt
