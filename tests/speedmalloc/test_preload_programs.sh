#!/usr/bin/env bash
# Real programs on SpeedMalloc (LD_PRELOAD): the stress program with content
# checks, python3 running an allocation-heavy script, git on a real repository.
#   test_preload_programs.sh LIB STRESS_BIN SOURCE_DIR WHAT
set -euo pipefail
lib=$(readlink -f "$1") stress=$(readlink -f "$2") src=$3 what=$4
here=$(cd "$(dirname "$0")" && pwd)
run() { "$here/run_preloaded.sh" "$lib" "$@"; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

case "$what" in
stress)
  # exits non-zero on any content, alignment or statistics check failure
  run "$stress"
  # the statistics at exit, on stderr, without stdio inside the allocator
  NEARMEM_SPEEDMALLOC_STATS=1 run /usr/bin/python3 -c "x = [1] * 1000" 2> "$dir/st.txt"  # (coreutils close stderr at exit)
  grep -q "speedmalloc statistics:" "$dir/st.txt"
  grep -Eq "server_running +[01]" "$dir/st.txt"
  # a process whose main() ends with pthread_exit ends when its last thread does (the
  # server thread must not keep it alive; it did, forever, before)
  [[ "$(timeout 60 "$here/run_preloaded.sh" "$lib" "$stress" --pthread-exit)" == "preload_stress: pthread-exit ok" ]]
  # unshare(CLONE_NEWUSER) and setns into a user namespace need a single-threaded process:
  # the server thread steps aside (they failed with EINVAL before); only where the kernel
  # lets this user make a user namespace at all
  if command -v unshare > /dev/null && unshare -U true 2> /dev/null; then
    [[ "$(run "$stress" --unshare)" == "preload_stress: unshare ok" ]]
    run unshare -U true
    [[ "$(run unshare --user --map-root-user sh -c 'id -u')" == "0" ]]
  else
    echo "user namespaces not available here: unshare checks skipped"
  fi
  # inline fallback mode (no server thread) works too
  NEARMEM_SPEEDMALLOC_INLINE=1 run "$stress" --quick
  # the server pinned to a CPU
  NEARMEM_SPEEDMALLOC_CPU=0 run "$stress" --quick
  # a server that looks awake but never runs (issue 18: clients must not wait for it)
  NEARMEM_SPEEDMALLOC_FAULT=stalled-server NEARMEM_SPEEDMALLOC_STATS=1 run "$stress" --quick 2> "$dir/stall.txt"
  awk '/inline_serves/ { if ($2 > n) n = $2 } END { exit !(n > 0) }' "$dir/stall.txt"
  NEARMEM_SPEEDMALLOC_FAULT=stalled-server run /usr/bin/python3 -c "import threading; r=[]; ts=[threading.Thread(target=lambda: r.append(sum(len(str(i)*7) for i in range(200000)))) for _ in range(3)]; [t.start() for t in ts]; [t.join() for t in ts]; assert len(r) == 3"
  ;;
python)
  py=/usr/bin/python3
  cat > "$dir/alloc.py" <<'PY'
import json, random, threading
random.seed(5)
d = {}
for i in range(200000):
    d[str(i)] = [i] * (i % 9)
assert sum(len(v) for v in d.values()) == sum(i % 9 for i in range(200000))
s = json.dumps({k: v for k, v in list(d.items())[:50000]})
assert json.loads(s)["49999"] == [49999] * (49999 % 9)
big = [bytearray(random.randrange(1, 3 << 20)) for _ in range(40)]   # large objects
for b in big:
    b[-1] = 7
assert all(b[-1] == 7 for b in big)
res = []
def work(n):
    acc = {}
    for i in range(60000):
        acc[(n, i % 5000)] = "x" * (i % 300)
    res.append(len(acc))
