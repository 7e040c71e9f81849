// ckptcheck: the thin CLI. Parses flags (CLI11), runs the chosen command, returns its exit code.
// Built twice (see CMakeLists.txt): the torch-free `ckptcheck`, and `ckptcheck-train`, which
// holds the one command that links LibTorch and to which `ckptcheck train` hands over.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "base/open_file_limit.h"
#include "base/sha256_blocks.h"
#include "verifier/cli/command_line_hints.h"
#include "verifier/cli/commands.h"
#include "verifier/cli/version.h"
#include "verifier/process/training_binary.h"

namespace {

#ifndef CKPTCHECK_TRAINING_BINARY
// Replaces this process with `ckptcheck-train` and the same arguments; returns only on failure.
int exec_training_binary(int argc, char** argv) {
  const std::string path = ckpt::training_binary_path();
  std::vector<char*> args;
  args.push_back(const_cast<char*>(path.c_str()));
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(path.c_str(), args.data());
  std::fprintf(stderr, "ckptcheck: cannot run %s: %s (it is built beside ckptcheck: make build)\n",
               path.c_str(), std::strerror(errno));
  return ckpt::kExitUsage;
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifndef CKPTCHECK_TRAINING_BINARY
  if (argc > 1 && std::strcmp(argv[1], "train") == 0) return exec_training_binary(argc, argv);
  // Not in ckptcheck-train: a training process's memory is what the pilot measures, as it is.
  ckpt::use_huge_page_heap();
  // A drill holds every checkpoint it compares open until it has compared them.
  (void)ckpt::raise_open_file_limit();
#endif
  // The SHA-256 kernel is on the trust path (signatures cover digests it computed): a value of
  // CKPTCHECK_SHA256 we do not understand is refused before anything is hashed.
  if (const ckpt::Status env = ckpt::configure_sha256_kernel_from_env(); !env.is_ok()) {
    std::fprintf(stderr, "ckptcheck: %s\n", env.message().c_str());
    return ckpt::kExitUsage;
  }
  // Named, so that usage lines say `ckptcheck` whichever binary (ckptcheck-train) or path runs.
  CLI::App app{"ckptcheck: prove a training run can be stopped and resumed", "ckptcheck"};
  app.require_subcommand(1);
  app.fallthrough();  // --sha256 may follow the subcommand too
  std::string sha256_kernel;
  app.add_option("--sha256", sha256_kernel,
                 "SHA-256 code: auto (SHA-NI when the CPU has it and it passes its self-test, else "
                 "OpenSSL) or openssl; overrides CKPTCHECK_SHA256")
      ->check(CLI::IsMember({"auto", "openssl"}));
  app.set_version_flag("--version", ckpt::version_text);

  auto commands = ckpt::all_commands();
  std::vector<std::pair<CLI::App*, ckpt::Command*>> subcommands;
  for (auto& command : commands) subcommands.emplace_back(command->add_to(app), command.get());

  // Everything after the first `--` is a program to run (drill, launch), and is not parsed here.
  int ours = 1;
  while (ours < argc && std::strcmp(argv[ours], "--") != 0) ++ours;
  const std::vector<std::string> program(argv + std::min(ours + 1, argc), argv + argc);
  const std::vector<std::string> args(argv + 1, argv + ours);
  const size_t word = ckpt::command_word_position(app, args);
  const bool asks_help_or_version = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "-h" || a == "--help" || a == "--version";
  });
  if (word == std::string::npos && !asks_help_or_version) {
    // No command: the list of them is the answer a newcomer needs, not "a subcommand is required".
    std::fprintf(stderr, "%s", app.help().c_str());
    return ckpt::kExitUsage;
  }
  if (word != std::string::npos) {
    const std::string unknown = ckpt::unknown_command_message(app, args[word]);
    if (!unknown.empty()) {
      std::fprintf(stderr, "ckptcheck: %s (`ckptcheck --help` lists the commands)\n", unknown.c_str());
      return ckpt::kExitUsage;
    }
  }
  try {
    app.parse(ours, argv);
  } catch (const CLI::ParseError& e) {
    if (word != std::string::npos && e.get_exit_code() != static_cast<int>(CLI::ExitCodes::Success)) {
      const CLI::App* command = nullptr;
      for (const auto& entry : subcommands) {
        if (entry.first->get_name() == args[word]) command = entry.first;
      }
      const std::string unknown =
          command ? ckpt::unknown_option_message(app, *command, {args.begin() + word + 1, args.end()}) : "";
      if (!unknown.empty()) {
        std::fprintf(stderr, "ckptcheck %s: %s (`ckptcheck %s --help` lists its options)\n",
                     args[word].c_str(), unknown.c_str(), args[word].c_str());
        return ckpt::kExitUsage;
      }
    }
    const int rc = app.exit(e);
    return rc == 0 ? ckpt::kExitOk : ckpt::kExitUsage;
  }
  if (!sha256_kernel.empty()) {
    if (const ckpt::Status st = ckpt::select_sha256_kernel(sha256_kernel); !st.is_ok()) {
      std::fprintf(stderr, "ckptcheck: %s\n", st.message().c_str());
      return ckpt::kExitUsage;
    }
  }
  try {
    for (auto& [sub, command] : subcommands) {
      if (!sub->parsed()) continue;
      if (ours < argc && !command->take_program(program)) {
        std::fprintf(stderr, "ckptcheck %s: takes no program after --\n", sub->get_name().c_str());
        return ckpt::kExitUsage;
      }
      return command->run();
    }
  } catch (const std::exception& e) {
    // Adapters catch their libraries' exceptions; this is the last line against an abort trace.
    std::fprintf(stderr, "ckptcheck: internal error: %s\n", e.what());
  }
  return ckpt::kExitUsage;
}
