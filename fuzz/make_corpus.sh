#!/usr/bin/env bash
# Rebuilds the checked-in seed corpus fuzz/corpus/<target>/ from the test fixtures and from files
# the tool itself writes, plus the generated structured seeds (fuzz_seed_gen: memo chains, deep
# nesting). Run it after a format changes; scripts/fuzz.sh only ever reads the result.
#   fuzz/make_corpus.sh [--bin BUILD_DIR] [--seed-gen PATH]
# BUILD_DIR holds ckptcheck and ckptcheck-train (default build/); PATH is the fuzz_seed_gen built by
# scripts/fuzz.sh (default build-fuzz/fuzz/fuzz_seed_gen).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build"
seed_gen="$root/build-fuzz/fuzz/fuzz_seed_gen"
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --seed-gen) seed_gen="$2"; shift 2 ;;
    *) echo "usage: make_corpus.sh [--bin BUILD_DIR] [--seed-gen PATH]" >&2; exit 2 ;;
  esac
done
for f in "$bin/ckptcheck" "$bin/ckptcheck-train" "$seed_gen"; do
  [ -x "$f" ] || { echo "make_corpus.sh: $f is not built" >&2; exit 2; }
done

corpus="$root/fuzz/corpus"
work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-corpus.XXXXXX")
trap 'rm -rf "$work"' EXIT
rm -rf "$corpus"
mkdir -p "$corpus"/{pickle,zip,native_shard,safetensors,pytorch,dcp,manifest,sha256}

# torch.save files written by PyTorch itself, the refused-global ones included.
for pt in "$root"/tests/data/pytorch/*.pt; do
  name=$(basename "$pt" .pt)
  cp "$pt" "$corpus/pytorch/$name.pt"
  cp "$pt" "$corpus/zip/$name.zip"
  python3 - "$pt" "$corpus/pickle/$name.pkl" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    name = next(n for n in z.namelist() if n.endswith("/data.pkl"))
    open(sys.argv[2], "wb").write(z.read(name))
EOF
done

# Zips the fuzz targets found, kept beside the reader's tests as regressions (fuzz/crashes/README.md).
for z in "$root"/tests/data/zip/*.zip; do cp "$z" "$corpus/zip/$(basename "$z")"; done

# A DCP .metadata written by torch 1.13 itself. The real torch 2.0 sample's .metadata
# (../shared/realworld-samples) is not copied into the repository; scripts/fuzz.sh adds it to the
# scratch corpus of a run when it is present.
cp "$root/tests/data/dcp/torch113/.metadata" "$corpus/dcp/torch113.metadata"

# Shards and manifests written by ckptcheck: each fixture converted to native (one and two shards)
# and safetensors.
n=0
for pt in "$root"/tests/data/pytorch/model_state.pt "$root"/tests/data/pytorch/adamw_state.pt; do
  for args in "--format native" "--format native --shards 2" "--format safetensors"; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    "$bin/ckptcheck" convert "$pt" "$work/c$n" $args >/dev/null
    ckpt="$work/c$n/$(cat "$work/c$n/latest")"
    cp "$ckpt/manifest.json" "$corpus/manifest/convert-$n.json"
    for f in "$ckpt"/*.cks; do [ -e "$f" ] && cp "$f" "$corpus/native_shard/convert-$n-$(basename "$f")"; done
    for f in "$ckpt"/*.safetensors; do [ -e "$f" ] && cp "$f" "$corpus/safetensors/convert-$n-$(basename "$f")"; done
  done
done
# One manifest of a real training run: config, pins, every component's state (shards too large).
"$bin/ckptcheck" train --config "$root/fixtures/configs/pilot.yaml" --steps 1 --save-final \
  --ckpt-dir "$work/train" >/dev/null
cp "$work/train/$(cat "$work/train/latest")/manifest.json" "$corpus/manifest/pilot-train.json"

"$seed_gen" "$corpus"

# sha256_fuzz: a few small messages (FIPS examples, patterns, random bytes) with control bytes that
# cut them in different places, for each kernel.
python3 - "$corpus/sha256" <<'EOF'
import os, random, sys
# Seeds for sha256_fuzz: control bytes, message, then the three bytes FuzzedDataProvider reads from
# the end: the control length (low, high byte; taken mod 257) and the kernel (odd: SHA-NI).
out = sys.argv[1]
rng = random.Random(256)
def seed(name, control, message, sha_ni):
    n = len(control)
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes(control) + message + bytes([n & 0xff, n >> 8, 1 if sha_ni else 0]))
seed("sha-ni-empty", [], b"", True)
seed("sha-ni-fips-56", [5, 64, 51, 0, 7, 130, 3], b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", True)
seed("openssl-fips-112", [17, 200, 1, 63, 64, 65],
     b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
     False)
seed("sha-ni-pattern-1024", [rng.randrange(256) for _ in range(16)], bytes((i * 251 + (i >> 8)) & 0xff for i in range(1024)), True)
seed("sha-ni-random-3000", [rng.randrange(256) for _ in range(64)], bytes(rng.randrange(256) for _ in range(3000)), True)
seed("openssl-random-700", [rng.randrange(256) for _ in range(40)], bytes(rng.randrange(256) for _ in range(700)), False)
EOF
du -sh "$corpus"/* "$corpus"
