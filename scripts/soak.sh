#!/usr/bin/env bash
# Soak of the commit, retention and resume protocols: K cycles, in one checkpoint root, of
#   ckptcheck train ... --resume latest  ->  SIGKILL at a random point  ->  verify --all  ->  again
# Kills are biased into the dangerous windows: some cycles hold inside a save (--drill-hold
# during-save), right after a commit (after-save) or half-way through a prune (during-prune) and are
# killed there; the rest after a random delay. Every run prunes (--keep-last/--keep-every), so
# deletion is soaked too. When a root reaches TOTAL steps its final checkpoint is compared with an
# uninterrupted reference run, tensor by tensor, tolerance 0; remaining cycles start a fresh root.
# After the last cycle the current root is finished without a kill and compared as well.
#
#   lost      a committed checkpoint that later fails verify, or vanishes without the retention
#             policy allowing it (a step that is a multiple of --keep-every, or one with fewer than
#             --keep-last committed checkpoints after it)
#   diverged  a finished root whose final checkpoint differs from the reference
# The last line is the summary: "N cycles, N kills during save, 0 lost, 0 diverged". Exit 1 when
# anything was lost or diverged, or a run failed on its own; 2 on a usage error.
#
# Usage: scripts/soak.sh --cycles K --bin PATH/ckptcheck [--seed S] [--total N] [--save-every S]
#                        [--keep-last N] [--keep-every M] [--config F] [--keep-work]
set -uo pipefail

SRC="$(cd "$(dirname "$0")/.." && pwd)"
CYCLES=""
BIN=""
SEED=""
TOTAL=32          # steps per root: with kills every ~4-8 steps, a root finishes every ~6 cycles
SAVE_EVERY=2
KEEP_LAST=2
KEEP_EVERY=8
CONFIG="$SRC/fixtures/configs/pilot.yaml"
KEEP_WORK=0

die_usage() { echo "soak.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cycles) CYCLES="${2:-}"; shift 2 ;;
    --bin) BIN="${2:-}"; shift 2 ;;
    --seed) SEED="${2:-}"; shift 2 ;;
    --total) TOTAL="${2:-}"; shift 2 ;;
    --save-every) SAVE_EVERY="${2:-}"; shift 2 ;;
    --keep-last) KEEP_LAST="${2:-}"; shift 2 ;;
    --keep-every) KEEP_EVERY="${2:-}"; shift 2 ;;
    --config) CONFIG="${2:-}"; shift 2 ;;
    --keep-work) KEEP_WORK=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
done
is_count() { [[ "$1" =~ ^[0-9]+$ ]] && (( $1 > 0 )); }
is_count "$CYCLES" || die_usage "--cycles K (K > 0) is required"
[[ -x "$BIN" ]] || die_usage "--bin: '$BIN' is not an executable ckptcheck"
for v in TOTAL SAVE_EVERY KEEP_LAST KEEP_EVERY; do is_count "${!v}" || die_usage "--${v,,}: positive integer"; done
(( TOTAL % SAVE_EVERY == 0 )) || die_usage "--total must be a multiple of --save-every"
[[ -f "$CONFIG" ]] || die_usage "--config: no such file '$CONFIG'"
# Replayable: the kill modes, hold steps and delays all come from $RANDOM seeded here (only the
# scheduler's timing of the random-delay kills is not).
[[ -n "$SEED" ]] || SEED=$(( $(date +%s) % 100000 ))
[[ "$SEED" =~ ^[0-9]+$ ]] || die_usage "--seed: a non-negative integer"
RANDOM=$SEED

