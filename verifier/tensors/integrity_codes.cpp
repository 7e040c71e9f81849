#include "verifier/tensors/integrity_codes.h"

namespace ckpt {

std::string chunk_sha256_mismatch_message(uint64_t offset, const std::string& label,
                                          const std::string& expected, const std::string& got) {
  return "@" + std::to_string(offset) + ": sha256 mismatch for " + label + ": expected " + expected +
         " got " + got;
}

const char* container_issue_code(const Status& status) {
  return status.message().find("CRC-32 mismatch") != std::string::npos ? verify_code::kZipCrcMismatch
                                                                       : verify_code::kZipHeaderMismatch;
}

}  // namespace ckpt
