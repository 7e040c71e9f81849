#include "verifier/process/rss_sampler.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace ckpt {
namespace {

// The parent pid from /proc/<pid>/stat: the field after the command name, which is in parentheses
// and may itself hold spaces and parentheses (hence the last ')').
bool parent_of(pid_t pid, pid_t* parent) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  char state = 0;
  int ppid = 0;
  if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return false;
  if (state == 'Z') return false;  // a zombie holds no memory
  *parent = static_cast<pid_t>(ppid);
  return true;
}

uint64_t resident_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return resident * page;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> pids;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return pids;
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(dir);
  return pids;
}

}  // namespace

uint64_t process_tree_rss_bytes(pid_t root, int* processes) {
  std::multimap<pid_t, pid_t> children;
  bool root_alive = false;
  for (pid_t pid : all_pids()) {
    pid_t parent = 0;
    if (!parent_of(pid, &parent)) continue;
    if (pid == root) root_alive = true;
    children.emplace(parent, pid);
  }
  if (processes) *processes = 0;
  if (!root_alive) return 0;
  uint64_t total = 0;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    total += resident_bytes(pid);
    if (processes) ++*processes;
    const auto range = children.equal_range(pid);
    for (auto it = range.first; it != range.second; ++it) todo.push_back(it->second);
  }
  return total;
}

RssSampler::RssSampler(pid_t root, std::chrono::milliseconds interval) : root_(root), interval_(interval) {
  peak_.interval_seconds = std::chrono::duration<double>(interval).count();
  thread_ = std::thread([this] {
    while (!stopping_.load()) {
      sample_once();
      // Short naps, so stop() never waits a whole interval.
      const auto until = std::chrono::steady_clock::now() + interval_;
      while (!stopping_.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(
            std::min<std::chrono::milliseconds>(interval_, std::chrono::milliseconds(5)));
    }
  });
}

RssSampler::~RssSampler() {
  stop();
}

void RssSampler::sample_once() {
  if (root_ <= 0) return;  // no local process to sample: nothing is measured
  int processes = 0;
  const uint64_t bytes = process_tree_rss_bytes(root_, &processes);
  if (processes == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ++peak_.samples;
  peak_.peak_bytes = std::max(peak_.peak_bytes, bytes);
  peak_.max_processes = std::max(peak_.max_processes, processes);
}

RssPeak RssSampler::stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  return peak_so_far();
}

RssPeak RssSampler::peak_so_far() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

}  // namespace ckpt
