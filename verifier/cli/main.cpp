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

#include "base/sha256_blocks.h"
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
#endif
  // The SHA-256 kernel is on the trust path (signatures cover digests it computed): a value of
  // CKPTCHECK_SHA256 we do not understand is refused before anything is hashed.
  if (const ckpt::Status env = ckpt::configure_sha256_kernel_from_env(); !env.is_ok()) {
    std::fprintf(stderr, "ckptcheck: %s\n", env.message().c_str());
    return ckpt::kExitUsage;
  }
  CLI::App app{"ckptcheck: prove a training run can be stopped and resumed"};
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
  try {
    app.parse(ours, argv);
  } catch (const CLI::ParseError& e) {
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
