#include "verifier/check/signature.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "base/file_io.h"
#include "tests/support/training_state_fixture.h"
#include "verifier/check/checkpoint_verifier.h"

namespace ckpt {
namespace {

using namespace ckpt::testing;

struct Keys {
  Keys() {
    Status s = write_ed25519_key_pair(dir / "private.pem", dir / "public.pem");
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  std::string private_key() const { return dir / "private.pem"; }
  std::string public_key() const { return dir / "public.pem"; }
  TempDir dir;
};

VerifyReport verify_with_key(const std::string& ckpt, const std::string& pubkey) {
  VerifyOptions options;
  options.pubkey_path = pubkey;
  auto r = verify_checkpoint(ckpt, options);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : VerifyReport{};
}

TEST(Signature, SignsAndVerifiesAMessage) {
  Keys keys;
  auto sig = sign_message(keys.private_key(), "manifest bytes");
  ASSERT_TRUE(sig.is_ok()) << sig.status().to_string();
  EXPECT_EQ(sig->size(), 64u);
  EXPECT_TRUE(verify_message(keys.public_key(), "manifest bytes", *sig).is_ok());
  EXPECT_EQ(verify_message(keys.public_key(), "manifest bytez", *sig).code(), StatusCode::kCorruption);
  std::string flipped = *sig;
  flipped[10] ^= 1;
  EXPECT_EQ(verify_message(keys.public_key(), "manifest bytes", flipped).code(), StatusCode::kCorruption);
}

TEST(Signature, PrivateKeyFileIsOwnerOnly) {
  Keys keys;
  struct stat st {};
  ASSERT_EQ(::stat(keys.private_key().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
}

TEST(Signature, AnotherKeyDoesNotVerify) {
  Keys a, b;
  auto sig = sign_message(a.private_key(), "m");
  ASSERT_TRUE(sig.is_ok());
  EXPECT_EQ(verify_message(b.public_key(), "m", *sig).code(), StatusCode::kCorruption);
}

TEST(Signature, NonEd25519OrGarbageKeyIsAUsageError) {
  TempDir dir;
  ASSERT_TRUE(
      write_file_atomically(dir / "junk.pem", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
          .is_ok());
  EXPECT_EQ(check_public_key(dir / "junk.pem").code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(check_public_key(dir / "absent.pem").is_ok());
}

TEST(Signature, SignatureFileRoundTripsAndRejectsMalformedText) {
  const std::string sig(64, '\x5a');
  auto decoded = decode_signature_file(encode_signature_file(sig), "sig");
  ASSERT_TRUE(decoded.is_ok());
  EXPECT_EQ(*decoded, sig);
  EXPECT_FALSE(decode_signature_file("ed25519 zz\n", "sig").is_ok());
  std::string bad = encode_signature_file(sig);
  bad[20] = 'x';
  EXPECT_FALSE(decode_signature_file(bad, "sig").is_ok());
}

class SignedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = save_training_state(root_.path(), full_training_state());
    Status s = sign_checkpoint(dir_, keys_.private_key());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  TempDir root_;
  Keys keys_;
  std::string dir_;
};

TEST_F(SignedCheckpointTest, SignedCheckpointPassesWithNoWarnings) {
  const VerifyReport r = verify_with_key(dir_, keys_.public_key());
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.size();  // the .sig is not an unlisted file
}

TEST_F(SignedCheckpointTest, MissingSignature) {
  ASSERT_EQ(::unlink((dir_ + "/" + kSignatureFileName).c_str()), 0);
  const VerifyReport r = verify_with_key(dir_, keys_.public_key());
  EXPECT_TRUE(r.has_error(verify_code::kSignatureMissing));
  EXPECT_TRUE(verify_with_key(dir_, "").ok());  // without --pubkey a signature is optional
}

TEST_F(SignedCheckpointTest, WrongKeyIsInvalid) {
  Keys other;
  EXPECT_TRUE(verify_with_key(dir_, other.public_key()).has_error(verify_code::kSignatureInvalid));
}

TEST_F(SignedCheckpointTest, MalformedSignatureFileIsInvalid) {
  write_file_bytes(dir_ + "/" + kSignatureFileName, {'n', 'o', '\n'});
  EXPECT_TRUE(verify_with_key(dir_, keys_.public_key()).has_error(verify_code::kSignatureInvalid));
}

TEST_F(SignedCheckpointTest, ShardAndManifestRewrittenTogetherAreCaught) {
  // The attacker writes a consistent checkpoint with different weights and copies it over the
  // signed one: every hash matches, only the signature can tell.
  TempDir elsewhere;
  auto state = full_training_state();
  find_state_tensor(state, "model.blocks.0.w")->bytes[17] ^= 0x40;
  const std::string forged = save_training_state(elsewhere.path(), state);
  for (const auto& s : read_fixture_manifest(forged).shards) {
    write_file_bytes(dir_ + "/" + s.path, read_file_bytes(forged + "/" + s.path));
  }
  write_file_bytes(dir_ + "/manifest.json", read_file_bytes(forged + "/manifest.json"));
  EXPECT_TRUE(verify_with_key(dir_, "").ok());
  const VerifyReport r = verify_with_key(dir_, keys_.public_key());
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.has_error(verify_code::kSignatureInvalid));
}

TEST(SignCheckpoint, RefusesAnUncommittedDirectory) {
  Keys keys;
  TempDir dir;
  EXPECT_EQ(sign_checkpoint(dir.path(), keys.private_key()).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ckpt
