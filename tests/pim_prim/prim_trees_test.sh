#!/usr/bin/env bash
# Every tree of the PrIM-style set builds with its own Makefile and runs with
# nothing changed but PATH: nearmem is installed into a prefix inside the
# build tree, that prefix's bin/ goes first in PATH (dpu-upmem-dpurte-clang,
# dpu-pkg-config), each tree is copied, `make NR_TASKLETS=<t>` builds
# bin/dpu_code and bin/host_code, the host runs, and the copy differs from the
# source only by what make created (bin/).
#   prim_trees_test.sh <build dir> <bench/pim/prim> <tasklets> <dpus>
set -uo pipefail
build=$1 src=$2 tasklets=$3 dpus=$4
# one directory per run: the whole suite also runs preloaded (speedmalloc_preload_whole_suite)
# beside the plain run, and two runs sharing a directory removed each other's trees
work="$build/upmem-tree/prim-t$tasklets.$$"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" || { cat "$work/install.log"; exit 1; }
export PATH="$work/prefix/bin:$PATH"
command -v dpu-upmem-dpurte-clang | grep -q "^$work/prefix/bin/" || { echo "installed dpu-upmem-dpurte-clang not first in PATH"; exit 1; }

declare -A args=(
  [VA]="-n 100003" [RED]="-n 100003" [SCAN-SSA]="-n 100003" [HST-S]="-n 100003 -b 256"
  [HST-L]="-n 100003 -b 4096" [BS]="-n 5001 -q 100003" [GEMV]="-m 3001 -n 257" [SEL]="-n 100003"
  [UNI]="-n 100003" [TRNS]="-M 12 -m 16 -N 67 -n 8" [MLP]="-l 3 -n 301" [BFS]="-n 20011 -k 6")
fail=0
for b in VA RED SCAN-SSA HST-S HST-L BS GEMV SEL UNI TRNS MLP BFS; do
  cp -r "$src/$b" "$work/$b"
  if ! (cd "$work/$b" && make NR_TASKLETS="$tasklets" > make.log 2>&1); then
    echo "FAIL: $b: make"; tail -20 "$work/$b/make.log"; fail=1; continue
  fi
  rm -f "$work/$b/make.log"
  changed=$(diff -rq "$src/$b" "$work/$b" | grep -v "^Only in $work/$b: bin$")
  if [[ -n "$changed" ]]; then
    echo "FAIL: $b: the build changed the tree:"; echo "$changed"; fail=1
  fi
  # shellcheck disable=SC2086
  if out=$(cd "$work/$b" && ./bin/host_code -d "$dpus" ${args[$b]} 2>&1) && grep -q '^\[OK\]' <<<"$out"; then
    echo "$b: built with $(cd "$work/$b" && command -v dpu-upmem-dpurte-clang), $(tail -1 <<<"$out")"
  else
    echo "FAIL: $b: ./bin/host_code -d $dpus ${args[$b]}"; tail -5 <<<"$out"; fail=1
  fi
done
exit $fail
