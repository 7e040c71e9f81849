// `ckptcheck sign CKPT --key private.pem`: writes CKPT/manifest.json.sig, an Ed25519 signature
// over the exact manifest bytes (why that is safe in a committed dir: verifier/check/signature.h).
// A path with no manifest but a seal (`ckptcheck seal`) gets its seal signed: `<seal>.sig`.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/file_io.h"
#include "shards/checkpoint_dir.h"
#include "shards/manifest.h"
#include "verifier/check/checkpoint_kind.h"
#include "verifier/check/seal.h"
#include "verifier/check/signature.h"
#include "verifier/cli/commands.h"

namespace ckpt {
namespace {

class SignCommand : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    CLI::App* sub = app.add_subcommand(
        "sign", "Sign a committed checkpoint's manifest (or a sealed checkpoint's seal) with an Ed25519 key");
    sub->add_option("checkpoint", path_, "checkpoint dir, or a root (signs its latest checkpoint)")
        ->required();
    sub->add_option("--key", key_path_, "PEM Ed25519 private key")->required();
    return sub;
  }

  int run() override {
    // The seal `seal` wrote for this path: where its layout says (a sharded index's: its folder's).
    const std::string seal = seal_path_for(seal_subject(path_));
    if (!path_exists(path_ + "/" + kManifestFileName) && path_exists(seal)) {
      Status status = sign_file(seal, key_path_);
      if (!status.is_ok()) return failed(status);
      std::printf("signed %s.sig\n", seal.c_str());
      return kExitOk;
    }
    auto dir = resolve_checkpoint_path(path_);
    if (!dir.is_ok() && detect_checkpoint_kind(path_) != CheckpointKind::kCkptcheck) {
      // Another kind, not sealed yet: its seal is what a signature covers.
      return failed(Status::not_found(path_ + ": no seal to sign (" + seal +
                                      " is missing): run `ckptcheck seal " + seal_subject(path_) +
                                      "` first, then sign"));
    }
    Status status = dir.is_ok() ? sign_checkpoint(*dir, key_path_) : dir.status();
    if (!status.is_ok()) return failed(status);
    std::printf("signed %s/%s\n", dir->c_str(), kSignatureFileName);
    return kExitOk;
  }

 private:
  static int failed(const Status& status) {
    std::fprintf(stderr, "ckptcheck sign: %s\n", status.to_string().c_str());
    return kExitUsage;
  }

  std::string path_;
  std::string key_path_;
};

}  // namespace

std::unique_ptr<Command> make_sign_command() {
  return std::make_unique<SignCommand>();
}

}  // namespace ckpt
