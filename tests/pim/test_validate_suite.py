#!/usr/bin/env python3
"""Suite pim-validate end to end on its microbenchmarks (--set only=micro,
a few seconds): the four summary keys of issue 15 are present and consistent
with the rows (validation and calibration counted apart, every compared row
carries the reference file's value), and the transfer model gives its own
calibration points back."""
import json
import math
import subprocess
import sys
import tempfile

bench, reference = sys.argv[1], sys.argv[2]
ref = {p["id"]: p for p in json.load(open(reference))["points"]}
with tempfile.TemporaryDirectory() as d:
    out = f"{d}/v.json"
    subprocess.run([bench, "pim-validate", "--quick", "--quiet", "--set", "only=micro", "--json", out], check=True)
    res = json.load(open(out))
s, rows = res["summary"], res["rows"]
for k in ("validation_figures", "validation_median_abs_err_pct", "validation_within_20pct_share",
          "calibration_figures"):
    assert k in s, k
compared = [r for r in rows if r["compared"] == "yes"]
val = [r for r in compared if r["use"] == "validation"]
cal = [r for r in compared if r["use"] == "calibration"]
assert s["validation_figures"] == len(val) >= 30, (s["validation_figures"], len(val))
assert s["calibration_figures"] == len(cal) >= 1
errs = sorted(abs(r["err_pct"]) for r in val)
assert math.isfinite(s["validation_median_abs_err_pct"])
assert 0 <= s["validation_within_20pct_share"] <= 1
assert abs(s["validation_within_20pct_share"] - sum(e <= 20 for e in errs) / len(errs)) < 1e-12
for r in compared:
    p = ref[r["id"]]  # every compared figure is a reference point, with its fixed role
    assert r["use"] == p["use"] and r["hardware"] == p["value"], r["id"]
    assert abs(r["err_pct"] - (r["ours"] - r["hardware"]) / r["hardware"] * 100) < 1e-9
# The transfer constants come from calibration points: the model returns them.
for i in ("xfer.push.to.ranks1", "xfer.push.to.ranks40", "xfer.serial.cpu-dpu.1dpu.32MiB",
          "xfer.push.cpu-dpu.64dpus.32MiB", "xfer.push.dpu-cpu.64dpus.32MiB", "xfer.broadcast.cpu-dpu.64dpus.32MiB"):
    r = next(r for r in rows if r["id"] == i)
    assert abs(r["err_pct"]) < 1e-3, (i, r["err_pct"])
# Forty ranks are host-bound, not 40 x one rank.
r = next(r for r in rows if r["id"] == "xfer.push.to.ranks40.model")
assert 16 < r["ours"] < 17, r["ours"]
print("pim-validate: %d validation figures, %d calibration" % (len(val), len(cal)))
