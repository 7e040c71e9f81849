// Builds stored zips in memory the way torch.save lays them out, so zip and PyTorch tests can
// make one defect at a time (a compressed entry, a bad offset, a ZIP64 end record).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "formats/zip_archive.h"

namespace ckpt {

struct ZipBuildOptions {
  bool zip64 = false;   // write ZIP64 end record + locator, with 0xffff... in the classic record
  uint16_t method = 0;  // compression method written for every entry (0 = stored)
};

inline void put_le(std::vector<uint8_t>& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

inline std::vector<uint8_t> build_zip(const std::vector<std::pair<std::string, std::string>>& entries,
                                      ZipBuildOptions opt = {}) {
  std::vector<uint8_t> out, cd;
  for (const auto& [name, data] : entries) {
    const uint64_t local = out.size();
    const uint32_t crc = crc32_update(0, reinterpret_cast<const uint8_t*>(data.data()), data.size());
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2);
    put_le(out, 0, 2);
    put_le(out, opt.method, 2);
    put_le(out, 0, 4);
    put_le(out, crc, 4);
    put_le(out, data.size(), 4);
    put_le(out, data.size(), 4);
    put_le(out, name.size(), 2);
    put_le(out, 0, 2);
    out.insert(out.end(), name.begin(), name.end());
    out.insert(out.end(), data.begin(), data.end());
    put_le(cd, 0x02014b50, 4);
    put_le(cd, 20, 2);
    put_le(cd, 20, 2);
    put_le(cd, 0, 2);
    put_le(cd, opt.method, 2);
    put_le(cd, 0, 4);
    put_le(cd, crc, 4);
    put_le(cd, data.size(), 4);
    put_le(cd, data.size(), 4);
    put_le(cd, name.size(), 2);
    put_le(cd, opt.zip64 ? 12 : 0, 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 4);
    put_le(cd, opt.zip64 ? 0xffffffff : local, 4);
    cd.insert(cd.end(), name.begin(), name.end());
    if (opt.zip64) {  // extended info carrying only the local header offset
      put_le(cd, 1, 2);
      put_le(cd, 8, 2);
      put_le(cd, local, 8);
    }
  }
  const uint64_t cd_offset = out.size();
  out.insert(out.end(), cd.begin(), cd.end());
  if (opt.zip64) {
    const uint64_t rec = out.size();
    put_le(out, 0x06064b50, 4);
    put_le(out, 44, 8);
    put_le(out, 45, 2);
    put_le(out, 45, 2);
    put_le(out, 0, 4);
    put_le(out, 0, 4);
    put_le(out, entries.size(), 8);
    put_le(out, entries.size(), 8);
    put_le(out, cd.size(), 8);
    put_le(out, cd_offset, 8);
    put_le(out, 0x07064b50, 4);
    put_le(out, 0, 4);
    put_le(out, rec, 8);
    put_le(out, 1, 4);
  }
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 2);
  put_le(out, 0, 2);
  put_le(out, opt.zip64 ? 0xffff : entries.size(), 2);
  put_le(out, opt.zip64 ? 0xffff : entries.size(), 2);
  put_le(out, opt.zip64 ? 0xffffffff : cd.size(), 4);
  put_le(out, opt.zip64 ? 0xffffffff : cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

}  // namespace ckpt
