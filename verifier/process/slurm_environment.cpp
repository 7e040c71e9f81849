#include "verifier/process/slurm_environment.h"

#include <cctype>

namespace ckpt {

namespace {

Result<int64_t> integer_variable(const EnvironmentLookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (value == nullptr) return Status::invalid_argument(std::string(name) + ": not set inside a Slurm step");
  const std::string text = value;
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    return Status::invalid_argument(std::string(name) + ": expected a non-negative integer, got '" + text +
                                    "'");
  return std::stoll(text);
}

Result<int> small_integer(const EnvironmentLookup& lookup, const char* name) {
  CKPT_ASSIGN_OR_RETURN(const int64_t v, integer_variable(lookup, name));
  if (v > 1 << 24)
    return Status::invalid_argument(std::string(name) + ": " + std::to_string(v) + " is too large");
  return static_cast<int>(v);
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

Result<std::string> first_host_of_hostlist(const std::string& hostlist) {
  // The first entry ends at the first comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < hostlist.size(); ++end) {
    if (hostlist[end] == '[') ++depth;
    if (hostlist[end] == ']') --depth;
    if (hostlist[end] == ',' && depth == 0) break;
  }
  const std::string entry = hostlist.substr(0, end);
  const size_t open = entry.find('[');
  if (open == std::string::npos) {
    if (entry.empty()) return Status::invalid_argument("hostlist '" + hostlist + "': empty");
    return entry;
  }
  const size_t close = entry.find(']', open);
  if (open == 0 || close == std::string::npos)
    return Status::invalid_argument("hostlist '" + hostlist + "': expected prefix[ranges], got '" + entry +
                                    "'");
  // "001-004,7" inside the brackets: the first range's first number, zero padding kept.
  const std::string ranges = entry.substr(open + 1, close - open - 1);
  const std::string first = ranges.substr(0, ranges.find_first_of(",-"));
  if (!all_digits(first))
    return Status::invalid_argument("hostlist '" + hostlist +
                                    "': expected a number range in brackets, got '" + ranges + "'");
  return entry.substr(0, open) + first + entry.substr(close + 1);
}

Result<int> tasks_on_node(const std::string& tasks_per_node, int node_id) {
  // Comma-separated "count" or "count(xrepeat)".
  int node = 0;
  size_t start = 0;
  while (start < tasks_per_node.size()) {
    const size_t end = std::min(tasks_per_node.find(',', start), tasks_per_node.size());
    const std::string item = tasks_per_node.substr(start, end - start);
    const size_t paren = item.find("(x");
    const std::string count = item.substr(0, paren);
    std::string repeat = "1";
    if (paren != std::string::npos) {
      if (item.back() != ')')
        return Status::invalid_argument("tasks per node '" + tasks_per_node + "': expected N(xR), got '" +
                                        item + "'");
      repeat = item.substr(paren + 2, item.size() - paren - 3);
    }
    if (!all_digits(count) || !all_digits(repeat))
      return Status::invalid_argument("tasks per node '" + tasks_per_node + "': expected N or N(xR), got '" +
                                      item + "'");
    const int n = std::stoi(count), r = std::stoi(repeat);
    if (node_id < node + r) return n;
    node += r;
    start = end + 1;
  }
  return Status::invalid_argument("tasks per node '" + tasks_per_node + "': lists " + std::to_string(node) +
                                  " node(s), no node " + std::to_string(node_id));
}

Result<std::optional<SlurmTask>> slurm_task_from_environment(const EnvironmentLookup& lookup) {
  if (lookup("SLURM_STEP_ID") == nullptr) return std::optional<SlurmTask>();
  SlurmTask t;
  CKPT_ASSIGN_OR_RETURN(t.job_id, integer_variable(lookup, "SLURM_JOB_ID"));
  CKPT_ASSIGN_OR_RETURN(t.step_id, integer_variable(lookup, "SLURM_STEP_ID"));
  CKPT_ASSIGN_OR_RETURN(t.proc_id, small_integer(lookup, "SLURM_PROCID"));
  CKPT_ASSIGN_OR_RETURN(t.local_id, small_integer(lookup, "SLURM_LOCALID"));
  CKPT_ASSIGN_OR_RETURN(t.node_id, small_integer(lookup, "SLURM_NODEID"));
  CKPT_ASSIGN_OR_RETURN(t.num_tasks, small_integer(lookup, "SLURM_STEP_NUM_TASKS"));
  CKPT_ASSIGN_OR_RETURN(t.num_nodes, small_integer(lookup, "SLURM_STEP_NUM_NODES"));
  const char* per_node = lookup("SLURM_STEP_TASKS_PER_NODE");
  if (per_node == nullptr)
    return Status::invalid_argument("SLURM_STEP_TASKS_PER_NODE: not set inside a Slurm step");
  CKPT_ASSIGN_OR_RETURN(t.tasks_on_this_node, tasks_on_node(per_node, t.node_id));
  const char* nodes = lookup("SLURM_STEP_NODELIST");
  if (nodes == nullptr) return Status::invalid_argument("SLURM_STEP_NODELIST: not set inside a Slurm step");
  CKPT_ASSIGN_OR_RETURN(t.first_node, first_host_of_hostlist(nodes));
  if (t.proc_id >= t.num_tasks || t.node_id >= t.num_nodes || t.local_id >= t.tasks_on_this_node)
    return Status::invalid_argument(
        "SLURM_PROCID " + std::to_string(t.proc_id) + ", SLURM_NODEID " + std::to_string(t.node_id) +
        ", SLURM_LOCALID " + std::to_string(t.local_id) + ": outside the step's " +
        std::to_string(t.num_tasks) + " task(s) on " + std::to_string(t.num_nodes) + " node(s)");
  if (const char* ports = lookup("SLURM_STEP_RESV_PORTS")) {
    const std::string p = ports;
    const std::string first = p.substr(0, p.find_first_of(",-"));
    if (all_digits(first) && std::stoi(first) > 0 && std::stoi(first) < 65536)
      t.reserved_port = std::stoi(first);
  }
  return std::optional<SlurmTask>(t);
}

int slurm_master_port(const SlurmTask& t) {
  if (t.reserved_port > 0) return t.reserved_port;
  // 20000..59999, distinct for the steps of one job that run at the same time.
  return 20000 + static_cast<int>((t.job_id * 97 + t.step_id) % 40000);
}

}  // namespace ckpt
