#!/usr/bin/env bash
# The .deb, as a training container gets it: builds it with CPack from the build dir (what
# `make package` runs), checks its Depends name the Debian runtime packages the programs load,
# unpacks it with `dpkg -x` into a scratch root, trains a checkpoint with the unpacked
# `ckptcheck train` (which must find the unpacked ckptcheck-train) and runs the unpacked
# `ckptcheck verify`: exit 0 on the checkpoint, exit 1 once a byte of a shard is flipped; and
# runs the unpacked `ckptcheck plan` from an empty directory without --catalog: it must find the
# hardware catalog the package installs (usr/share/ckptcheck/hardware.yaml) from its own prefix; and
# imports the Python package from the unpacked usr/lib/python3/dist-packages (never the build dir),
# whose verify must refuse the damaged checkpoint too.
# Usage: deb_package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "deb_package: $*" >&2; exit 1; }

(cd "$build" && cpack -G DEB -B "$scratch/pkg" >"$scratch/cpack.log" 2>&1) ||
  { cat "$scratch/cpack.log"; fail "cpack failed"; }
deb=$(ls "$scratch"/pkg/*.deb)
depends=$(dpkg-deb -f "$deb" Depends)
for pkg in libtorch libzstd libssl libhdf5 libyaml-cpp libc6; do
  grep -q "$pkg" <<<"$depends" || fail "Depends lacks $pkg: $depends"
done
dpkg-deb -c "$deb" | grep -q '/usr/include/' && fail "the runtime .deb holds headers"
dpkg -x "$deb" "$scratch/root"
bin=$scratch/root/usr/bin/ckptcheck
for f in usr/bin/ckptcheck-train usr/share/man/man1/ckptcheck.1 usr/share/bash-completion/completions/ckptcheck \
  usr/share/ckptcheck/hardware.yaml; do
  [ -e "$scratch/root/$f" ] || fail "$f is not in the package"
done

"$bin" train --config "$src/fixtures/configs/pilot.yaml" --steps 2 --save-every 2 --ckpt-dir "$scratch/ckpt" \
  >"$scratch/train.log" 2>&1 || { cat "$scratch/train.log"; fail "the packaged ckptcheck train failed"; }
"$bin" verify "$scratch/ckpt" >"$scratch/verify.log" || { cat "$scratch/verify.log"; fail "verify exited $?, expected 0"; }
step=$(ls -d "$scratch"/ckpt/step_*)
python3 "$src/tests/install/flip_largest_payload_byte.py" "$step" 0x01 >/dev/null
set +e
"$bin" verify "$scratch/ckpt" >"$scratch/verify-bad.log" 2>&1
rc=$?
set -e
[ $rc = 1 ] || { cat "$scratch/verify-bad.log"; fail "verify of a damaged checkpoint exited $rc, expected 1"; }
grep -q chunk_sha256_mismatch "$scratch/verify-bad.log" || { cat "$scratch/verify-bad.log"; fail "no chunk_sha256_mismatch"; }
# The Python package, imported from the unpacked system (dist-packages), never from the build dir:
# it must verify the checkpoint the packaged programs wrote and refuse the damaged one.
dist=$scratch/root/usr/lib/python3/dist-packages
[ -e "$dist/ckptcheck/__init__.py" ] || fail "the package holds no Python package in usr/lib/python3/dist-packages"
ls "$dist"/ckptcheck/_native*.so >/dev/null || fail "the package holds no ckptcheck._native extension"
mkdir "$scratch/empty-py"
(cd "$scratch/empty-py" && PYTHONPATH=$dist /usr/bin/python3 - "$dist" "$step" >"$scratch/python.log" 2>&1 <<'PY'
import sys
import ckptcheck
assert ckptcheck.__file__.startswith(sys.argv[1]), ckptcheck.__file__
report = ckptcheck.verify(sys.argv[2])
assert not report.ok and any(f.code == "chunk_sha256_mismatch" for f in report.errors), report.to_dict()
print("python: import ckptcheck", ckptcheck.__version__, "from", ckptcheck.__file__)
PY
) || { cat "$scratch/python.log"; fail "import ckptcheck from the package failed"; }
mkdir "$scratch/empty"
cat >"$scratch/report.json" <<'JSON'
{"measurements": {
  "memory": {"peak_rss_bytes": 2e9, "peak_rss_bytes_per_rank": 2e9, "parameter_bytes": 1e8, "gradient_bytes": 1e8,
             "optimizer_state_bytes": 2e8, "activation_bytes_estimate": null, "cuda": null},
  "timings": {"step_seconds_mean": 0.5, "data_wait_seconds_mean": null, "eval_seconds": null,
              "checkpoint_save_seconds": 3, "checkpoint_bytes": 4e8, "restore_seconds": 9,
              "tokens_per_second": null},
  "eval_every_steps": null,
  "sources": {"step_seconds_mean": "measured: between step lines"}}}
JSON
(cd "$scratch/empty" && "$bin" plan --report "$scratch/report.json" --total-steps 100000) >"$scratch/plan.log" 2>&1 ||
  { cat "$scratch/plan.log"; fail "the packaged plan failed from an empty directory"; }
grep -q "H100" "$scratch/plan.log" || { cat "$scratch/plan.log"; fail "the plan names no accelerator of the catalog"; }
grep -q "step_seconds: measured: between step lines" "$scratch/plan.log" ||
  { cat "$scratch/plan.log"; fail "the plan does not say where its step time came from"; }
echo "deb_package: $(basename "$deb") (Depends: $depends): verify 0 on a checkpoint, 1 on a damaged one (from Python too); plan finds its catalog"
