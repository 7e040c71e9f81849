// What the CLI says when a command line goes wrong before any command runs: no command at all
// (the list of commands), a command that does not exist and an option the command does not have,
// each with the closest names ("did you mean 'verify'?", base/close_names.h). All are usage
// errors (exit 2).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ckpt {

// Where the command word is in `args` (argv[1..], cut at the first `--`): the first argument that
// is neither a top-level option of `app` nor its value. npos when there is none.
size_t command_word_position(const CLI::App& app, const std::vector<std::string>& args);

// "unknown command 'verfy'; did you mean 'verify'?" or "" when `word` names one of `app`'s
// subcommands.
std::string unknown_command_message(const CLI::App& app, const std::string& word);

// The first option in `args` (what follows the command word) that neither `command` nor `app`
// has, as "unknown option '--save-a'; did you mean '--save-at'?"; "" when every option is known.
// An argument that follows an option taking a value is that value, never an option.
std::string unknown_option_message(const CLI::App& app, const CLI::App& command,
                                   const std::vector<std::string>& args);

}  // namespace ckpt
