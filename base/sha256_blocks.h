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

namespace ckpt {

// Which code compresses blocks: picked once from the CPU, overridable for tests.
enum class Sha256Kernel {
  kShaExtensions,  // x86 SHA-NI, two streams interleaved
  kOpenSsl,        // OpenSSL's block function (whatever it picks for this CPU), one stream at a time
};

bool cpu_has_sha_extensions();
Sha256Kernel active_sha256_kernel();
const char* sha256_kernel_name(Sha256Kernel kernel);
// Tests run every kernel the CPU has; kShaExtensions on a CPU without them is refused (false).
bool use_sha256_kernel(Sha256Kernel kernel);

// state: the eight working words a..h in host order. Compresses `blocks` consecutive blocks.
void sha256_blocks(uint32_t state[8], const uint8_t* data, size_t blocks);
// The same for two independent streams of equal block count, interleaved.
void sha256_blocks_two(uint32_t state_a[8], const uint8_t* data_a, uint32_t state_b[8], const uint8_t* data_b,
                       size_t blocks);

}  // namespace ckpt
