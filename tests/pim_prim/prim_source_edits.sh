#!/usr/bin/env bash
# prim_source_edits.sh <nearmem-bench> <bench/pim/prim>: the suite counts 0
# nearmem-specific lines in the set, and exactly the ones added to a copy.
set -eu
bench=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
count() {
  "$bench" pim-prim --quick --quiet --set only=sources --set prim_src="$1" --json "$tmp/out.json" > /dev/null
  sed -n 's/.*"prim_source_edits": *\([0-9.]*\).*/\1/p' "$tmp/out.json"
}
n=$(count "$src")
[[ "$n" == "0" ]] || { echo "the set has $n nearmem-specific lines (expected 0)"; exit 1; }
cp -r "$src" "$tmp/prim"
cat >> "$tmp/prim/VA/dpu/task.c" <<'X'
DPU_HOST(uint32_t, extra);
int DPU_MAIN(void);
X
echo '#include <nearmem/pim/host.h>' >> "$tmp/prim/BFS/host/app.c"
echo 'static inline void charge(void) { nm_pim_charge(6); } /* NM_ */' >> "$tmp/prim/SEL/support/common.h"
echo 'uint32_t heap = (uint32_t)DPU_MRAM_HEAP_POINTER; /* plain UPMEM C: not counted */' >> "$tmp/prim/RED/dpu/task.c"
n=$(count "$tmp/prim")
[[ "$n" == "4" ]] || { echo "counted $n nearmem-specific lines in the edited copy (expected 4)"; exit 1; }
echo "prim_source_edits: 0 on the set, 4 of 4 added lines found"
