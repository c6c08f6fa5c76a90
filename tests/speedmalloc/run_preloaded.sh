#!/usr/bin/env bash
# Run programs with libspeedmalloc.so as their malloc (LD_PRELOAD).
#
#   run_preloaded.sh LIB command [args...]      one program
#   run_preloaded.sh LIB --suite BUILD [ctest args...]
#                                               the whole nearmem test suite: every
#                                               test binary (and ctest itself) runs on
#                                               SpeedMalloc; tests labelled preload are
#                                               excluded (they preload on their own).
# NEARMEM_SPEEDMALLOC_STATS=1 prints the allocator's statistics at each exit.
set -euo pipefail
lib=$(readlink -f "$1")
shift
[[ -f "$lib" ]] || { echo "run_preloaded.sh: no library $lib" >&2; exit 2; }
if [[ "${1:-}" == "--suite" ]]; then
  build=$2
  shift 2
  cd "$build"
  exec env LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" ctest --output-on-failure -LE preload "$@"
fi
exec env LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" "$@"
