#!/usr/bin/env python3
"""Write a Markdown table of benchmark summaries.

usage: report.py RESULTS_DIR  (reads RESULTS_DIR/*.json, writes RESULTS_DIR/README.md)
"""
import glob
import json
import math
import os
import sys


def fmt(v):
    if isinstance(v, float):
        if not math.isfinite(v):
            return "n/a"
        return f"{v:.4g}"
    return str(v)


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = ["# Benchmark results", ""]
    files = sorted(glob.glob(os.path.join(argv[1], "*.json")))
    for path in files:
        with open(path) as f:
            res = json.load(f)
        cfg = res.get("config", {})
        host = cfg.get("host", {})
        out += [f"## {res.get('suite')}", "",
                f"{cfg.get('date', '?')} on {host.get('cpu', '?')} ({host.get('nproc', '?')} cores, "
                f"{fmt(host.get('mem_gib', float('nan')))} GiB), {'quick' if cfg.get('quick') else 'full'} run, "
                f"seed {cfg.get('seed')}, {fmt(cfg.get('host_wall_seconds', float('nan')))} s. "
                f"Plot: `{os.path.basename(path)[:-5]}.png`.", "",
                "| summary key | value |", "| --- | --- |"]
        for k, v in res.get("summary", {}).items():
            out.append(f"| `{k}` | {fmt(v)} |")
        out.append("")
    if not files:
        out.append("No results yet: run `make bench`.")
    with open(os.path.join(argv[1], "README.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
