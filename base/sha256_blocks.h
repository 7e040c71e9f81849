// SHA-256's compression function over whole 64-byte blocks, one stream or two side by side.
//
// Why two: with the CPU's SHA extensions one stream is bound by the latency of sha256rnds2, whose
// every step waits for the one before; a second, independent stream fills those waits. Measured
// on the 2-core AMD EPYC that runs make bench: one stream 1.7-1.9 GB/s (OpenSSL's own SHA-NI code:
// the same), two streams together 2.5-2.9 GB/s. Without the extensions both entry points use
// OpenSSL's block function, one stream after the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace ckpt {

// H(0), the state every SHA-256 stream starts from (FIPS 180-4, 5.3.3).
inline constexpr uint32_t kSha256InitialState[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

// Which code compresses blocks.
enum class Sha256Kernel {
  kShaExtensions,  // x86 SHA-NI, two streams interleaved
  kOpenSsl,        // OpenSSL's block function (whatever it picks for this CPU), one stream at a time
};

// How the kernel is chosen. Our SHA-NI code is on the trust path (signatures cover manifests that
// carry its digests), so it is used only after proving itself on this machine: the first call
// that needs a kernel (hashing, active_sha256_kernel, the description) picks one, once:
//   - CKPTCHECK_SHA256=openssl in the environment: OpenSSL's, without trying ours;
//   - unset, empty or "auto": SHA-NI when the CPU has the extensions and sha256_kernel_self_test
//     passes; on a failed self-test OpenSSL's, with one warning line on stderr
//     ("ckptcheck: warning: SHA-NI SHA-256 kernel failed its self-test (...); using OpenSSL");
//   - anything else: OpenSSL's, with one error line on stderr. A program should call
//     configure_sha256_kernel_from_env first and refuse to run on its error instead (the CLI: exit
//     2); the fallback only keeps library users that never call it on the reference code.
bool cpu_has_sha_extensions();
Sha256Kernel active_sha256_kernel();
// "sha-extensions-x2" or "openssl": names a kernel in bench results and --version.
const char* sha256_kernel_name(Sha256Kernel kernel);
// The active kernel and why it was chosen, for --version and verify --json, e.g.
// "sha-extensions-x2 (self-test passed)", "openssl (forced by CKPTCHECK_SHA256)",
// "openssl (SHA-NI self-test failed)", "openssl (CPU has no SHA extensions)". Never null; valid
// for the life of the process.
const char* active_sha256_kernel_description();

// Known-answer self-test of one kernel: the one-stream and the two-stream entry point (both
// lanes, each with a different message beside it) over fixed vectors of one to seventeen blocks,
// compared against their published or precomputed digests. OK, or the first mismatch (which
// path, which vector, the digest it got and the one it should have). kShaExtensions on a CPU
// without them: not supported. Runs in microseconds; the automatic choice runs it once a process.
Status sha256_kernel_self_test(Sha256Kernel kernel);

// Reads CKPTCHECK_SHA256 now and applies it as described above: "openssl" forces OpenSSL's kernel,
// unset, "" or "auto" makes the automatic choice. Any other value is refused (invalid argument,
// naming the variable and the accepted values) and changes nothing; nothing is printed either way
// except the self-test warning.
Status configure_sha256_kernel_from_env();
// For the CLI's --sha256 flag, which overrides the environment: "openssl" forces OpenSSL's kernel,
// "auto" makes the automatic choice (CPU, then self-test). Anything else is refused (invalid
// argument) and changes nothing.
Status select_sha256_kernel(const std::string& name);

// Tests run every kernel the CPU has; kShaExtensions on a CPU without them is refused (false).
// Bypasses the self-test: the tests are what compare that kernel with OpenSSL.
bool use_sha256_kernel(Sha256Kernel kernel);
// Test hook: while set, sha256_kernel_self_test(kShaExtensions) sees one bit of each SHA-NI
// result flipped, as a faulty kernel would give, so that the comparison, the warning and the
// fallback to OpenSSL run for real. Setting or clearing it forgets the cached self-test result,
// so the next automatic choice tests again.
void set_sha256_self_test_fault_for_testing(bool flip_a_bit);

// state: the eight working words a..h in host order. Compresses `blocks` consecutive blocks.
void sha256_blocks(uint32_t state[8], const uint8_t* data, size_t blocks);
// The same for two independent streams of equal block count, interleaved.
void sha256_blocks_two(uint32_t state_a[8], const uint8_t* data_a, uint32_t state_b[8], const uint8_t* data_b,
                       size_t blocks);

}  // namespace ckpt
