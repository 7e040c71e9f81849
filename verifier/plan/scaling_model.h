// Data-parallel scaling: the step time at P accelerators from a measured step's parts. Pure
// arithmetic; tests check it against hand-computed cases.
//
// The model (DDP, a fixed global batch split evenly across P ranks, no overlap of communication
// with compute, which is how the built-in trainer runs: all-reduce after backward):
//
//   T(P) = C / (P * s) + O / s + D / P + A(P)
//   A(P) = 2 (P - 1) / P * G / B        (ring all-reduce of G bytes; per-hop latency neglected,
//                                        which holds while G / P is far above a few MB)
//
//   C  forward + backward of the whole global batch on one device (world 1)
//   O  optimizer step: every rank updates every parameter, so it does not shrink with P
//   D  input wait per global batch; each rank loads only its share, on the host (not scaled by s)
//   G  gradient bytes all-reduced per step; B the all-reduce bus bandwidth; s relative speed
//
// With overlap (gradient buckets reduced during backward) A(P) hides behind C / (P s) until it is
// longer: the no-overlap figure is the conservative bound, and the report says so.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace ckpt {

// One measured world size: per-step means from `train --summary` (seconds).
struct ScalingPoint {
  int world_size = 1;
  double step_seconds = 0;
  double forward_backward_seconds = 0;
  double optimizer_seconds = 0;
  double communication_seconds = 0;
  double data_wait_seconds = 0;
  bool oversubscribed = false;  // more ranks than cores: the model's one-device-per-rank premise fails
};

struct ScalingModel {
  double compute_seconds = 0;       // C
  double optimizer_seconds = 0;     // O
  double data_seconds = 0;          // D
  double gradient_bytes = 0;        // G
  double bus_bytes_per_second = 0;  // B, as calibrated
  // T(P) with the calibrated B, or with the B given (an accelerator's interconnect).
  double step_seconds(int world_size, double relative_speed = 1) const;
  double step_seconds(int world_size, double relative_speed, double bus_bytes_per_second) const;
  double allreduce_seconds(int world_size, double bus_bytes_per_second) const;
  nlohmann::json to_json() const;
};

// Ring all-reduce bytes each rank moves for a buffer of `bytes`: 2 (P - 1) / P * bytes.
double ring_allreduce_bytes(int world_size, double bytes);

// Calibrates the model: C, O, D from world 1 and B from the smallest world > 1 that is not
// oversubscribed; every other point is held out to check the model. Returns the worlds used in
// `calibrated_on`. kInvalidArgument when world 1 or a usable world > 1 is missing.
Result<ScalingModel> calibrate_scaling_model(const std::vector<ScalingPoint>& points, double gradient_bytes,
                                             std::vector<int>* calibrated_on);

// The model against every measured point: predicted and measured step and communication time,
// relative error, and whether the point took part in the calibration.
nlohmann::json validate_scaling_model(const ScalingModel& model, const std::vector<ScalingPoint>& points,
                                      const std::vector<int>& calibrated_on);

// Where adding accelerators stops paying: T(P) at P = 1, 2, 4, ... max_world, speedup T(1)/T(P),
// efficiency speedup / P, and the largest P whose efficiency is still >= min_efficiency.
struct ScalingCurve {
  std::vector<int> worlds;
  std::vector<double> step_seconds;
  std::vector<double> speedup;
  std::vector<double> efficiency;
  int stops_paying_after = 1;  // the largest P with efficiency >= min_efficiency
  int fastest_world = 1;       // the P with the smallest T(P) (communication may make more slower)
};
// Worlds up to gpus_per_node use intra_bus; larger ones inter_bus (bytes/s per rank).
ScalingCurve scaling_curve(const ScalingModel& model, double relative_speed, double intra_bus,
                           double inter_bus, int gpus_per_node, int max_world, double min_efficiency);

// Reads one entry of a pilot scaling report ({"world_size", "timings": {...}}); errors name `where`.
Result<ScalingPoint> scaling_point_from_json(const nlohmann::json& run, const std::string& where);

}  // namespace ckpt
