#include "verifier/check/signature.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>

#include "base/file_io.h"
#include "base/sha256.h"
#include "shards/manifest.h"
#include "verifier/check/checkpoint_verifier.h"

namespace ckpt {

namespace {

constexpr size_t kSignatureBytes = 64;
constexpr const char* kSignaturePrefix = "ed25519 ";
constexpr uint64_t kMaxKeyFileBytes = 64 << 10;

struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;

std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

Result<Key> load_key(const std::string& path, bool is_private) {
  CKPT_ASSIGN_OR_RETURN(std::string pem, read_small_file(path, kMaxKeyFileBytes));
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return Status::io_error(path + ": " + openssl_error());
  Key key(is_private ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                     : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    return Status::invalid_argument(path + ": not a PEM " + (is_private ? "private" : "public") +
                                    " key: " + openssl_error());
  }
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) {
    return Status::invalid_argument(path + ": key is not Ed25519 (type " +
                                    std::to_string(EVP_PKEY_id(key.get())) + ")");
  }
  return key;
}

Status write_pem(const std::string& path, Key& key, bool is_private) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new(BIO_s_mem()));
  const int written =
      is_private ? PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr)
                 : PEM_write_bio_PUBKEY(bio.get(), key.get());
  if (written != 1) return Status::io_error(path + ": cannot encode key: " + openssl_error());
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  // A private key must never exist world-readable, not even between create and chmod.
  const mode_t old_mask = ::umask(is_private ? 077 : 022);
  Status status = write_file_atomically(path, std::string(data, static_cast<size_t>(size)));
  ::umask(old_mask);
  return status;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Result<std::string> sign_message(const std::string& private_key_path, const std::string& message) {
  CKPT_ASSIGN_OR_RETURN(Key key, load_key(private_key_path, /*is_private=*/true));
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  // Ed25519 is a one-shot scheme: no digest is named, the whole message goes to DigestSign.
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return Status::io_error(private_key_path + ": cannot start signing: " + openssl_error());
  }
  std::string signature(kSignatureBytes, '\0');
  size_t length = signature.size();
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      length != kSignatureBytes) {
    return Status::io_error(private_key_path + ": signing failed: " + openssl_error());
  }
  return signature;
}

Status check_public_key(const std::string& public_key_path) {
  return load_key(public_key_path, /*is_private=*/false).status();
}

Status check_private_key(const std::string& private_key_path) {
  return load_key(private_key_path, /*is_private=*/true).status();
}

Status verify_message(const std::string& public_key_path, const std::string& message,
                      const std::string& signature) {
  CKPT_ASSIGN_OR_RETURN(Key key, load_key(public_key_path, /*is_private=*/false));
  if (signature.size() != kSignatureBytes) {
    return Status::corruption("signature has " + std::to_string(signature.size()) + " bytes, expected " +
                              std::to_string(kSignatureBytes));
  }
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return Status::io_error(public_key_path + ": cannot start verification: " + openssl_error());
  }
  const int verdict =
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size());
  ERR_clear_error();
  if (verdict != 1)
    return Status::corruption(
        "Ed25519 signature does not match the signed bytes (a manifest or seal) under " + public_key_path);
  return Status::ok();
}

Status write_ed25519_key_pair(const std::string& private_key_path, const std::string& public_key_path) {
  EVP_PKEY* raw = nullptr;
  std::unique_ptr<EVP_PKEY_CTX, void (*)(EVP_PKEY_CTX*)> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr),
                                                             EVP_PKEY_CTX_free);
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return Status::io_error("Ed25519 key generation failed: " + openssl_error());
  }
  Key key(raw);
  CKPT_RETURN_IF_ERROR(write_pem(private_key_path, key, /*is_private=*/true));
  return write_pem(public_key_path, key, /*is_private=*/false);
}

std::string encode_signature_file(const std::string& signature) {
  return kSignaturePrefix + to_hex(reinterpret_cast<const uint8_t*>(signature.data()), signature.size()) +
         "\n";
}

Result<std::string> decode_signature_file(const std::string& text, const std::string& where) {
  const std::string prefix = kSignaturePrefix;
  const size_t hex_len = 2 * kSignatureBytes;
  if (text.size() != prefix.size() + hex_len + 1 || text.compare(0, prefix.size(), prefix) != 0 ||
      text.back() != '\n') {
    return Status::corruption(where + ": expected \"ed25519 <" + std::to_string(hex_len) +
                              " hex digits>\\n\", got " + std::to_string(text.size()) +
                              " bytes of something else");
  }
  std::string signature(kSignatureBytes, '\0');
  for (size_t i = 0; i < kSignatureBytes; ++i) {
    const int hi = hex_value(text[prefix.size() + 2 * i]);
    const int lo = hex_value(text[prefix.size() + 2 * i + 1]);
    if (hi < 0 || lo < 0)
      return Status::corruption(where + ": non-hex digit at byte " + std::to_string(prefix.size() + 2 * i));
    signature[i] = static_cast<char>(hi * 16 + lo);
  }
  return signature;
}

Status sign_file(const std::string& path, const std::string& private_key_path) {
  CKPT_ASSIGN_OR_RETURN(std::string bytes, read_small_file(path, kMaxManifestBytes));
  CKPT_ASSIGN_OR_RETURN(std::string signature, sign_message(private_key_path, bytes));
  return write_file_atomically(path + ".sig", encode_signature_file(signature));
}

Status sign_checkpoint(const std::string& checkpoint_dir, const std::string& private_key_path) {
  const std::string manifest_path = checkpoint_dir + "/" + kManifestFileName;
  if (!is_regular_file(manifest_path)) {
    return Status::invalid_argument(checkpoint_dir +
                                    ": has no manifest.json; only committed checkpoints are signed");
  }
  return sign_file(manifest_path, private_key_path);
}

void check_detached_signature(const std::string& signature_path, const std::string& message,
                              const std::string& public_key_path, VerifyReport& report) {
  if (!path_exists(signature_path)) {
    report.add_error(verify_code::kSignatureMissing, "", "",
                     signature_path + ": no signature, but --pubkey was given");
    return;
  }
  auto text = read_small_file(signature_path, 4096);
  if (!text.is_ok()) {
    report.add_error(verify_code::kSignatureInvalid, "", "", text.status().message());
    return;
  }
  auto signature = decode_signature_file(*text, signature_path);
  if (!signature.is_ok()) {
    report.add_error(verify_code::kSignatureInvalid, "", "", signature.status().message());
    return;
  }
  Status verdict = verify_message(public_key_path, message, *signature);
  if (!verdict.is_ok())
    report.add_error(verify_code::kSignatureInvalid, "", "", signature_path + ": " + verdict.message());
}

}  // namespace ckpt
