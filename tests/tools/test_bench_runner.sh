#!/usr/bin/env bash
# The benchmark runner end to end: list, a quick suite to JSON and PNG, errors.
set -euo pipefail
bench=$1
py=${2:-/usr/bin/python3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$bench" list | grep -qx common-selftest
"$bench" common-selftest --quick --quiet --seed 7 --set note=ci --json "$dir/s.json" --plot "$dir/s.png" > "$dir/out.txt"
grep -q geomean_mops "$dir/out.txt"

"$py" - "$dir/s.json" <<'PYEOF'
import json, math, sys
r = json.load(open(sys.argv[1]))
assert set(r) == {"suite", "config", "rows", "summary"}, r.keys()
assert r["suite"] == "common-selftest"
assert r["config"]["quick"] == 1 and r["config"]["seed"] == 7
assert r["config"]["params"] == {"note": "ci"}
assert r["config"]["host"]["nproc"] >= 1
assert isinstance(r["config"]["plot"], list)
assert len(r["rows"]) >= 5 and all(row["mops"] > 0 for row in r["rows"])
s = r["summary"]
for k in ("prng_u64_mops", "bitmap_find_run_mops", "geomean_mops"):
    assert k in s and math.isfinite(s[k]) and s[k] > 0, k
PYEOF

# A PNG starts with the 8-byte PNG signature.
[[ "$(head -c 8 "$dir/s.png" | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]]

# Bad usage is an error with a message, not a crash.
if "$bench" no-such-suite 2> "$dir/err.txt"; then exit 1; fi
grep -q "no suite" "$dir/err.txt"
if "$bench" common-selftest --threads 0 2> /dev/null; then exit 1; fi
if "$bench" common-selftest --bogus 2> /dev/null; then exit 1; fi
echo "bench runner ok"
