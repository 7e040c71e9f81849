#!/bin/sh
# The `ckptcheck-verify` pre-commit hook (.pre-commit-hooks.yaml, `language: script`). pre-commit runs
# it from the root of the repository being committed, as `precommit-verify.sh [ARGS...] FILE...` (the
# hook's `args:`, then the staged files). Leading options, given to every `ckptcheck verify`:
# --allow-global M.N (or =M.N), --allow-globals-from F, --pubkey K, --weights-only (the default),
# --no-weights-only (a file must also hold a whole training state); `--` ends them. Each file is
# verified on its own; any failure refuses the commit, and so does a ckptcheck that cannot be found.
ck=${CKPTCHECK:-ckptcheck} wo=--weights-only n=0 want='' files='' rc=0
case $ck in */*) [ -f "$ck" ] && [ -x "$ck" ] ;; *) command -v "$ck" >/dev/null 2>&1 ;; esac || {
  echo "ckptcheck-verify: '$ck' not found: install the ckptcheck package or set CKPTCHECK=/path/to/ckptcheck" >&2
  exit 1; }
for a do  # the list is expanded once: "$@" is then free to hold the options for verify
  n=$((n + 1)); [ $n = 1 ] && set --
  if [ -n "$want" ]; then set -- "$@" "$want=$a"; want=; continue; fi
  if [ -z "$files" ]; then
    case $a in
      --) files=1; continue ;;
      --weights-only) wo=--weights-only; continue ;;
      --no-weights-only) wo=; continue ;;
      --allow-global|--allow-globals-from|--pubkey) want=$a; continue ;;
      --allow-global=?*|--allow-globals-from=?*|--pubkey=?*) set -- "$@" "$a"; continue ;;
      -*) echo "ckptcheck-verify: unknown option '$a' (takes --weights-only, --no-weights-only," \
               "--allow-global M.N, --allow-globals-from FILE, --pubkey KEY, --)" >&2; exit 2 ;;
    esac
    files=1
  fi
  case $a in -*) a=./$a ;; esac  # a file whose name starts with '-' is a file, not an option
  "$ck" verify "$a" $wo "$@" || rc=1
done
[ -z "$want" ] || { echo "ckptcheck-verify: $want needs a value" >&2; exit 2; }
exit $rc
