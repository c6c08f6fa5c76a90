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
  # inline fallback mode (no server thread) works too
  NEARMEM_SPEEDMALLOC_INLINE=1 run "$stress" --quick
  # the server pinned to a CPU
  NEARMEM_SPEEDMALLOC_CPU=0 run "$stress" --quick
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
*) echo "unknown case $what" >&2; exit 2 ;;
esac