ts = [threading.Thread(target=work, args=(n,)) for n in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
assert res == [5000] * 4
print("python-ok")
PY
  [[ "$(run "$py" "$dir/alloc.py")" == "python-ok" ]]
  # a thread forks; in the child that thread is the only one and finishes with a thread
  # exit, not exit(): the child must end (CPython's test_threading hung here before)
  cat > "$dir/forkthread.py" <<'PY'
import os, sys, threading
main_thread = threading.current_thread()
def joiner(t):
    t.join()
def worker():
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        print("fork-thread-ok" if status == 0 else "child status %d" % status)
        return
    t = threading.Thread(target=joiner, args=(main_thread,))
    t.start()
    t.join()
w = threading.Thread(target=worker)
w.start()
w.join()
PY
  [[ "$(timeout 60 "$here/run_preloaded.sh" "$lib" "$py" "$dir/forkthread.py")" == "fork-thread-ok" ]]
  ;;
git)
  command -v git > /dev/null || { echo "git not installed: skipped"; exit 0; }
  git clone -q --no-hardlinks "$src" "$dir/repo" 2> /dev/null || cp -r "$src" "$dir/repo"
  cd "$dir/repo"
  if [[ ! -d .git ]]; then git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm init; fi
  run git log --oneline > "$dir/log.txt"
  [[ -s "$dir/log.txt" ]]
  run git -c user.name=t -c user.email=t@t commit -q --allow-empty -m "preloaded commit"
  run git gc -q
  run git fsck --no-dangling 2>&1 | tee "$dir/fsck.txt"
  ! grep -qi error "$dir/fsck.txt"
  [[ "$(run git log -1 --format=%s)" == "preloaded commit" ]]
  [[ "$(run git rev-list --count HEAD)" == "$(git rev-list --count HEAD)" ]]
  ;;
forkstorm)
  # bash (fork + exec per command, subshells, pipes, command substitutions) on SpeedMalloc
  cat > "$dir/storm.sh" <<'SH'
n=0
for i in $(seq 1 150); do
  ( x=$(printf '%s' "$i" | tr 0-9 a-j); [ -n "$x" ] && echo "$x" ) > "$STORMDIR/out.$i" &
  if (( i % 25 == 0 )); then wait; fi
done
wait
for i in $(seq 1 150); do [ -s "$STORMDIR/out.$i" ] && n=$((n + 1)); done
echo "$n"
SH
  [[ "$(STORMDIR=$dir run /bin/bash "$dir/storm.sh")" == "150" ]]
  # python: threads allocating while the main thread forks children that allocate
  cat > "$dir/fork.py" <<'PY'
import os, threading
stop = False
def churn():
    while not stop:
        d = {i: [i] * (i % 7) for i in range(2000)}
        assert len(d) == 2000
ts = [threading.Thread(target=churn) for _ in range(3)]
[t.start() for t in ts]
bad = 0
for k in range(40):
    pid = os.fork()
    if pid == 0:
        s = sum(len(str(i) * 5) for i in range(5000))
        t = threading.Thread(target=lambda: [bytearray(1 << 16) for _ in range(20)])
        t.start(); t.join()
        os._exit(0 if s > 0 else 1)
    _, st = os.waitpid(pid, 0)
    bad += st != 0
stop = True
[t.join() for t in ts]
print("fork-ok" if bad == 0 else "fork-bad %d" % bad)
PY
  [[ "$(run /usr/bin/python3 "$dir/fork.py")" == "fork-ok" ]]
  ;;
redis)
  command -v redis-server > /dev/null && command -v redis-cli > /dev/null || { echo "redis not installed: skipped"; exit 0; }
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  run redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" > "$dir/redis.log" 2>&1 &
  srv=$!
  trap 'kill $srv 2> /dev/null || true; rm -rf "$dir"' EXIT
  for _ in $(seq 1 200); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.05; done
  cli() { redis-cli -p "$port" "$@"; }
  [[ "$(cli set k1 hello)" == "OK" && "$(cli get k1)" == "hello" ]]
  head -c 300000 /dev/zero | tr '\0' x > "$dir/big.txt"   # a large object (> 256 KiB)
  cli -x set big < "$dir/big.txt" > /dev/null
  [[ "$(cli strlen big)" == "300000" ]]
  for i in $(seq 1 50); do cli rpush lst "v$i" > /dev/null; done
  [[ "$(cli lrange lst 0 -1 | tr '\n' ' ')" == "$(for i in $(seq 1 50); do printf 'v%s ' "$i"; done)" ]]
  cli sadd s a b c a > /dev/null
  [[ "$(cli scard s)" == "3" ]]
  cli zadd z 3 c 1 a 2 b > /dev/null
  [[ "$(cli zrange z 0 -1 | tr '\n' ' ')" == "a b c " ]]
  # allocation-heavy traffic (pipelined), then the data must still be right
  redis-benchmark -p "$port" -q -n 20000 -P 16 -c 20 -d 512 -r 5000 -t set,get,lpush,lpop,sadd,zadd > /dev/null
  [[ "$(cli get k1)" == "hello" && "$(cli strlen big)" == "300000" && "$(cli llen lst)" == "50" ]]
  cli flushall > /dev/null
  [[ "$(cli dbsize)" == "0" ]]
  cli shutdown nosave > /dev/null 2>&1 || true
  wait "$srv" || true
  ;;
*) echo "unknown case $what" >&2; exit 2 ;;
esac
