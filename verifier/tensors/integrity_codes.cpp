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

std::vector<size_t> chunks_in_damaged_members(const TensorFile& file) {
  std::vector<size_t> out;
  const auto ranges = file.damaged_ranges();
  for (size_t i = 0; i < file.chunks().size(); ++i) {
    const ChunkInfo& c = file.chunks()[i];
    for (const auto& [begin, end] : ranges) {
      if (c.data_bytes > 0 && c.data_offset >= begin && c.data_offset < end) {
        out.push_back(i);
        break;
      }
    }
  }
  return out;
}

std::string damaged_tensor_list(const std::vector<std::string>& tensors) {
  constexpr size_t kListed = 8;
  std::string names;
  for (size_t k = 0; k < tensors.size() && k < kListed; ++k) names += (k ? ", " : "") + tensors[k];
  if (tensors.size() > kListed) names += " and " + std::to_string(tensors.size() - kListed) + " more";
  return names;
}

std::string container_finding_message(const std::string& message, const std::vector<std::string>& tensors) {
  if (tensors.empty()) return message;
  return message + "; it holds tensor" + (tensors.size() > 1 ? "s " : " ") + damaged_tensor_list(tensors);
}

}  // namespace ckpt
