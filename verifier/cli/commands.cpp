#include "verifier/cli/commands.h"

namespace ckpt {

// One factory per command, defined in that command's own file.
std::unique_ptr<Command> make_train_command();
std::unique_ptr<Command> make_train_handoff_command();
std::unique_ptr<Command> make_drill_command();
std::unique_ptr<Command> make_launch_command();
std::unique_ptr<Command> make_verify_command();
std::unique_ptr<Command> make_sign_command();
std::unique_ptr<Command> make_seal_command();
std::unique_ptr<Command> make_inspect_command();
std::unique_ptr<Command> make_diff_command();
std::unique_ptr<Command> make_convert_command();
std::unique_ptr<Command> make_pin_command();
std::unique_ptr<Command> make_plan_command();
std::unique_ptr<Command> make_pilot_command();

std::vector<std::unique_ptr<Command>> all_commands() {
  std::vector<std::unique_ptr<Command>> commands;
#ifdef CKPTCHECK_TRAINING_BINARY
  commands.push_back(make_train_command());
#else
  commands.push_back(make_train_handoff_command());
  commands.push_back(make_drill_command());
  commands.push_back(make_launch_command());
  commands.push_back(make_verify_command());
  commands.push_back(make_seal_command());
  commands.push_back(make_sign_command());
  commands.push_back(make_inspect_command());
  commands.push_back(make_diff_command());
  commands.push_back(make_convert_command());
  commands.push_back(make_pin_command());
  commands.push_back(make_plan_command());
  commands.push_back(make_pilot_command());
#endif
  return commands;
}

}  // namespace ckpt
