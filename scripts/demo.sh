#!/usr/bin/env bash
# What `make demo` runs: the restore drill on the built-in pilot, killed both after a committed
# save and in the middle of one, with the report written next to the build.
set -euo pipefail
BUILD="${1:-build}"
REPORT="$BUILD/demo-report"
cd "$(dirname "$0")/.."
status=0
"$BUILD/ckptcheck" drill --config fixtures/configs/pilot.yaml --kill both --report-dir "$REPORT" \
  --work-dir "$BUILD/demo-work" || status=$?
echo
echo "report: $REPORT/report.html (open it in a browser); numbers: $REPORT/report.json"
exit $status
