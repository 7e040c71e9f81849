#!/usr/bin/env bash
# The device check of issue 45, run once on a lent GPU machine (torch 2.x, CUDA, no network, none of
# our C++ dependencies). Run from the root of a checkout that carries .device/ (made by
# scripts/device/bundle.sh: .device/bundle, .device/scripts/device, .device/examples):
#
#   bash .device/scripts/device/gpu_checks.sh            # writes into $OUT (default /tmp/gpu_checks_out)
#
# Every step is independent: a step that fails (or runs past its time) is logged with its exit code
# and the next one runs. It writes at most 8 files into $OUT: summary.log (one line per step and
# the drill/precision results), files.tar.gz (every checkpoint made here with what torch read back),
# ckptcheck.tar.gz (what the carried ckptcheck said of each), drill.tar.gz (the drill reports),
# precision.jsonl, logs.tar.gz.
set -u
D=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)      # the folder holding scripts/, examples/, bundle/
S=$D/scripts/device
OUT=${OUT:-/tmp/gpu_checks_out}
W=${GPU_CHECKS_WORK:-/tmp/gpu_checks_work}
BUDGET=${GPU_CHECKS_BUDGET:-300}                            # seconds for all steps together
PY=${PYTHON:-python3}
TORCHRUN=${TORCHRUN:-torchrun}
command -v "${TORCHRUN%% *}" >/dev/null || TORCHRUN="$PY -m torch.distributed.run"
rm -rf "$W" && mkdir -p "$W/files" "$W/ckptcheck" "$W/drill" "$W/logs" "$OUT"
SUMMARY=$W/summary.log
T0=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_DISABLED=true

say() { echo "$*" | tee -a "$SUMMARY"; }
# The carried ckptcheck with its libraries; Python children of a drill drop them again (env -u).
ck() { LD_LIBRARY_PATH="$D/bundle/lib" "$D/bundle/ckptcheck" "$@"; }

# step NAME LIMIT_S COMMAND...: runs COMMAND traced into logs/NAME.log under the smaller of LIMIT_S
# and what is left of BUDGET, and records its exit code and seconds.
step() {
  local name=$1 limit=$2; shift 2
  [[ $name =~ ${GPU_CHECKS_STEPS:-.} ]] || return 0  # a dry run elsewhere picks its steps
  local left=$((BUDGET - ($(date +%s) - T0)))
  ((limit > left)) && limit=$left
  if ((limit < 5)); then say "step $name rc=skipped (budget spent)"; return 0; fi
  echo "+ [$name] $* (limit ${limit}s, $(( $(date +%s) - T0 ))s in)"
  local s=$(date +%s)
  # bash -c: a step may be one of the functions below (exported), which `timeout` cannot run itself.
  timeout -k 5 "$limit" bash -xc '"$@"' step "$@" >"$W/logs/$name.log" 2>&1
  local rc=$?
  say "step $name rc=$rc $(( $(date +%s) - s ))s$( ((rc == 124)) && echo ' (timed out)')"
  tail -n 3 "$W/logs/$name.log" | sed 's/^/    /'
  return 0
}

environment() {
  date -u; uname -a; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$PY" -c 'import sys, torch; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda,
torch.cuda.is_available() and torch.cuda.get_device_name(0))'
  "$PY" -m pip list 2>/dev/null | grep -iE '^(torch|lightning|pytorch-lightning|transformers|safetensors|numpy) '
  ck --version; ldd "$D/bundle/ckptcheck" | grep -c 'not found' || true
}

# 1-2. Checkpoints made by torch 2.x itself, each with what torch reads back beside it.
dcp() {  # dcp MODE DEST [NPROC] [--cpu]
  local mode=$1 dest=$2 nproc=${3:-1}; shift 3 || shift $#
  $TORCHRUN --standalone --nproc-per-node="$nproc" "$S/dcp_save.py" "$mode" "$W/files/$dest" "$@" &&
    "$PY" "$S/read_dcp.py" "$W/files/$dest" "$W/files/$dest.torch.json"
}

