// The step a checkpoint's own values say it holds, read one way everywhere: `verify` reports and
// judges it (a single file's step against its optimizer and scheduler), `diff` leads with it when two
// sides differ, `convert` carries it into the new checkpoint.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

namespace ckpt {

// A manifest's `step`, or a file's top-level `global_step` (HF), `step` (plain loops, Lightning's
// own key is `global_step`) or `iteration` (Megatron), in that order; a file whose whole pickle is a
// dict holds them under "value" (formats/pickle_reader.h). nullopt when none is a number.
std::optional<double> step_of(const nlohmann::json& values);

}  // namespace ckpt
