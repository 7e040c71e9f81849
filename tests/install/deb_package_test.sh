#!/usr/bin/env bash
# The .deb, as a training container gets it: builds it with CPack from the build dir (what
# `make package` runs), checks its Depends name the Debian runtime packages the programs load,
# unpacks it with `dpkg -x` into a scratch root, trains a checkpoint with the unpacked
# `ckptcheck train` (which must find the unpacked ckptcheck-train) and runs the unpacked
# `ckptcheck verify`: exit 0 on the checkpoint, exit 1 once a byte of a shard is flipped.
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
for f in usr/bin/ckptcheck-train usr/share/man/man1/ckptcheck.1 usr/share/bash-completion/completions/ckptcheck; do
  [ -e "$scratch/root/$f" ] || fail "$f is not in the package"
done

"$bin" train --config "$src/fixtures/configs/pilot.yaml" --steps 2 --save-every 2 --ckpt-dir "$scratch/ckpt" \
  >"$scratch/train.log" 2>&1 || { cat "$scratch/train.log"; fail "the packaged ckptcheck train failed"; }
"$bin" verify "$scratch/ckpt" >"$scratch/verify.log" || { cat "$scratch/verify.log"; fail "verify exited $?, expected 0"; }
step=$(ls -d "$scratch"/ckpt/step_*)
python3 - "$step" <<'PY'
import json, os, sys
step = sys.argv[1]
m = json.load(open(os.path.join(step, "manifest.json")))
chunk = max((c for t in m["tensors"] for c in t["chunks"]), key=lambda c: c["data_bytes"])
with open(os.path.join(step, m["shards"][chunk["shard"]]["path"]), "r+b") as f:
    at = chunk["data_offset"] + chunk["data_bytes"] // 2
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x01]))
PY
set +e
"$bin" verify "$scratch/ckpt" >"$scratch/verify-bad.log" 2>&1
rc=$?
set -e
[ $rc = 1 ] || { cat "$scratch/verify-bad.log"; fail "verify of a damaged checkpoint exited $rc, expected 1"; }
grep -q chunk_sha256_mismatch "$scratch/verify-bad.log" || { cat "$scratch/verify-bad.log"; fail "no chunk_sha256_mismatch"; }
echo "deb_package: $(basename "$deb") (Depends: $depends): verify 0 on a checkpoint, 1 on a damaged one"
