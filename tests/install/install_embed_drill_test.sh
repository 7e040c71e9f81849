#!/usr/bin/env bash
# Install and embed, end to end, using only what `cmake --install` put into a scratch prefix:
#   1. the layout: both programs, the two public headers (and no internal one), the CMake package,
#      man page and bash completion; the installed ckptcheck finds ckptcheck-train in the prefix
#      (bin/, then libexec/ckptcheck/) and --version names the dependencies;
#   2. examples/libtorch is configured and built against the prefix with find_package(ckptcheck);
#   3. its checkpoints (written through the public API) pass the installed `ckptcheck verify`, a
#      flipped byte fails it (exit 1) and the example refuses to resume from it (exit 1);
#   4. the installed `ckptcheck drill -- EXAMPLE` passes in both kill modes (exit 0) and catches
#      `--bug forget-optimizer` (exit 1, naming the optimizer).
# Usage: install_embed_drill_test.sh BUILD_DIR SOURCE_DIR [Torch_DIR]
set -euo pipefail
build=$1 src=$2 torch_dir=${3:-}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "install_embed_drill: $*" >&2; exit 1; }
prefix=$scratch/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/ckptcheck bin/ckptcheck-train include/ckptcheck/ckptcheck.h include/ckptcheck/ckptcheck_torch.h \
  share/man/man1/ckptcheck.1 share/bash-completion/completions/ckptcheck; do
  [ -e "$prefix/$f" ] || fail "$prefix/$f was not installed"
done
config=$(find "$prefix" -name ckptcheckConfig.cmake)
[ -n "$config" ] && [ -e "$(dirname "$config")/ckptcheckConfigVersion.cmake" ] || fail "no CMake package config"
headers=$(cd "$prefix/include" && find . -name '*.h' | sort | tr '\n' ' ')
[ "$headers" = "./ckptcheck/ckptcheck.h ./ckptcheck/ckptcheck_torch.h " ] || fail "installed headers: $headers"
bash -n "$prefix/share/bash-completion/completions/ckptcheck" || fail "completion script does not parse"
grep -q '^\.SS verify' "$prefix/share/man/man1/ckptcheck.1" || fail "man page has no verify section"

bin=$prefix/bin/ckptcheck
version=$("$bin" --version)
for dep in "ckptcheck 0.1" libtorch zstd openssl hdf5 nlohmann-json yaml-cpp cli11; do
  grep -q "$dep" <<<"$version" || fail "--version does not name $dep: $version"
done
"$bin" train --help >/dev/null || fail "installed ckptcheck cannot run ckptcheck-train from bin/"
mkdir -p "$prefix/libexec/ckptcheck" && mv "$prefix/bin/ckptcheck-train" "$prefix/libexec/ckptcheck/"
"$bin" train --help >/dev/null || fail "installed ckptcheck cannot run ckptcheck-train from libexec/ckptcheck/"
mv "$prefix/libexec/ckptcheck/ckptcheck-train" "$prefix/bin/"

# Built against the prefix only, as the example's CMakeLists.txt tells users to (no build type: no
# -O, no -g; 23 s of compiling where Release took 32, and the training runs inside LibTorch);
# ccache when present (scratch paths relative: it hits).
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
export CCACHE_BASEDIR=$scratch CCACHE_NOHASHDIR=1
cmake -S "$src/examples/libtorch" -B "$scratch/example" \
  -DCMAKE_PREFIX_PATH="$prefix" ${torch_dir:+-DTorch_DIR="$torch_dir"} "${launcher[@]}" >"$scratch/configure.log" 2>&1 ||
  { cat "$scratch/configure.log"; fail "examples/libtorch does not configure against the installed package"; }
cmake --build "$scratch/example" -j2 >"$scratch/build.log" 2>&1 ||
  { cat "$scratch/build.log"; fail "examples/libtorch does not build against the installed package"; }
example=$scratch/example/ckptcheck_libtorch_example

# Its checkpoints, straight from the API, verify; damage is caught by verify and by load.
CKPTCHECK_CKPT_DIR=$scratch/ckpt CKPTCHECK_STEPS=6 CKPTCHECK_SAVE_EVERY=3 CKPTCHECK_METRICS=$scratch/m.jsonl \
  "$example" || fail "example exited $?"
[ "$(grep -c '"event":"checkpoint"' "$scratch/m.jsonl")" = 2 ] || fail "expected 2 checkpoint events: $(cat "$scratch/m.jsonl")"
[ "$(grep -c '"loss"' "$scratch/m.jsonl")" = 6 ] || fail "expected 6 metrics lines"
"$bin" verify "$scratch/ckpt" >"$scratch/verify.log" || { cat "$scratch/verify.log"; fail "verify of the example's checkpoint failed"; }
step6=$(ls -d "$scratch"/ckpt/step_*6)
# Flip one bit in the middle of the largest chunk's payload (located through the shard headers).
shard=$(python3 "$src/tests/install/flip_largest_payload_byte.py" "$step6" 0x40)
set +e
"$bin" verify "$step6" >"$scratch/verify-bad.log" 2>&1; rc=$?
CKPTCHECK_CKPT_DIR=$scratch/ckpt2 CKPTCHECK_STEPS=8 CKPTCHECK_SAVE_EVERY=4 CKPTCHECK_METRICS=$scratch/m2.jsonl \
  CKPTCHECK_RESUME=$step6 "$example" 2>"$scratch/resume-bad.log"; resume_rc=$?
set -e
[ $rc = 1 ] || { cat "$scratch/verify-bad.log"; fail "verify of a damaged checkpoint exited $rc, expected 1"; }
[ $resume_rc = 1 ] || { cat "$scratch/resume-bad.log"; fail "resume from a damaged checkpoint exited $resume_rc, expected 1"; }
grep -q "$(basename "$shard")" "$scratch/resume-bad.log" || fail "the load error does not name the shard: $(cat "$scratch/resume-bad.log")"

# The drill, from the prefix.
"$bin" drill --save-at 6 --kill both --work-dir "$scratch" --report-dir "$scratch/pass" -- "$example" >"$scratch/pass.log" 2>&1 ||
  { cat "$scratch/pass.log"; fail "drill of the example failed"; }
set +e
"$bin" drill --save-at 6 --kill after-save --work-dir "$scratch" --report-dir "$scratch/bug" -- "$example" \
  --bug forget-optimizer \
  >"$scratch/bug.log" 2>&1
rc=$?
set -e
[ $rc = 1 ] || { cat "$scratch/bug.log"; fail "drill with --bug forget-optimizer exited $rc, expected 1"; }
grep -q "FAIL: optimizer diverged" "$scratch/bug.log" || { cat "$scratch/bug.log"; fail "the failed drill does not name the optimizer"; }
echo "install_embed_drill: installed, built the example with find_package, verify ok/damaged, drill pass + bug caught"
