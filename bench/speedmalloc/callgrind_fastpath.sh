#!/bin/sh
# Instructions per malloc(64) and per free of a client's fast path, counted by callgrind
# (repeatable, unlike wall time on a shared machine). Two patterns: "pairs" (malloc, then
# free at once) and "batch" (32 mallocs, then 32 frees in reverse: blocks stay live).
# Usage: bench/speedmalloc/callgrind_fastpath.sh [LIB.so ...]
#   default: build/lib/libspeedmalloc.so and Debian's libmimalloc.so.2
set -eu
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
here=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -gt 0 ] || set -- "$here/build/lib/libspeedmalloc.so" /usr/lib/x86_64-linux-gnu/libmimalloc.so.2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/p.c" <<'C'
#include <stdlib.h>
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    int batch = argv[2][0] == 'b';
    void *volatile a[32];
    for (long i = 0; i < n / 32; i++) {
        if (batch) {
            for (int k = 0; k < 32; k++) a[k] = malloc(64);
            for (int k = 31; k >= 0; k--) free(a[k]);
        } else {
            for (int k = 0; k < 32; k++) { a[0] = malloc(64); free(a[0]); }
        }
    }
    return 0;
}
C
cc -O2 -fno-builtin -o "$tmp/p" "$tmp/p.c"
# Count one run of N and one of N + 1048576 calls; the difference is pure steady state.
fn_ir() { callgrind_annotate "$1" 2>/dev/null | awk -v f="$2" '$0 ~ "\\?\\?\\?:" f " " {gsub(",", "", $1); print $1}'; }
for lib in "$@"; do
    for pat in pairs batch; do
        for n in 65536 1114112; do
            LD_PRELOAD=$lib valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$n" "$tmp/p" $n $pat >/dev/null 2>&1
        done
        m=$(( $(fn_ir "$tmp/cg.1114112" malloc) - $(fn_ir "$tmp/cg.65536" malloc) ))
        f=$(( $(fn_ir "$tmp/cg.1114112" free) - $(fn_ir "$tmp/cg.65536" free) ))
        awk -v l="$(basename "$lib")" -v p=$pat -v m=$m -v f=$f \
            'BEGIN { printf "%-22s %-5s malloc %5.1f  free %5.1f  pair %5.1f instructions\n", l, p, m / 1048576, f / 1048576, (m + f) / 1048576 }'
    done
done
