#!/usr/bin/env bash
# Formats every tracked C++ file with the checked-in .clang-format (Debian's clang-format 14).
#   format.sh          rewrite in place
#   format.sh --check  exit 1 listing the files that differ (what CI runs through `make test`)
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' 2>/dev/null || find . -name '*.cpp' -o -name '*.h')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'format check: %s differs from .clang-format (run make format)\n' "${bad[@]}"
    exit 1
  fi
  echo "format check: ${#files[@]} files formatted"
else
  clang-format -i --style=file "${files[@]}"
fi
