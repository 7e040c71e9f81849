#include "verifier/train/config_pins.h"

namespace ckpt {

PinInputs pin_inputs_of(const PilotConfig& config, const std::string& initial_weights) {
  PinInputs inputs;
  inputs.resolved_config = config.resolved();
  const ModelConfig& m = config.model;
  inputs.model = {{"architecture", m.architecture},
                  {"d_model", m.d_model},
                  {"n_layers", m.n_layers},
                  {"n_heads", m.n_heads},
                  {"d_ff", m.d_ff},
                  {"dropout", m.dropout},
                  {"seed", config.seed},
                  {"seq_len", config.seq_len}};
  inputs.initial_weights = initial_weights;
  inputs.data_files = {config.data.path};
  inputs.preprocessing = {{"eval_fraction", config.data.eval_fraction},
                          {"shuffle_seed", config.data.shuffle_seed},
                          {"seq_len", config.seq_len}};
  inputs.seeds = {{"seed", config.seed}, {"data.shuffle_seed", config.data.shuffle_seed}};
  inputs.threads = static_cast<int>(config.threads);
  return inputs;
}

Result<nlohmann::json> compute_pins(const PilotConfig& config, const std::string& initial_weights) {
  return compute_pins(pin_inputs_of(config, initial_weights), current_torch_facts());
}

}  // namespace ckpt
