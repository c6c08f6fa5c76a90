#!/usr/bin/env bash
# nearmem-dpu-cc refuses, at build time, what UPMEM's compiler or linker
# refuses, with a message that says why; and builds separately compiled
# objects. Usage: dpu_cc_refusals.sh <nearmem-dpu-cc>
set -u
cc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

expect_refusal() { # name message flags... (source on stdin)
  local name=$1 msg=$2; shift 2
  cat > "$tmp/$name.c"
  if "$cc" "$@" -o "$tmp/$name" "$tmp/$name.c" > "$tmp/$name.log" 2>&1; then
    echo "FAIL $name: built, expected a refusal ($msg)"; fails=$((fails + 1))
  elif ! grep -q -- "$msg" "$tmp/$name.log"; then
    echo "FAIL $name: refused without '$msg':"; cat "$tmp/$name.log"; fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}

expect_refusal tasklets "the DPU runs 1 to 24 tasklets" -DNR_TASKLETS=30 <<'C'
#include <defs.h>
int main(void) { return me(); }
C
expect_refusal wram "WRAM overflow" -DNR_TASKLETS=16 <<'C'
#include <defs.h>
#include <stdint.h>
uint8_t big[60000];
int main(void) { big[me()] = 1; return 0; }
C
expect_refusal mram_size "MRAM variables take" <<'C'
#include <mram.h>
__mram_noinit uint8_t huge[65 << 20];
int main(void) { return 0; }
C
expect_refusal cast "cast between an MRAM and a WRAM pointer" <<'C'
#include <mram.h>
__mram_noinit int table[16];
int main(void) { int *p = (int *)table; return *p; }
C
expect_refusal undefined "undefined reference to 'malloc'" <<'C'
#include <stdint.h>
#include <stdlib.h>
int main(void) { char *p = malloc(8); p[0] = 1; return p[0] + (int)(uintptr_t)p; }
C
expect_refusal nomain "undefined reference to 'main'" <<'C'
#include <defs.h>
int kernel(void) { return me(); }
C
expect_refusal dma_const "multiple of 8" <<'C'
#include <mram.h>
#include <stdint.h>
__mram_noinit uint64_t m[4];
uint64_t w[4];
int main(void) { mram_read(m, w, 12); return 0; }
C
expect_refusal tls "thread-local" <<'C'
_Thread_local int x;
int main(void) { return x; }
C
expect_refusal atomic "atomic bits" <<'C'
#include <atomic_bit.h>
ATOMIC_BIT_INIT(many)[300];
int main(void) { ATOMIC_BIT_ACQUIRE(many); return 0; }
C

# Units compiled with different NR_TASKLETS.
cat > "$tmp/a.c" <<'C'
#include <defs.h>
int f(void);
int main(void) { return f() + NR_TASKLETS; }
C
cat > "$tmp/b.c" <<'C'
#undef NR_TASKLETS
#define NR_TASKLETS 4
#include <defs.h>
int f(void) { return NR_TASKLETS; }
C
if "$cc" -DNR_TASKLETS=8 -o "$tmp/ab" "$tmp/a.c" "$tmp/b.c" > "$tmp/ab.log" 2>&1 || ! grep -q "different NR_TASKLETS" "$tmp/ab.log"; then
  echo "FAIL mixed NR_TASKLETS not refused"; cat "$tmp/ab.log"; fails=$((fails + 1))
else
  echo "ok   mixed_tasklets"
fi

# Separate compilation and linking, as Makefiles do.
sed -i '1,2d' "$tmp/b.c"
if "$cc" -c -DNR_TASKLETS=8 -O2 -o "$tmp/a.o" "$tmp/a.c" && "$cc" -c -DNR_TASKLETS=8 -o "$tmp/b.o" "$tmp/b.c" &&
   "$cc" -DNR_TASKLETS=8 -o "$tmp/ab" "$tmp/a.o" "$tmp/b.o" && [[ -s "$tmp/ab" ]]; then
  echo "ok   separate"
else
  echo "FAIL separate compilation"; fails=$((fails + 1))
fi
[[ $fails -eq 0 ]]
