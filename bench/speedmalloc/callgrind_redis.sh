#!/bin/bash
# Instructions that redis-server executes for a fixed pipelined request mix, counted by
# callgrind (repeatable, unlike ops/s on a shared machine), under one allocator:
#   bench/speedmalloc/callgrind_redis.sh NAME [LIB.so]   (no LIB: redis as Debian ships it, jemalloc)
# N requests of each of SET GET LPUSH LPOP SADD ZADD (-P 16, 10 clients, D-byte values,
# defaults N=20000 D=256). Prints redis-benchmark's figures (meaningless under valgrind), the
# total and the allocator's share (functions of the allocator's library); the profile is
# left in $OUT/NAME.out (OUT defaults to /tmp).
set -u
command -v valgrind >/dev/null && command -v redis-server >/dev/null || { echo "needs valgrind and redis-server" >&2; exit 1; }
name=$1; lib=${2:-}
OUT=${OUT:-/tmp}
N=${N:-20000}; D=${D:-256}
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
if [ -n "$lib" ]; then pre="env LD_PRELOAD=$lib"; else pre="env -u LD_PRELOAD"; fi
$pre valgrind --tool=callgrind --callgrind-out-file=$OUT/$name.out /usr/bin/redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no --dir $dir >$OUT/$name.log 2>&1 &
vpid=$!
for i in $(seq 1 200); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.2; done
for t in set get lpush lpop sadd zadd; do
  redis-benchmark -h 127.0.0.1 -p $port -n $N -c 10 -P 16 -d $D -r 10000 -t $t --csv 2>/dev/null | grep -v '^"test"' | cut -d, -f1,2
done
redis-cli -p $port shutdown nosave >/dev/null 2>&1
wait $vpid
rm -rf $dir
grep -E "Collected" $OUT/$name.log
pat=${lib:-libjemalloc}
callgrind_annotate --threshold=100 $OUT/$name.out 2>/dev/null | grep "$(basename "${pat%%.so*}")" | \
    awk '{gsub(",", "", $1); s += $1} END {printf "allocator functions: %d instructions\n", s}'
