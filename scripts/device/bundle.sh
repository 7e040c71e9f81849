#!/usr/bin/env bash
# Packs what the device check (gpu_checks.sh) needs into DEST (default: .device in this checkout),
# a folder to name in the device tool's `carry`:
#   DEST/bundle/ckptcheck   the torch-free binary, stripped
#   DEST/bundle/lib/        its ldd closure minus glibc (libc, libm, libpthread, libdl, librt, ld-linux),
#                           found there through LD_LIBRARY_PATH=DEST/bundle/lib
#   DEST/scripts/device/    the check's scripts; DEST/examples/pytorch/ the drilled program
# The machine there has none of our C++ dependencies and nothing can be installed on it; its glibc
# must be at least this machine's (the binary and libraries are built against it).
#   scripts/device/bundle.sh [DEST]      (BUILD=build: where ckptcheck was built)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST=${1:-$ROOT/.device}
BIN=${BUILD:-$ROOT/build}/ckptcheck
LIMIT=$((48 * 1024 * 1024))  # the tool carries 64 MiB in all; leave room for the checkout itself
[ -x "$BIN" ] || { echo "bundle.sh: $BIN not found: build it first (make build)" >&2; exit 2; }

rm -rf "$DEST/bundle" "$DEST/scripts" "$DEST/examples"
mkdir -p "$DEST/bundle/lib" "$DEST/scripts/device" "$DEST/examples/pytorch"
strip -o "$DEST/bundle/ckptcheck" "$BIN"
# `ldd` lists the whole closure (what each library needs too); glibc stays the target's own.
ldd "$BIN" | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libresolv.so* | libutil.so*) continue ;;
  esac
  strip --strip-unneeded -o "$DEST/bundle/lib/$(basename "$lib")" "$lib"
done
if ldd "$BIN" | grep -q 'not found'; then
  echo "bundle.sh: $BIN has unresolved libraries here:" >&2; ldd "$BIN" | grep 'not found' >&2; exit 2
fi
cp "$ROOT"/scripts/device/*.sh "$ROOT"/scripts/device/*.py "$DEST/scripts/device/"
cp "$ROOT"/examples/pytorch/*.py "$DEST/examples/pytorch/"

# The bundle must run with nothing of this machine's environment but its own libraries.
env -i LD_LIBRARY_PATH="$DEST/bundle/lib" "$DEST/bundle/ckptcheck" --version >/dev/null ||
  { echo "bundle.sh: $DEST/bundle/ckptcheck --version failed with only its own libraries" >&2; exit 2; }
bytes=$(du -sb "$DEST" | cut -f1)
if ((bytes > LIMIT)); then
  echo "bundle.sh: $DEST is $((bytes / 1048576)) MiB, over $((LIMIT / 1048576)) MiB" >&2; exit 2
fi
echo "bundle.sh: $DEST: $(ls "$DEST/bundle/lib" | wc -l) libraries, $((bytes / 1024)) KiB in all"
