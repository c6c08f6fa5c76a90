#!/usr/bin/env bash
# prim_sched_check.sh <prim-build-dir> <tasklets...> -- <bench> <host options...> [-- <bench> ...]
# The machine's fast scheduler against the reference one (NEARMEM_PIM_SCHED=reference):
# every PrIM-style benchmark run at 64 DPUs with each tasklet count, once with each;
# the modeled kernel and transfer time of every DPU set (NEARMEM_PIM_TOTALS, printed
# with 17 digits) must be bit-identical, and both runs correct.
set -u
dir=$1; shift
tasklets=()
while [[ $# -gt 0 && $1 != -- ]]; do tasklets+=("$1"); shift; done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; runs=0
while [[ $# -gt 0 ]]; do
  shift # --
  b=$1; shift
  args=()
  while [[ $# -gt 0 && $1 != -- ]]; do args+=("$1"); shift; done
  for t in "${tasklets[@]}"; do
    for mode in fast reference; do
      rm -f "$tmp/$mode"
      if [[ $mode == reference ]]; then export NEARMEM_PIM_SCHED=reference; else unset NEARMEM_PIM_SCHED; fi
      if ! (cd "$dir/$b/t$t" && NEARMEM_PIM_TOTALS="$tmp/$mode" "$dir/$b/host_code" -d 64 "${args[@]}" > "$tmp/log" 2>&1); then
        echo "FAIL: $b t=$t $mode run failed"; tail -3 "$tmp/log"; fail=1
      fi
    done
    unset NEARMEM_PIM_SCHED
    runs=$((runs + 1))
    # host_* fields are host time; the rest is modeled and must match exactly
    f=$(sed 's/ host_[a-z_]*=[^ ]*//g' "$tmp/fast" 2>/dev/null)
    r=$(sed 's/ host_[a-z_]*=[^ ]*//g' "$tmp/reference" 2>/dev/null)
    if [[ -z $f || $f != "$r" ]]; then
      echo "FAIL: $b t=$t: fast and reference schedulers differ"; echo " fast: $f"; echo " ref:  $r"; fail=1
    fi
  done
done
echo "$runs benchmark x tasklet pairs compared: $([[ $fail -eq 0 ]] && echo bit-identical || echo DIFFERENCES)"
exit $fail