# 3. What the carried ckptcheck says of each file: verify (text and --json) and inspect --json.
judge() {
  set +x  # the trace would land in the outputs kept below
  local f name rc irc
  for f in "$W"/files/*; do
    case $f in *.torch.json) continue ;; esac
    name=$(basename "$f")
    ck verify "$f" >"$W/ckptcheck/$name.verify.txt" 2>&1; rc=$?
    ck verify --json "$f" >"$W/ckptcheck/$name.verify.json" 2>"$W/ckptcheck/$name.verify.err"
    ck inspect --json "$f" >"$W/ckptcheck/$name.inspect.json" 2>"$W/ckptcheck/$name.inspect.err"; irc=$?
    say "verify $name rc=$rc inspect rc=$irc : $(head -n 2 "$W/ckptcheck/$name.verify.txt" | cut -c1-300 | tr '\n' ' ')"
  done
  if [ -d "$W/files/hf_checkpoint-2" ]; then  # the HF folder's files one by one, too
    for f in "$W"/files/hf_checkpoint-2/*; do
      case $f in *.json | *.txt) continue ;; esac
      name=hf_checkpoint-2.$(basename "$f")
      ck verify "$f" >"$W/ckptcheck/$name.verify.txt" 2>&1; rc=$?
      ck inspect --json "$f" >"$W/ckptcheck/$name.inspect.json" 2>"$W/ckptcheck/$name.inspect.err"; irc=$?
      say "verify $name rc=$rc inspect rc=$irc : $(head -n 2 "$W/ckptcheck/$name.verify.txt" | cut -c1-250 | tr '\n' ' ')"
    done
  fi
}

# 4. The restore drill of examples/pytorch/train.py on the GPU, with --control.
drill() {  # drill NAME [train.py args...]
  local name=$1; shift
  mkdir -p "$W/drill/$name.work" "$W/drill/$name"
  ck drill --save-at 6 --resume-steps 6 --kill both --control --report-dir "$W/drill/$name" \
    --junit "$W/drill/$name/junit.xml" --work-dir "$W/drill/$name.work" -- \
    env -u LD_LIBRARY_PATH "$PY" "$D/examples/pytorch/train.py" --device "${DRILL_DEVICE:-cuda}" "$@"
}

precision() {
  local v
  for v in "fp32" "fp32 --checkpointing" "bf16" "bf16 --checkpointing"; do
    # shellcheck disable=SC2086
    "$PY" "$S/precision_matrix.py" --precision $v --steps 12 --warmup 3 >>"$W/precision.jsonl" || return
  done
}

export D S W PY TORCHRUN SUMMARY DRILL_DEVICE
export -f say ck environment dcp judge drill precision
say "gpu_checks: $(date -u +%FT%TZ) on $(hostname)"
step environment 40 environment
step dcp_ddp 60 dcp ddp dcp_ddp 1
step dcp_fsdp2 60 dcp fsdp2 dcp_fsdp2 1
step dtypes 40 "$PY" "$S/make_dtypes.py" "$W/files"
step lightning 60 "$PY" "$S/make_frameworks.py" lightning "$W/files"
step hf_trainer 60 "$PY" "$S/make_frameworks.py" hf "$W/files"
step dcp_fsdp2_2rank_gloo 45 dcp fsdp2 dcp_fsdp2_2rank 2 --cpu
step ckptcheck_judge 30 judge
step drill_cuda 90 drill cuda
step precision_matrix 100 precision
step drill_cuda_forget_rng 60 drill cuda_forget_rng --bug forget-rng

# The results worth reading without unpacking anything.
for d in "$W"/drill/*/; do
  [ -f "$d/report.json" ] || continue
  say "drill $(basename "$d"): $("$PY" - "$d/report.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
m = r.get("measurements", {}).get("memory", {})
print("verdict", r.get("verdict"), "| peak_memory_bytes", m.get("peak_memory_bytes"),
      "| failed checks", [c.get("name") + ":" + c.get("mode", "") for c in r.get("checks", []) if not c.get("passed")][:8])
PYEOF
)"
  grep -hE '^(PASS|FAIL|drill )' "$W/logs/drill_$(basename "$d").log" 2>/dev/null | head -3 | sed 's/^/    /' | tee -a "$SUMMARY"
done
if [ -s "$W/precision.jsonl" ]; then
  "$PY" - "$W/precision.jsonl" <<'PYEOF' | tee -a "$SUMMARY"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = next((r for r in rows if r["variant"] == "fp32"), None)
print("precision matrix on", rows[0]["device"], "torch", rows[0]["torch"], "params", rows[0]["parameters"], rows[0]["shape"])
for r in rows:
    rel = max(abs(a - b) / abs(b) for a, b in zip(r["losses"], base["losses"])) if base else None
    print(f"  {r['variant']:<22} peak {r['peak_memory_bytes'] / 2**20:9.1f} MiB  step {r['step_seconds'] * 1e3:8.2f} ms"
          f"  tokens/s {r['tokens_per_second']:10.0f}  loss max rel diff vs fp32 {rel:.2e}")
PYEOF
fi
say "total $(( $(date +%s) - T0 ))s"

# 5. At most 8 files back.
cp "$SUMMARY" "$OUT/summary.log"
[ -s "$W/precision.jsonl" ] && cp "$W/precision.jsonl" "$OUT/precision.jsonl"
tar -C "$W" -czf "$OUT/files.tar.gz" files
tar -C "$W" -czf "$OUT/ckptcheck.tar.gz" ckptcheck
tar -C "$W" -czf "$OUT/drill.tar.gz" --exclude='*.work' drill
tar -C "$W" -czf "$OUT/logs.tar.gz" logs
ls -la "$OUT"
