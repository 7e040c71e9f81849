#!/usr/bin/env bash
# Proves the layer check can fail: on a copy of the tree with one upward include planted (formats/
# reaching up into verifier/) and one torch header in a torch-free file, it must exit 1 and name both.
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/.." && pwd)}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for d in base formats distributed shards fixtures verifier bench tests scripts; do
  [ -d "$src/$d" ] && cp -r "$src/$d" "$scratch/"
done
python3 "$scratch/scripts/check_layers.py" "$scratch" >/dev/null  # clean copy passes
printf '#include "verifier/check/checkpoint_verifier.h"\n' >> "$scratch/formats/dtype.cpp"
printf '#include "shards/training_state.h"\n' >> "$scratch/verifier/plan/plan.cpp"
if out=$(python3 "$scratch/scripts/check_layers.py" "$scratch"); then
  echo "layer check passed a tree with an upward include"; exit 1
fi
grep -q 'formats/dtype.cpp: includes "verifier/check/checkpoint_verifier.h"' <<<"$out" || { echo "$out"; exit 1; }
grep -q 'verifier/plan/plan.cpp: includes shards/training_state.h, which needs LibTorch' <<<"$out" || { echo "$out"; exit 1; }
echo "layer check self-test: both planted violations caught"
