// The accelerators, pipeline defaults and reservation options `ckptcheck plan` weighs
// (fixtures/hardware.yaml documents every field and which numbers are assumptions).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

struct Accelerator {
  std::string name;
  double memory_bytes = 0;
  double runtime_overhead_bytes = 0;
  double relative_speed = 1;  // an assumption until a pilot is measured on this hardware
  double usd_per_gpu_hour = 0;
  // All-reduce bus bandwidth between the accelerators of one node (bytes/s per rank, as
  // nccl-tests reports busbw); 0 when the catalog does not say: scaling is then not modelled.
  double allreduce_bus_bytes_per_second = 0;
  std::string note;
};

struct PipelineHours {
  double download = 0;
  double preprocess = 0;
  double validation = 0;
  double export_model = 0;
  double copy_out = 0;
};

struct Reservation {
  std::string name;
  double hours = 0;
  int gpus = 8;
  double price_multiplier = 1;
};

struct HardwareCatalog {
  int gpus_per_node = 8;
  // The same across nodes (the network), for worlds larger than one node; 0 when unknown.
  double internode_allreduce_bus_bytes_per_second = 0;
  std::vector<Accelerator> accelerators;
  PipelineHours pipeline;
  std::vector<Reservation> reservations;  // sorted by hours, shortest first
};

// Errors are kInvalidArgument naming the file and key: "hardware.yaml: accelerators[1].memory_bytes:
// expected a number > 0".
Result<HardwareCatalog> parse_hardware_catalog(const std::string& yaml_text, const std::string& where);
Result<HardwareCatalog> load_hardware_catalog(const std::string& path);

// Where `plan` looks for the catalog when --catalog is not given, in this order: the installed
// copy beside the binary's prefix (<exe dir>/../share/ckptcheck/hardware.yaml, what the .deb
// ships), the source tree of a build dir inside it (<exe dir>/../fixtures/hardware.yaml), and
// fixtures/hardware.yaml under the working directory.
std::vector<std::string> hardware_catalog_candidates(const std::string& executable);
// The first candidate that is a regular file; kNotFound naming every place looked at.
Result<std::string> find_hardware_catalog(const std::vector<std::string>& candidates);

}  // namespace ckpt
