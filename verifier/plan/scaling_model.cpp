#include "verifier/plan/scaling_model.h"

#include <algorithm>
#include <cmath>

#include "base/json_fields.h"

namespace ckpt {

double ring_allreduce_bytes(int world_size, double bytes) {
  if (world_size <= 1) return 0;
  return 2.0 * (world_size - 1) / world_size * bytes;
}

double ScalingModel::allreduce_seconds(int world_size, double bus) const {
  if (world_size <= 1 || bus <= 0) return 0;
  return ring_allreduce_bytes(world_size, gradient_bytes) / bus;
}

double ScalingModel::step_seconds(int world_size, double relative_speed, double bus) const {
  const double p = world_size;
  return compute_seconds / (p * relative_speed) + optimizer_seconds / relative_speed + data_seconds / p +
         allreduce_seconds(world_size, bus);
}

double ScalingModel::step_seconds(int world_size, double relative_speed) const {
  return step_seconds(world_size, relative_speed, bus_bytes_per_second);
}

nlohmann::json ScalingModel::to_json() const {
  return {{"formula", "T(P) = C/(P*s) + O/s + D/P + 2(P-1)/P * G/B"},
          {"compute_seconds", compute_seconds},
          {"optimizer_seconds", optimizer_seconds},
          {"data_seconds", data_seconds},
          {"gradient_bytes", gradient_bytes},
          {"bus_bytes_per_second", bus_bytes_per_second},
          {"assumptions",
           {"data parallel (DDP) with a fixed global batch split evenly across ranks",
            "one device per rank; compute scales as 1/P, the optimizer step is replicated",
            "each rank loads only its share of the input, on the host",
            "no overlap of the all-reduce with backward (the conservative bound)",
            "ring all-reduce at a constant bus bandwidth; per-hop latency neglected"}}};
}

Result<ScalingModel> calibrate_scaling_model(const std::vector<ScalingPoint>& points, double gradient_bytes,
                                             std::vector<int>* calibrated_on) {
  const ScalingPoint* one = nullptr;
  const ScalingPoint* pair = nullptr;
  for (const ScalingPoint& p : points) {
    if (p.world_size == 1) one = &p;
    if (p.world_size > 1 && !p.oversubscribed && (!pair || p.world_size < pair->world_size)) pair = &p;
  }
  if (!one) return Status::invalid_argument("scaling: no measurement at world size 1 to calibrate compute");
  if (!pair) {
    return Status::invalid_argument(
        "scaling: no measurement at a world size > 1 with a core per rank to calibrate communication");
  }
  if (!(gradient_bytes > 0)) {
    return Status::invalid_argument("scaling: gradient bytes must be > 0 to model the all-reduce");
  }
  ScalingModel m;
  m.compute_seconds = one->forward_backward_seconds;
  m.optimizer_seconds = one->optimizer_seconds;
  m.data_seconds = one->data_wait_seconds;
  m.gradient_bytes = gradient_bytes;
  // A measured all-reduce of ~0 s (a loopback world) would give an infinite bandwidth: floor it
  // at a microsecond so the model stays finite and says communication is free.
  const double comm = std::max(pair->communication_seconds, 1e-6);
  m.bus_bytes_per_second = ring_allreduce_bytes(pair->world_size, gradient_bytes) / comm;
  if (calibrated_on) *calibrated_on = {1, pair->world_size};
  return m;
}

nlohmann::json validate_scaling_model(const ScalingModel& model, const std::vector<ScalingPoint>& points,
                                      const std::vector<int>& calibrated_on) {
  nlohmann::json out = nlohmann::json::array();
  for (const ScalingPoint& p : points) {
    const double predicted_step = model.step_seconds(p.world_size);
    const double predicted_comm = model.allreduce_seconds(p.world_size, model.bus_bytes_per_second);
    // The measured step's parts as the model sees them (the summary's step also holds the
    // optimizer's bookkeeping and the loss all-reduce; the sum of the parts is what is modelled).
    const double measured_step =
        p.forward_backward_seconds + p.optimizer_seconds + p.data_wait_seconds + p.communication_seconds;
    const bool used =
        std::find(calibrated_on.begin(), calibrated_on.end(), p.world_size) != calibrated_on.end();
    out.push_back(
        {{"world_size", p.world_size},
         {"calibration", used},
         {"oversubscribed", p.oversubscribed},
         {"predicted_step_seconds", predicted_step},
         {"measured_step_seconds", measured_step},
         {"step_relative_error", measured_step > 0 ? (predicted_step - measured_step) / measured_step : 0.0},
         {"predicted_compute_seconds", model.compute_seconds / p.world_size},
         {"measured_compute_seconds", p.forward_backward_seconds},
         {"predicted_communication_seconds", predicted_comm},
         {"measured_communication_seconds", p.communication_seconds}});
  }
  return out;
}

ScalingCurve scaling_curve(const ScalingModel& model, double relative_speed, double intra_bus,
                           double inter_bus, int gpus_per_node, int max_world, double min_efficiency) {
  ScalingCurve curve;
  const double t1 = model.step_seconds(1, relative_speed, intra_bus);
  double fastest = t1;
  for (int p = 1; p <= std::max(1, max_world); p *= 2) {
    const double t = model.step_seconds(p, relative_speed, p <= gpus_per_node ? intra_bus : inter_bus);
    const double speedup = t > 0 ? t1 / t : 0;
    const double efficiency = speedup / p;
    curve.worlds.push_back(p);
    curve.step_seconds.push_back(t);
    curve.speedup.push_back(speedup);
    curve.efficiency.push_back(efficiency);
    if (efficiency >= min_efficiency) curve.stops_paying_after = p;
    if (t < fastest) {
      fastest = t;
      curve.fastest_world = p;
    }
  }
  return curve;
}

Result<ScalingPoint> scaling_point_from_json(const nlohmann::json& run, const std::string& where) {
  ScalingPoint p;
  CKPT_ASSIGN_OR_RETURN(const int64_t world, json_int(run, "world_size", where));
  if (world < 1 || world > 4096) {
    return Status::invalid_argument(where + ": field 'world_size': expected 1..4096, got " +
                                    std::to_string(world));
  }
  p.world_size = static_cast<int>(world);
  CKPT_ASSIGN_OR_RETURN(const nlohmann::json* t, json_object(run, "timings", where));
  const std::string at = where + ".timings";
  struct Field {
    const char* key;
    double* out;
  };
  for (const Field& f : {Field{"step_seconds_mean", &p.step_seconds},
                         Field{"forward_backward_seconds_mean", &p.forward_backward_seconds},
                         Field{"optimizer_seconds_mean", &p.optimizer_seconds},
                         Field{"communication_seconds_mean", &p.communication_seconds},
                         Field{"data_wait_seconds_mean", &p.data_wait_seconds}}) {
    CKPT_ASSIGN_OR_RETURN(*f.out, json_number(*t, f.key, at));
    if (!(*f.out >= 0) || !std::isfinite(*f.out)) {
      return Status::invalid_argument(at + ": field '" + f.key + "': expected a finite number >= 0, got " +
                                      t->at(f.key).dump());
    }
  }
  if (run.contains("oversubscribed") && run["oversubscribed"].is_boolean())
    p.oversubscribed = run["oversubscribed"];
  return p;
}

}  // namespace ckpt
