#!/usr/bin/env bash
# Proves the layer check can fail: on a copy of the tree with one violation of each rule planted (an
# upward include, a torch header in a torch-free file, a torch header not named *_torch.h, the
# verifier reaching into the workload), it must exit 1 and name each.
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for d in base formats distributed shards fixtures verifier bench tests scripts; do
  [ -d "$src/$d" ] && cp -r "$src/$d" "$scratch/"
done
python3 "$scratch/scripts/check_layers.py" "$scratch" >/dev/null  # clean copy passes
printf '#include "verifier/check/checkpoint_verifier.h"\n' >> "$scratch/formats/dtype.cpp"
printf '#include "shards/training_state_torch.h"\n' >> "$scratch/verifier/plan/plan.cpp"
printf '#include <torch/torch.h>\n' >> "$scratch/formats/dtype.h"
printf '#include "fixtures/pilot_config.h"\n' >> "$scratch/verifier/check/seal.cpp"
if out=$(python3 "$scratch/scripts/check_layers.py" "$scratch"); then
  echo "layer check passed a tree with an upward include"; exit 1
fi
grep -q 'formats/dtype.cpp: includes "verifier/check/checkpoint_verifier.h"' <<<"$out" || { echo "$out"; exit 1; }
grep -q 'verifier/plan/plan.cpp: includes shards/training_state_torch.h, which needs LibTorch' <<<"$out" || { echo "$out"; exit 1; }
grep -q 'formats/dtype.h: includes LibTorch .* does not end in _torch.h' <<<"$out" || { echo "$out"; exit 1; }
grep -q 'verifier/check/seal.cpp: includes "fixtures/pilot_config.h": verifier/check/ is part of the torch-free verifier' <<<"$out" || { echo "$out"; exit 1; }
echo "layer check self-test: every planted violation caught"
