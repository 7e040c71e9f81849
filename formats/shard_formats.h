// The shard formats a checkpoint can be written in, by the name used in `--format` and in the
// manifest's shard entries.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "formats/shard_file_writer.h"
#include "formats/tensor_file.h"

namespace ckpt {

using ShardFileOpener = Result<std::unique_ptr<TensorFile>> (*)(const std::string& path);

struct ShardFormat {
  const char* name;       // "native"
  const char* extension;  // ".cks"
  ShardFileWriter write;
  ShardFileOpener open;
};

const ShardFormat* find_shard_format(const std::string& name);
std::vector<std::string> shard_format_names();

}  // namespace ckpt
