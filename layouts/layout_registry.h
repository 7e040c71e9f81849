// The registry of checkpoint layouts (layouts/layout.h): what a path is, asked once for every
// command. `verify` (verifier/check/checkpoint_kind.h), `inspect`, `diff`, `convert` and the drill's
// snapshots (verifier/tensors/tensor_source.h) and the "what to pass" hints all ask detect_layout,
// so a path opens as the same checkpoint everywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "layouts/layout.h"

namespace ckpt {

// Every layout, in the order docs/verify.md lists them. The order decides nothing: detection is
// exclusive (layouts/layout.h).
const std::vector<const Layout*>& registered_layouts();
const Layout* find_layout(const std::string& name);  // null when none is registered under `name`

// Every registered layout's claim on `path` but `except`'s (trailing slashes ignored).
std::vector<LayoutMatch> layout_claims(const std::string& path, const Layout* except = nullptr);

// The one layout that claims `path`, nullopt when none does. kAmbiguous when two do, naming both
// and their evidence: which reader opens a checkpoint decides what must be there, and a guess would
// check the wrong contract.
Result<std::optional<LayoutMatch>> detect_layout(const std::string& path);

// The registered layouts, one file each.
const Layout& native_checkpoint_layout();  // layouts/native_checkpoint_layout.cpp
const Layout& single_file_layout();        // layouts/single_file_layout.cpp
const Layout& sharded_index_layout();      // layouts/sharded_index_layout.cpp
const Layout& dcp_layout();                // layouts/dcp_layout.cpp
const Layout& megatron_layout();           // layouts/megatron_layout.cpp
const Layout& hf_trainer_layout();         // layouts/hf_trainer_layout.cpp
const Layout& accelerate_layout();         // layouts/accelerate_layout.cpp
const Layout& deepspeed_layout();          // layouts/deepspeed_layout.cpp
const Layout& model_folder_layout();       // layouts/model_folder_layout.cpp
const Layout& sealed_directory_layout();   // layouts/sealed_directory_layout.cpp

// Shared by two layouts each: the files of a DCP folder, roles and loaders (layouts/dcp_layout.cpp,
// Megatron's adds its two); whether a folder holds a model folder's marker file
// (layouts/model_folder_layout.cpp; verify's nested-folder checks ask it too).
std::vector<LayoutFile> dcp_folder_files(const std::string& dir);
bool has_model_folder_marker(const std::string& dir);

}  // namespace ckpt
