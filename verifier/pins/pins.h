// Pins: the few hashes and version strings that say "this is the same run". A checkpoint records
// them when it is written; resuming or verifying compares them with the pins computed now
// (verifier/drift.h).
//
// Canonical JSON: every hash below is SHA-256 over nlohmann::json::dump() with no indent. nlohmann's
// default object type is a std::map, so keys come out sorted at every depth and numbers print in
// their shortest round-trip form: the same value always dumps to the same bytes.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// What a pin is computed from, decoupled from PilotConfig so the arithmetic can be tested on
// hand-made JSON and so a manifest's stored config can be re-pinned.
struct PinInputs {
  nlohmann::json resolved_config;       // the run's whole config, defaults filled in
  nlohmann::json model;                 // architecture, model hyperparameters, seed, seq_len
  std::string initial_weights;          // a file whose bytes initialise the model; "" when none
  std::vector<std::string> data_files;  // every file the data pipeline reads
  nlohmann::json preprocessing;         // eval_fraction, shuffle_seed, seq_len
  nlohmann::json seeds;                 // every seed, by its config key
  int threads = 1;
};

// Facts about the LibTorch this build links its training program against (what CMake's
// find_package(Torch) reported: verifier/pins/torch_build_info.h). Passed in, so tests can fake them.
struct TorchFacts {
  std::string libtorch_version;
  bool built_with_cuda = false;
};

std::string canonical_json(const nlohmann::json& value);

Result<std::string> model_revision(const PinInputs& inputs);    // reads initial_weights, if any
Result<std::string> dataset_revision(const PinInputs& inputs);  // reads every data file
std::string config_sha256(const PinInputs& inputs);
// libtorch, hdf5, zstd, openssl, yaml-cpp, compiler, libc, cuda_runtime, cuda_driver, sha256_kernel.
nlohmann::json dependency_versions(const TorchFacts& torch);

// {"model_revision", "dataset_revision", "config_sha256", "seeds", "dependencies",
//  "container_fingerprint"}. Fails only when a data or weights file cannot be read.
Result<nlohmann::json> compute_pins(const PinInputs& inputs, const TorchFacts& torch);
// This build's LibTorch facts (pins_build_info.cpp, torch-free: nothing here loads LibTorch). The
// pins of the built-in workload's config: verifier/train/config_pins.h (pins take inputs already
// resolved, so the torch-free verifier does not link the workload).
TorchFacts current_torch_facts();

// Every leaf of a pin record by its dotted name ("dependencies.libtorch"); arrays are leaves.
// Keys are joined as they are, so a library path stays whole: "container_fingerprint.inputs.
// libraries./usr/lib/libtorch_cpu.so".
std::map<std::string, nlohmann::json> pin_fields(const nlohmann::json& pins);

// One "name  value" line per pin field: what `ckptcheck pin` prints.
std::string pins_table(const nlohmann::json& pins);

}  // namespace ckpt
