#!/usr/bin/env bash
# Run every registered benchmark suite; write <out>/<suite>.json and .png and
# <out>/README.md (a table of summaries with the machine and date).
#   scripts/bench-all.sh BUILD_DIR OUT_DIR [--quick]
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
shift 2
mkdir -p "$out"
failed=()
for suite in $("$build/bin/nearmem-bench" list); do
  echo "== $suite" >&2
  if ! "$build/bin/nearmem-bench" "$suite" "$@" --json "$out/$suite.json" --plot "$out/$suite.png"; then
    failed+=("$suite")
  fi
done
/usr/bin/python3 "$(dirname "$0")/../bench/report.py" "$out"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "bench: failed suites: ${failed[*]}" >&2
  exit 1
fi
echo "bench: results in $out/README.md" >&2