WORK="$(mktemp -d "${TMPDIR:-/tmp}/ckptcheck-soak-XXXXXX")"
export CKPTCHECK_NO_PROGRESS=1
child=""
cleanup() {
  [[ -n "$child" ]] && kill -9 "$child" 2>/dev/null
  if (( KEEP_WORK )); then echo "soak: work dir kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 2' INT TERM

cycles=0 kills_in_save=0 kills_in_prune=0 lost=0 diverged=0 failed=0 finished=0 root_index=0
log() { echo "soak: $*" >&2; }
declare -A lost_paths=()

# A live process (a zombie waiting to be reaped is not).
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z ]]
}
# Waits for a line matching $1 in file $2 while process $3 runs: 0 seen, 1 the process ended first.
wait_for_line() {
  local deadline=$((SECONDS + 180))
  until grep -q -- "$1" "$2" 2>/dev/null; do
    alive "$3" || { grep -q -- "$1" "$2" 2>/dev/null; return $?; }
    (( SECONDS < deadline )) || { log "timed out waiting for '$1' in $2"; return 1; }
    sleep 0.02
  done
}
random_between() {  # seconds in [$1, $2), three decimals
  awk -v lo="$1" -v hi="$2" -v r="$RANDOM" 'BEGIN { printf "%.3f", lo + (hi - lo) * r / 32768 }'
}
committed_steps() {  # the committed step numbers of root $1, ascending
  local d
  for d in "$1"/step_*; do
    [[ -f "$d/manifest.json" ]] && echo $((10#${d##*/step_}))
  done
}
latest_step() {  # what `latest` names in root $1, -1 when nothing is committed
  local name
  name=$(cat "$1/latest" 2>/dev/null) || { echo -1; return; }
  [[ -f "$1/$name/manifest.json" ]] && echo $((10#${name#step_})) || echo -1
}
leftovers() { (cd "$1" 2>/dev/null && ls -d .tmp-* .deleting-* 2>/dev/null) | sort; }

# verify --all; counts checkpoints that fail as lost (each was committed, so it must verify).
verify_root() {
  local root="$1" out rc failing p
  [[ -n "$(committed_steps "$root")" ]] || return 0
  out="$WORK/verify.json"
  "$BIN" verify --all "$root" --json >"$out" 2>"$WORK/verify.err"
  rc=$?
  (( rc == 0 )) && return 0
  failing=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(" ".join(c["path"] for c in r["checkpoints"] if not c["ok"]))' "$out" 2>/dev/null)
  [[ -n "$failing" ]] || failing="$root(verify-exit-$rc)"
  log "cycle $cycles: verify --all $root exited $rc; failing: $failing"
  head -c 2000 "$out" >&2; cat "$WORK/verify.err" >&2
  for p in $failing; do  # each lost checkpoint counts once, however many cycles see it
    [[ -n "${lost_paths[$p]:-}" ]] && continue
    lost_paths[$p]=1
    lost=$((lost + 1))
  done
  KEEP_WORK=1
}

# A step committed before the cycle and gone after it must have been allowed to go.
check_vanished() {
  local before="$1" after="$2" s t newer
  for s in $before; do
    grep -qx "$s" <<<"$after" && continue
    newer=0
    for t in $after; do (( t > s )) && newer=$((newer + 1)); done
    if (( s % KEEP_EVERY == 0 || newer < KEEP_LAST )); then
      log "cycle $cycles: step $s vanished without the policy allowing it (keep-every $KEEP_EVERY," \
        "$newer newer committed, keep-last $KEEP_LAST)"
      lost=$((lost + 1))
      KEEP_WORK=1
    fi
  done
}

compare_with_reference() {
  local root="$1" name
  name=$(printf 'step_%08d' "$TOTAL")
  if "$BIN" diff "$REF/$name" "$root/$name" --rtol 0 --atol 0 >"$WORK/diff.out" 2>&1; then
    finished=$((finished + 1))
  else
    log "$root/$name differs from the uninterrupted reference:"
    tail -n 20 "$WORK/diff.out" >&2
    diverged=$((diverged + 1))
    KEEP_WORK=1
  fi
}

train_args() {  # for root $1: the common flags, and --resume latest once something is committed
  local args=(train --config "$CONFIG" --ckpt-dir "$1" --save-every "$SAVE_EVERY" --steps "$TOTAL"
    --keep-last "$KEEP_LAST" --keep-every "$KEEP_EVERY" --metrics "$WORK/metrics.jsonl")
  (( $(latest_step "$1") >= 0 )) && args+=(--resume latest)
  printf '%s\n' "${args[@]}"
}

# ---- the uninterrupted reference, and calibration of the random delays --------------------------
REF="$WORK/reference"
start=$SECONDS
t0=$(date +%s.%N)
if ! "$BIN" train --config "$CONFIG" --ckpt-dir "$WORK/startup" --steps 1 --metrics "$WORK/startup.jsonl" \
  >/dev/null 2>"$WORK/startup.err"; then
  log "a 1-step run failed:"; cat "$WORK/startup.err" >&2; exit 1
fi
t1=$(date +%s.%N)
if ! "$BIN" train --config "$CONFIG" --ckpt-dir "$REF" --save-every "$SAVE_EVERY" --steps "$TOTAL" \
  --metrics "$WORK/reference.jsonl" >/dev/null 2>"$WORK/reference.err"; then
  log "the reference run failed:"; cat "$WORK/reference.err" >&2; exit 1
fi
t2=$(date +%s.%N)
STARTUP=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
STEP=$(awk -v a="$t1" -v b="$t2" -v s="$STARTUP" -v n="$TOTAL" \
  'BEGIN { x = (b - a - s) / (n - 1); if (x < 0.02) x = 0.02; printf "%.3f", x }')
log "seed $SEED; reference: $TOTAL steps; start-up ${STARTUP}s, ~${STEP}s per step; work dir $WORK"

# ---- the cycles -------------------------------------------------------------------------------
ROOT="$WORK/root-0"
while (( cycles < CYCLES )); do
  L=$(latest_step "$ROOT")
  if (( L >= TOTAL )); then
    compare_with_reference "$ROOT"
    rm -rf "$ROOT"
    root_index=$((root_index + 1))
    ROOT="$WORK/root-$root_index"
    L=-1
  fi
  cycles=$((cycles + 1))
  before=$(committed_steps "$ROOT")
  leftovers_before=$(leftovers "$ROOT")
  mapfile -t args < <(train_args "$ROOT")
  next=$(( (L < 0 ? 0 : L) ))
  hold_step=$(( next + SAVE_EVERY * (1 + RANDOM % 3) ))
  (( hold_step > TOTAL )) && hold_step=$TOTAL
  mode=$(( RANDOM % 10 ))
  case $mode in
    0|1|2) args+=(--drill-hold during-save --drill-hold-step "$hold_step"); event="shard-written" ;;
    3|4) args+=(--drill-hold after-save --drill-hold-step "$hold_step")
         event="committed .*$(printf 'step_%08d' "$hold_step")\$" ;;
    5) args+=(--drill-hold during-prune); event="prune-renamed" ;;
    *) event="" ;;
  esac
  out="$WORK/cycle.out"
  : >"$out"
  "$BIN" "${args[@]}" >"$out" 2>"$WORK/cycle.err" &
  child=$!
  if [[ -n "$event" ]]; then
    wait_for_line "ckptcheck-event: $event" "$out" "$child"
  else
    sleep "$(random_between "$(awk -v s="$STARTUP" 'BEGIN { print s / 2 }')" \
      "$(awk -v s="$STARTUP" -v t="$STEP" -v k="$SAVE_EVERY" 'BEGIN { print s + 4 * k * t }')")"
  fi
  kill -9 "$child" 2>/dev/null
  rc=0
  { wait "$child" || rc=$?; } 2>/dev/null  # no "Killed" job notice: the kill is the point
  child=""
  if (( rc != 0 && rc != 137 )); then
    log "cycle $cycles: train exited $rc on its own:"; tail -n 5 "$WORK/cycle.err" >&2
    failed=$((failed + 1))
    KEEP_WORK=1
  fi
  new_leftovers=$(comm -13 <(echo "$leftovers_before") <(leftovers "$ROOT"))
  grep -q '^\.tmp-' <<<"$new_leftovers" && kills_in_save=$((kills_in_save + 1))
  grep -q '^\.deleting-' <<<"$new_leftovers" && kills_in_prune=$((kills_in_prune + 1))
  for d in "$ROOT"/step_*; do  # a manifest-less step dir would be a torn save under a committed name
    [[ -d "$d" && ! -f "$d/manifest.json" ]] && { log "cycle $cycles: $d has no manifest"; lost=$((lost + 1)); }
  done
  verify_root "$ROOT"
  check_vanished "$before" "$(committed_steps "$ROOT")"
  (( cycles % 50 == 0 )) && log "$cycles cycles, $kills_in_save kills during save, $kills_in_prune during prune," \
    "$lost lost, $diverged diverged, $finished roots finished, $((SECONDS - start)) s"
done

# ---- finish the last root without a kill, and compare it too ------------------------------------
if (( $(latest_step "$ROOT") < TOTAL )); then
  mapfile -t args < <(train_args "$ROOT")
  before=$(committed_steps "$ROOT")
  if ! "$BIN" "${args[@]}" >/dev/null 2>"$WORK/finish.err"; then
    log "finishing $ROOT failed:"; tail -n 5 "$WORK/finish.err" >&2
    failed=$((failed + 1))
  fi
  verify_root "$ROOT"
  check_vanished "$before" "$(committed_steps "$ROOT")"
fi
(( $(latest_step "$ROOT") >= TOTAL )) && compare_with_reference "$ROOT"

log "$finished root(s) finished and compared, $kills_in_prune kills during prune, $failed runs failed" \
  "on their own, $((SECONDS - start)) s"
echo "$cycles cycles, $kills_in_save kills during save, $lost lost, $diverged diverged"
(( lost == 0 && diverged == 0 && failed == 0 )) || exit 1
exit 0
