// `ckptcheck sign CKPT --key private.pem`: writes CKPT/manifest.json.sig, an Ed25519 signature
// over the exact manifest bytes (why that is safe in a committed dir: verifier/signature.h).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "shards/checkpoint_dir.h"
#include "verifier/check/signature.h"
#include "verifier/cli/commands.h"

namespace ckpt {
namespace {

class SignCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand("sign", "Sign a committed checkpoint's manifest with an Ed25519 key");
    sub->add_option("checkpoint", path_, "checkpoint dir, or a root (signs its latest checkpoint)")
        ->required();
    sub->add_option("--key", key_path_, "PEM Ed25519 private key")->required();
    return sub;
  }

  int run() override {
    auto dir = resolve_checkpoint_path(path_);
    Status status = dir.is_ok() ? sign_checkpoint(*dir, key_path_) : dir.status();
    if (!status.is_ok()) {
      std::fprintf(stderr, "ckptcheck sign: %s\n", status.to_string().c_str());
      return kExitUsage;
    }
    std::printf("signed %s/%s\n", dir->c_str(), kSignatureFileName);
    return kExitOk;
  }

 private:
  std::string path_;
  std::string key_path_;
};

}  // namespace

std::unique_ptr<Command> make_sign_command() {
  return std::make_unique<SignCommand>();
}

}  // namespace ckpt
