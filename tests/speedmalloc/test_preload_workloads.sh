#!/usr/bin/env bash
# Every workload of the speedmalloc suites (each verifies what it computed: block
# contents, BFS trees, BC scores, cube totals, ...) on SpeedMalloc, at a small scale,
# with 1 and 2 threads, also with the server disabled (inline mode); and the contention
# suite's allocator-free control, xmalloc-floor, with 1-3 threads. Exit status only.
#   test_preload_workloads.sh LIB WORKLOAD_BIN
set -euo pipefail
lib=$(readlink -f "$1") work=$(readlink -f "$2")
single="glibc-simple cfrac espresso barnes"
all="larson xmalloc-test cache-scratch sh6bench sh8bench mstress alloc-test glibc-thread glibc-simple
     rptest cache-thrash mleak malloc-large cfrac espresso barnes bfs bc dc"
fail=0
for w in $all; do
  for t in 1 2; do
    [[ $t == 2 && " $single " == *" $w "* ]] && continue
    for mode in server inline; do
      env=()
      [[ $mode == inline ]] && env=(NEARMEM_SPEEDMALLOC_INLINE=1)
      if ! out=$(env "${env[@]}" LD_PRELOAD="$lib" "$work" "$w" "$t" 0.05 7 2>&1); then
        echo "FAIL: $w $t threads ($mode): $out" >&2
        fail=1
      fi
    done
  done
done
for t in 1 2 3; do
  if ! out=$(env -u LD_PRELOAD "$work" xmalloc-floor "$t" 0.05 7 2>&1); then
    echo "FAIL: xmalloc-floor $t threads: $out" >&2
    fail=1
  fi
done
exit $fail
