// A minimal writer of stored (method 0) zip archives, enough for a torch.save layout: the pytorch
// mutator re-packs an archive after mutating its data.pkl, and the seed generator packs generated
// pickles. CRC-32 fields are left zero: formats/zip_archive.h does not read them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/pickle_shapes.h"

namespace ckpt::fuzz {

using ZipFiles = std::vector<std::pair<std::string, std::string>>;  // name, bytes

inline std::string write_stored_zip(const ZipFiles& files) {
  std::string out, central;
  for (const auto& [name, bytes] : files) {
    const uint64_t local = out.size();
    put_le(&out, 0x04034b50, 4);
    put_le(&out, 20, 2);  // version needed
    put_le(&out, 0, 2);   // flags
    put_le(&out, 0, 2);   // method: stored
    put_le(&out, 0, 4);   // time, date
    put_le(&out, 0, 4);   // crc-32
    put_le(&out, bytes.size(), 4);
    put_le(&out, bytes.size(), 4);
    put_le(&out, name.size(), 2);
    put_le(&out, 0, 2);  // extra length
    out += name + bytes;

    put_le(&central, 0x02014b50, 4);
    put_le(&central, 20, 2);  // version made by
    put_le(&central, 20, 2);  // version needed
    put_le(&central, 0, 2);
    put_le(&central, 0, 2);
    put_le(&central, 0, 4);
    put_le(&central, 0, 4);
    put_le(&central, bytes.size(), 4);
    put_le(&central, bytes.size(), 4);
    put_le(&central, name.size(), 2);
    put_le(&central, 0, 2);  // extra
    put_le(&central, 0, 2);  // comment
    put_le(&central, 0, 2);  // disk
    put_le(&central, 0, 2);  // internal attributes
    put_le(&central, 0, 4);  // external attributes
    put_le(&central, local, 4);
    central += name;
  }
  const uint64_t central_offset = out.size();
  out += central;
  put_le(&out, 0x06054b50, 4);
  put_le(&out, 0, 4);  // disk numbers
  put_le(&out, files.size(), 2);
  put_le(&out, files.size(), 2);
  put_le(&out, central.size(), 4);
  put_le(&out, central_offset, 4);
  put_le(&out, 0, 2);  // comment length
  return out;
}

// What torch.save writes around a pickle: <archive>/data.pkl, the storages it names, version and
// byteorder. `storages` are (key, bytes).
inline std::string torch_save_zip(const std::string& pickle, const ZipFiles& storages) {
  ZipFiles files{{"archive/data.pkl", pickle}};
  for (const auto& [key, bytes] : storages) files.emplace_back("archive/data/" + key, bytes);
  files.emplace_back("archive/version", "3\n");
  files.emplace_back("archive/byteorder", "little");
  return write_stored_zip(files);
}

}  // namespace ckpt::fuzz
