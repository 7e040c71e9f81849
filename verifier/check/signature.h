// Ed25519 signatures over a checkpoint's exact manifest bytes (OpenSSL EVP_PKEY_ED25519).
//
// Why a signature: every shard's SHA-256 is in the manifest, so hashes alone catch accidental
// damage but not someone who rewrites a shard and the manifest together. A signature by a key the
// attacker lacks closes that gap: it covers the manifest bytes, which cover every shard.
//
// `manifest.json.sig` is the only file ever added to a committed checkpoint directory. That is
// safe for the commit protocol (shards/checkpoint_dir.h) because the signature is optional (a
// checkpoint without one is still committed and resumable), is written atomically (temp + rename,
// so it is either absent or whole), and is only ever checked against the manifest bytes, so a
// stale or forged one can make `verify --pubkey` fail but can never make bad data pass.
#pragma once

#include <string>

#include "base/status.h"
#include "verifier/check/verify_report.h"

namespace ckpt {

constexpr const char* kSignatureFileName = "manifest.json.sig";

// Signs `message` with the PEM private key at `private_key_path`; returns the 64-byte signature.
Result<std::string> sign_message(const std::string& private_key_path, const std::string& message);
// kOk if `signature` is a valid Ed25519 signature of `message` under the PEM public key;
// kCorruption if it is not; kInvalidArgument/kIoError if the key cannot be read or is not Ed25519.
Status verify_message(const std::string& public_key_path, const std::string& message,
                      const std::string& signature);
// Checks that the key file holds an Ed25519 public key (so a bad --pubkey is a usage error).
Status check_public_key(const std::string& public_key_path);
// Checks that the key file holds an Ed25519 private key: a seal that is to be signed is not written
// until the key is known to sign (a seal is never replaced, so a failed signing would leave it unsigned).
Status check_private_key(const std::string& private_key_path);

// Writes a fresh key pair as PEM files (private file mode 0600). Used by tests and key setup.
Status write_ed25519_key_pair(const std::string& private_key_path, const std::string& public_key_path);

// Signature file contents: "ed25519 <128 hex digits>\n".
std::string encode_signature_file(const std::string& signature);
Result<std::string> decode_signature_file(const std::string& text, const std::string& where);

// Signs the bytes of `path` (a manifest or a seal, at most 256 MiB) and writes `<path>.sig`
// atomically next to it.
Status sign_file(const std::string& path, const std::string& private_key_path);

// Signs `checkpoint_dir/manifest.json` and writes `manifest.json.sig` atomically next to it.
Status sign_checkpoint(const std::string& checkpoint_dir, const std::string& private_key_path);

// `verify --pubkey`: adds signature_missing when `signature_path` is absent and signature_invalid
// when it is malformed or does not verify `message` (the signed file's bytes) under the key.
void check_detached_signature(const std::string& signature_path, const std::string& message,
                              const std::string& public_key_path, VerifyReport& report);

}  // namespace ckpt
