// Differential fuzzing of our SHA-256 against OpenSSL's EVP digest. Our kernels, the partial-block
// bookkeeping and the batch's pairing of different hashers are on the trust path (manifests that
// signatures cover carry these digests), and a wrong digest is silent, so any disagreement aborts
// and libFuzzer keeps the input.
//
// The input is: one byte choosing the kernel (SHA-NI where the CPU has it, else OpenSSL's block
// function), up to 256 control bytes (how the message is cut, which hasher gets the next piece,
// when a batch runs), then the message. Each input is hashed
//   - by one hasher in pieces of the sizes the control bytes say;
//   - by two hashers at once (sha256_update_two): the message and its tail from a chosen offset,
//     each cut its own way, so the partial blocks on the two sides differ; and one hasher passed
//     as both;
//   - by two to five hashers over chosen ranges of the message, their pieces queued interleaved in
//     two batches (Sha256Batch) that run at chosen points; a hasher queued in one batch must be
//     refused by the other until its batch ran.
#include <fuzzer/FuzzedDataProvider.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/sha256_batch.h"
#include "base/sha256_blocks.h"

namespace {

using ckpt::Sha256;
using ckpt::Sha256Batch;

[[noreturn]] void mismatch(const char* what, const std::string& got, const std::string& want) {
  std::fprintf(stderr, "sha256_fuzz: %s (kernel %s): got %s, OpenSSL EVP says %s\n", what,
               ckpt::sha256_kernel_name(ckpt::active_sha256_kernel()), got.c_str(), want.c_str());
  std::abort();
}

std::string reference_hex(const uint8_t* data, size_t size) {
  uint8_t digest[32];
  unsigned int len = 0;
  if (!EVP_Digest(data, size, digest, &len, EVP_sha256(), nullptr)) std::abort();
  return ckpt::to_hex(digest, len);
}

void expect_digest(const char* what, Sha256& hasher, const uint8_t* data, size_t size) {
  const std::string got = hasher.finish_hex();
  const std::string want = reference_hex(data, size);
  if (got != want) mismatch(what, got, want);
}

// The control bytes, read in a cycle (a fixed default when there are none).
class Controls {
 public:
  explicit Controls(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  uint8_t next() { return bytes_.empty() ? 77 : bytes_[at_++ % bytes_.size()]; }
  size_t next16() { return next() | (size_t{next()} << 8); }
  // A piece of at most `left` bytes: mostly under three blocks (partial-block paths), sometimes
  // up to ~4 KiB (runs of whole blocks). Every fourth empty piece drawn for a stream with bytes
  // left is made 64 bytes, so cutting always ends (counting a finished stream's draws too could
  // hand every forced piece to it, and the other would never move).
  size_t piece(size_t left) {
    const uint8_t b = next();
    if (left == 0) return 0;
    size_t n = b < 192 ? b : size_t{b - 191u} * 64 + b % 7;
    if (n == 0 && (++empty_ & 3) == 0) n = 64;
    return std::min(n, left);
  }

 private:
  std::vector<uint8_t> bytes_;
  size_t at_ = 0;
  unsigned empty_ = 0;
};

void one_hasher_in_pieces(Controls& c, const std::vector<uint8_t>& m) {
  Sha256 h;
  for (size_t at = 0; at < m.size();) {
    const size_t n = c.piece(m.size() - at);
    h.update(m.data() + at, n);
    at += n;
  }
  expect_digest("one hasher, pieces", h, m.data(), m.size());
}

void two_streams_at_once(Controls& c, const std::vector<uint8_t>& m) {
  const size_t offset = m.empty() ? 0 : c.next16() % (m.size() + 1);
  const uint8_t* a = m.data();
  const uint8_t* b = m.data() + offset;
  const size_t a_size = m.size();
  const size_t b_size = m.size() - offset;
  Sha256 ha;
  Sha256 hb;
  Sha256 both;  // one hasher as both streams: a's piece, then b's
  std::vector<uint8_t> both_fed;
  for (size_t at_a = 0, at_b = 0; at_a < a_size || at_b < b_size;) {
    const size_t na = c.piece(a_size - at_a);
    const size_t nb = c.piece(b_size - at_b);
    sha256_update_two(ha, a + at_a, na, hb, b + at_b, nb);
    sha256_update_two(both, a + at_a, na, both, b + at_b, nb);
    both_fed.insert(both_fed.end(), a + at_a, a + at_a + na);
    both_fed.insert(both_fed.end(), b + at_b, b + at_b + nb);
    at_a += na;
    at_b += nb;
  }
  expect_digest("two streams, first", ha, a, a_size);
  expect_digest("two streams, second", hb, b, b_size);
  expect_digest("one hasher passed as both streams", both, both_fed.data(), both_fed.size());
}

void hashers_in_batches(Controls& c, const std::vector<uint8_t>& m) {
  const size_t count = 2 + c.next() % 4;
  std::vector<std::unique_ptr<Sha256>> hashers;
  std::vector<size_t> begin(count);
  std::vector<size_t> end(count);
  std::vector<size_t> at(count);
  for (size_t i = 0; i < count; ++i) {
    hashers.push_back(std::make_unique<Sha256>());
    begin[i] = at[i] = c.next16() % (m.size() + 1);
    end[i] = begin[i] + c.next16() % (m.size() - begin[i] + 1);
  }
  Sha256Batch batches[2];
  size_t current = 0;
  for (;;) {
    size_t left = 0;
    for (size_t i = 0; i < count; ++i) left += end[i] - at[i];
    if (left == 0) break;
    // The next hasher with bytes left, from a chosen start.
    size_t i = c.next() % count;
    while (at[i] == end[i]) i = (i + 1) % count;
    const size_t n = c.piece(end[i] - at[i]);
    batches[current].add(*hashers[i], m.data() + at[i], n);
    at[i] += n;
    const uint8_t decide = c.next();
    if (n > 0 && decide % 8 == 0) {
      // The other batch must refuse a hasher this one still owes bytes, and queue nothing.
      bool refused = false;
      try {
        batches[1 - current].add(*hashers[i], m.data(), 1);
      } catch (const std::logic_error&) {
        refused = true;
      }
      if (!refused) mismatch("a hasher queued in one batch was accepted by another", "accepted", "refused");
    }
    if (decide % 3 == 0) {
      batches[current].run();
      current = (decide >> 2) & 1;  // after a run, every hasher may go to either batch
    }
  }
  batches[current].run();
  for (size_t i = 0; i < count; ++i) {
    expect_digest("hasher in a batch", *hashers[i], m.data() + begin[i], end[i] - begin[i]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  const bool sha_ni = input.ConsumeBool();
  // Every kernel this CPU has; OpenSSL's where it has no SHA extensions.
  if (!ckpt::use_sha256_kernel(sha_ni ? ckpt::Sha256Kernel::kShaExtensions : ckpt::Sha256Kernel::kOpenSsl))
    ckpt::use_sha256_kernel(ckpt::Sha256Kernel::kOpenSsl);
  Controls controls(input.ConsumeBytes<uint8_t>(input.ConsumeIntegralInRange<size_t>(0, 256)));
  const std::vector<uint8_t> message = input.ConsumeRemainingBytes<uint8_t>();
  one_hasher_in_pieces(controls, message);
  two_streams_at_once(controls, message);
  hashers_in_batches(controls, message);
  return 0;
}
