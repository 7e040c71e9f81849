// DeepSpeed ZeRO's flat fp32 partitions presented as the parameters they hold, as
// deepspeed/utils/zero_to_fp32.py reassembles them, without DeepSpeed and without loading the
// partitions: each parameter is one tensor "zero_fp32/<name>" of its real shape whose bytes are read
// on demand from the ranks' optimizer-state files.
//   stage 1/2: a group's parameters are one flat buffer, in param_shapes order; rank r holds
//              [r*S, r*S + its slice) of it (S the largest slice: DeepSpeed saves each slice
//              without its padding);
//   stage 3:   each parameter is split on its own: rank r holds [r*q, (r+1)*q) of it, q = ceil(numel /
//              world), the ranks' flat groups being those pieces in param_shapes order.
// Tied parameters (the model states' shared_params) are listed under both names, the second an alias.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/tensor_file.h"

namespace ckpt {

// `rank_files[r]` is rank r's optimizer-state file (opened, kept alive by the caller); `param_shapes`
// and `shared_params` are the model states' values. kCorruption when the partitions cannot hold the
// parameters (verify's zero_partition_mismatch says why in full).
// `module_order` is the model's parameter names in its state dict's order (the model states'
// `module` tensors, pickle order): a group's flat buffer follows it, and param_shapes' own order does
// not survive its reading as JSON (a JSON object's keys are sorted).
Result<std::unique_ptr<TensorFile>> reassemble_zero_fp32(const std::vector<const TensorFile*>& rank_files,
                                                         const nlohmann::json& param_shapes,
                                                         const nlohmann::json& shared_params,
                                                         const std::vector<std::string>& module_order,
                                                         const std::string& where);

}  // namespace ckpt
