#!/bin/bash
# The nightly restore drill of a run that is training (or has finished): resume its newest
# checkpoint still on disk in a scratch dir, compare with what the run itself logged, and keep
# the JUnit file and the drill history for the CI's test reporter and trend charts.
#
#   examples/ci/nightly-drill.sh RUN_DIR -- PROGRAM [ARGS...]
#
# RUN_DIR holds the live run's contract log (metrics.jsonl, CKPTCHECK_METRICS) and checkpoints;
# the drill only reads there. Results go to ${OUT:-drill-results}: junit.xml, history.jsonl (kept
# across nights: restore it from the CI cache before and save it after), report/report.html.
# Environment: CKPTCHECK (default: ckptcheck in PATH), WAIT_TIMEOUT (s, default 3600), CONTROL=1
# (resume twice to measure the hardware's run-to-run noise).
# Exit status: the drill's (0 pass, 1 a resume diverged or a check failed, 2 could not run).
set -euo pipefail

run_dir=${1:?usage: nightly-drill.sh RUN_DIR -- PROGRAM [ARGS...]}
shift
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "nightly-drill.sh: no PROGRAM after --" >&2; exit 2; }

out=${OUT:-drill-results}
mkdir -p "$out"
args=(--live "$run_dir/metrics.jsonl" --wait-timeout "${WAIT_TIMEOUT:-3600}"
      --junit "$out/junit.xml" --history "$out/history.jsonl" --report-dir "$out/report")
if [ "${CONTROL:-0}" = 1 ]; then args+=(--control); fi
exec "${CKPTCHECK:-ckptcheck}" drill "${args[@]}" -- "$@"
