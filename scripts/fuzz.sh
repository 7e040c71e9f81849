#!/usr/bin/env bash
# Coverage-guided fuzzing of every torch-free parser, and of our SHA-256 against OpenSSL's
# (fuzz/README.md).
#   fuzz.sh --seconds N [--build-dir D] [--targets "pickle zip ..."]
#   fuzz.sh --ci        the same with 6 seconds per target (ctest's fuzz_short, in `make test`)
# Configures D (default build-fuzz) with clang and -DCKPTCHECK_FUZZ=ON, builds the fuzz targets,
# runs each for N seconds on a scratch copy of fuzz/corpus/<target> (the checked-in corpus is never
# written) with fuzz/<target>.dict where there is one, and prints one line per target: executions,
# exec/s, edge coverage (libFuzzer's cov: and ft:) and crashes (0, or the saved input under
# D/fuzz-artifacts/).
# Exit 0 when no target crashed, 1 when one did, 2 when the build or a fuzzer could not run.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
build="$root/build-fuzz"
targets="pickle zip native_shard safetensors pytorch dcp manifest sha256"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --ci) seconds=6; shift ;;
    --build-dir) build="$2"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    *) echo "usage: fuzz.sh --seconds N | --ci [--build-dir D] [--targets \"T ...\"]" >&2; exit 2 ;;
  esac
done

for tool in clang clang++ cmake; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found (run scripts/install-deps.sh)" >&2; exit 2; }
done

# Objects are shared through ccache between build dirs (ctest's fuzz_short builds in its own):
# paths relative to the source root, and the build dir left out of the hash (it only changes the
# debug info's compile directory).
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR=1
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null; then export CMAKE_GENERATOR=Ninja; fi
mkdir -p "$build"
log="$build/fuzz-build.log"
# HDF5 is not fuzzed (libhdf5 itself reads out of bounds on crafted metadata), so it is left out of
# this build; the targets link only the torch-free layers. -O1 -g1: those layers are compiled with
# ASan, UBSan and coverage, which at -O2 -g took a third longer (ckpt_formats' first unity batch:
# 34 s, 25 s); line tables are what the sanitizers' stack traces print.
if ! { cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCKPTCHECK_FUZZ=ON \
         -DCKPTCHECK_WITH_HDF5=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" &&
       cmake --build "$build" -j"$(nproc)" --target fuzz_targets; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "fuzz.sh: build failed (full log: $log)" >&2
  exit 2
fi

# Per-target libFuzzer flags. The pickle, torch.save and JSON targets take inputs up to 4 MB from
# the first run (-len_control=0): their custom mutators build memo chains and nesting that only
# matter at that size, which length control would hold back for millions of runs.
flags_for() {
  case "$1" in
    pickle | pytorch | manifest) echo "-max_len=4000000 -len_control=0" ;;
    # DCP .metadata: the pickle reader's deep nests are pickle_fuzz's job; small inputs keep the
    # rate up for the Metadata structure (30 s, shared 2-core box: 4 MB inputs 29 exec/s, 64 KiB 111).
    dcp) echo "-max_len=65536 -len_control=0" ;;
    safetensors | native_shard) echo "-max_len=1000000 -len_control=0" ;;
    # SHA-256 against OpenSSL: a few hundred blocks already reach every path (partial blocks, runs
    # of whole blocks on both sides of a pair); larger inputs only slow the rate.
    sha256) echo "-max_len=16384" ;;
    *) echo "-max_len=262144" ;;
  esac
}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
artifacts="$build/fuzz-artifacts"
crashed=0
failed=0
printf '%-14s %12s %8s %7s %8s  %s\n' target executions exec/s cov ft crashes
for t in $targets; do
  bin="$build/fuzz/${t}_fuzz"
  corpus="$scratch/$t"
  mkdir -p "$corpus" "$scratch/$t-out" "$artifacts/$t"
  cp -r "$root/fuzz/corpus/$t/." "$corpus/"
  # The real torch 2.0 DCP sample (../shared/realworld-samples/README.md) seeds the run where present;
  # it is read from there, never copied into fuzz/corpus.
  sample="$root/../shared/realworld-samples/dcp-lightning-2rank/.metadata"
  if [ "$t" = dcp ] && [ -f "$sample" ]; then cp "$sample" "$corpus/dcp-lightning-2rank.metadata"; fi
  # A dictionary where tokens matter (parsers); sha256 has none, its input is bytes and sizes.
  dict=()
  if [ -f "$root/fuzz/$t.dict" ]; then dict=(-dict="$root/fuzz/$t.dict"); fi
  rc=0
  # shellcheck disable=SC2046
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0" UBSAN_OPTIONS="print_stacktrace=1" \
    "$bin" $(flags_for "$t") -max_total_time="$seconds" -print_final_stats=1 -timeout=30 \
    "${dict[@]}" -artifact_prefix="$scratch/$t-out/" "$corpus" >"$scratch/$t.log" 2>&1 || rc=$?
  cp "$scratch/$t.log" "$artifacts/$t/last-run.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$t.log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$scratch/$t.log" | tail -n 1)
  stats=$(grep -E ' cov: [0-9]+ ft: [0-9]+' "$scratch/$t.log" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$stats")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$stats")
  result=0
  # Crash, leak, timeout and out-of-memory inputs; slow-unit-* files are only reports.
  found=$(find "$scratch/$t-out" -type f ! -name 'slow-unit-*' | head -n 1)
  if [ -n "$found" ]; then
    cp "$found" "$artifacts/$t/"
    result="$artifacts/$t/$(basename "$found")"
    crashed=1
  elif [ "$rc" -ne 0 ]; then
    result="fuzzer exited $rc without an input (log: $artifacts/$t/last-run.log)"
    failed=1
  fi
  printf '%-14s %12s %8s %7s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
done

# The differential target (issue 63): mutants of the attack files through `ckptcheck verify` and the
# real readers (scripts/loader_oracle.py); a pass where they disagree is a finding. Not in --ci:
# python/tests/test_gate_differential.py runs a short, fixed-seed round of it in `make test`.
if [ "$seconds" -gt 6 ] && [ -x "$root/build/ckptcheck" ]; then
  if /usr/bin/python3 "$root/scripts/differential_fuzz.py" --seconds "$seconds" --seed "$RANDOM" \
      --binary "$root/build/ckptcheck" --corpus "$root/fuzz/corpus/differential" \
      --findings "$build/fuzz-artifacts/differential"; then
    echo "differential   no disagreement in $seconds s"
  else
    echo "differential   findings in $build/fuzz-artifacts/differential" && crashed=1
  fi
fi

if [ "$crashed" -ne 0 ]; then
  echo "fuzz.sh: a target crashed or disagreed; reproduce with: build-fuzz/fuzz/<target>_fuzz <input>" >&2
  exit 1
fi
[ "$failed" -eq 0 ] || exit 2
