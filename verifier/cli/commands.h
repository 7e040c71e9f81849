// The subcommands of the CLI. Each lives in its own file as a Command; commands.cpp lists them.
// A command binds its flags to its own members in add_to() and does its work in run(), which
// returns the process exit code (verifier/cli/exit_codes.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "verifier/cli/exit_codes.h"

namespace CLI {
class App;
}

namespace ckpt {

class Command {
 public:
  virtual ~Command() = default;
  virtual CLI::App* add_to(CLI::App& app) = 0;
  virtual int run() = 0;
  // The program after `--` (drill, launch). main() cuts it off before CLI11 parses the rest: the
  // program's own options, and a second `--` inside it, are never read as ours. False: this
  // command runs no program.
  virtual bool take_program(const std::vector<std::string>& /*program*/) { return false; }
};

std::vector<std::unique_ptr<Command>> all_commands();

}  // namespace ckpt
