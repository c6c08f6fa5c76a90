#!/usr/bin/env bash
# prim_check.sh <bench-dir> "<tasklets at 1 and 64 DPUs>" "<tasklets at 2560 DPUs>" <host options...>
# Runs one PrIM-style benchmark as a user would (<bench-dir>/host_code in
# <bench-dir>/t<T>, which holds ./bin/dpu_code) at 1, 64 and 2560 DPUs; every
# run must exit 0, i.e. its host found the DPUs' result equal to its own.
set -u
dir=$1; small=$2; big=$3; shift 3
fail=0; runs=0
run() {
  local t=$1 d=$2 log
  shift 2
  log=$(cd "$dir/t$t" && "$dir/host_code" -d "$d" "$@" 2>&1)
  local rc=$?
  runs=$((runs + 1))
  if [[ $rc -ne 0 ]] || ! grep -q '^\[OK\]' <<<"$log"; then
    echo "FAIL: $(basename "$dir") tasklets=$t dpus=$d $* (exit $rc)"; tail -5 <<<"$log"; fail=1
  fi
}
for t in $small; do for d in 1 64; do run "$t" "$d" "$@"; done; done
for t in $big; do run "$t" 2560 "$@"; done
echo "$(basename "$dir"): $runs runs, $([[ $fail -eq 0 ]] && echo all correct || echo FAILURES)"
exit $fail
