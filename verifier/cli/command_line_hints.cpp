#include "verifier/cli/command_line_hints.h"

#include <CLI/CLI.hpp>
#include <cctype>

#include "base/close_names.h"

namespace ckpt {

namespace {

// Every spelling of every visible or hidden option of `app` ("--save-at", "-h").
std::vector<std::string> option_spellings(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// The option an argument names ("--save-at=4" -> "--save-at"); "" for a positional or "-"/"--".
std::string option_name_of(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "--") return "";
  if (arg[1] != '-' && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.')) return "";  // -1
  return arg.substr(0, arg.find('='));
}

const CLI::Option* find_option(const CLI::App& app, const CLI::App& command, const std::string& name) {
  if (const CLI::Option* o = command.get_option_no_throw(name)) return o;
  return app.get_option_no_throw(name);
}

bool takes_value(const CLI::Option& opt) {
  return opt.get_type_size_max() != 0 && opt.get_expected_min() > 0;
}

}  // namespace

size_t command_word_position(const CLI::App& app, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = option_name_of(args[i]);
    if (name.empty()) return i;
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt && takes_value(*opt) && args[i].find('=') == std::string::npos) ++i;
  }
  return std::string::npos;
}

std::string unknown_command_message(const CLI::App& app, const std::string& word) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return "";
    names.push_back(sub->get_name());
  }
  return "unknown command '" + word + "'" + did_you_mean(close_names(word, names, 2));
}

std::string unknown_option_message(const CLI::App& app, const CLI::App& command,
                                   const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = option_name_of(args[i]);
    if (name.empty()) continue;
    const CLI::Option* opt = find_option(app, command, name);
    if (!opt) {
      std::vector<std::string> known = option_spellings(command);
      for (const std::string& n : option_spellings(app)) known.push_back(n);
      return "unknown option '" + name + "'" + did_you_mean(close_names(name, known, 2));
    }
    if (takes_value(*opt) && args[i].find('=') == std::string::npos) ++i;
  }
  return "";
}

}  // namespace ckpt
