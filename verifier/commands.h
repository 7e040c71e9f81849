// The subcommands of the CLI. Each lives in its own file as a Command; commands.cpp lists them.
// A command binds its flags to its own members in add_to() and does its work in run(), which
// returns the process exit code. Exit codes are an API:
#pragma once

#include <memory>
#include <vector>

namespace CLI {
class App;
}

namespace ckpt {

constexpr int kExitOk = 0;           // every check passed
constexpr int kExitCheckFailed = 1;  // a checkpoint (or drill, or diff) failed a check
constexpr int kExitUsage = 2;        // bad flags, bad config, unreadable path, I/O error

class Command {
 public:
  virtual ~Command() = default;
  virtual CLI::App* add_to(CLI::App& app) = 0;
  virtual int run() = 0;
};

std::vector<std::unique_ptr<Command>> all_commands();

}  // namespace ckpt
