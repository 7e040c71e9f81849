// CRC-32 (ISO-HDLC: the zip, gzip and PNG polynomial, reflected), the checksum of every torch.save
// zip member. `inspect` and `verify` check it on every byte of a foreign file, so it must run near
// memory speed: with PCLMULQDQ (every x86-64 CPU since 2010) it folds 64 bytes per step, else it
// falls back to slicing-by-8 tables.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ckpt {

// The CRC continued from `crc` (0 to start) over `size` more bytes.
uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t size);

// The table-driven path alone, whatever the CPU: the reference the fast path is tested against.
uint32_t crc32_update_portable(uint32_t crc, const uint8_t* data, size_t size);

}  // namespace ckpt
