#!/usr/bin/env python3
"""Render a nearmem-bench result JSON as a PNG.

usage: plot.py RESULT.json OUT.png

Every suite uses this one script. A suite describes its figure in
config.plot, a list of panels:
  {"title": str, "x": row key, "y": row key or [row keys], "series": row key
   (one line/bar group per distinct value), "kind": "line"|"bar",
   "filter": {row key: value}, "logx": bool, "logy": bool,
   "xlabel": str, "ylabel": str, "hline": number}
  or, for a 2-D map, {"kind": "heatmap", "x": row key, "y": row key, "value": row key,
   "filter": {...}, "cmap": matplotlib colormap name, "mask": value drawn empty}
Without config.plot, the numeric summary is drawn as a bar chart.
Needs Debian's python3-matplotlib (run with /usr/bin/python3).
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows_for(rows, panel):
    flt = panel.get("filter", {})
    return [r for r in rows if all(r.get(k) == v for k, v in flt.items())]


def as_list(v):
    return v if isinstance(v, list) else [v]


def draw_heatmap(ax, rows, panel):
    x, y, val = panel["x"], panel["y"], panel["value"]
    pts = [r for r in rows_for(rows, panel) if x in r and y in r and isinstance(r.get(val), (int, float))]
    xs = sorted({r[x] for r in pts})
    ys = sorted({r[y] for r in pts})
    xi = {v: i for i, v in enumerate(xs)}
    yi = {v: i for i, v in enumerate(ys)}
    grid = [[math.nan] * len(xs) for _ in ys]
    mask = panel.get("mask")  # a value drawn as empty (white), e.g. 0 = free
    for r in pts:
        grid[yi[r[y]]][xi[r[x]]] = math.nan if r[val] == mask else r[val]
    if pts:
        im = ax.imshow(grid, aspect="auto", interpolation="nearest", origin="upper",
                       cmap=panel.get("cmap", "tab20"),
                       extent=(min(xs) - 0.5, max(xs) + 0.5, max(ys) + 0.5, min(ys) - 0.5))
        if panel.get("colorbar"):
            ax.figure.colorbar(im, ax=ax)
    ax.set_title(panel.get("title", ""), fontsize=10)
    ax.set_xlabel(panel.get("xlabel", x))
    ax.set_ylabel(panel.get("ylabel", y))


def draw_panel(ax, rows, panel):
    if panel.get("kind") == "heatmap":
        draw_heatmap(ax, rows, panel)
        return
    x, kind = panel["x"], panel.get("kind", "line")
    ys = as_list(panel["y"])
    series_key = panel.get("series")
    groups = {}
    for r in rows_for(rows, panel):
        if x not in r:
            continue
        g = r.get(series_key, "") if series_key else ""
        groups.setdefault(str(g), []).append(r)
    if kind == "bar":
        cats = []
        for rs in groups.values():
            for r in rs:
                if str(r[x]) not in cats:
                    cats.append(str(r[x]))
        nbars = max(1, len(groups) * len(ys))
        width = 0.8 / nbars
        i = 0
        for g, rs in groups.items():
            for y in ys:
                vals = {str(r[x]): r.get(y) for r in rs}
                heights = [vals.get(c) if isinstance(vals.get(c), (int, float)) else 0 for c in cats]
                pos = [k + (i - (nbars - 1) / 2) * width for k in range(len(cats))]
                label = " ".join(s for s in (g, y if len(ys) > 1 else "") if s)
                ax.bar(pos, heights, width, label=label or None)
                i += 1
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels(cats, rotation=30, ha="right", fontsize=8)
    else:
        for g, rs in groups.items():
            for y in ys:
                pts = sorted((r[x], r[y]) for r in rs if isinstance(r.get(y), (int, float)) and r.get(y) is not None)
                if not pts:
                    continue
                label = " ".join(s for s in (g, y if len(ys) > 1 else "") if s)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label or None)
    if panel.get("logx"):
        ax.set_xscale("log", base=2)
    if panel.get("logy"):
        ax.set_yscale("log")
    if "hline" in panel:
        ax.axhline(panel["hline"], color="gray", linestyle="--", linewidth=1)
    ax.set_title(panel.get("title", ""), fontsize=10)
    ax.set_xlabel(panel.get("xlabel", x))
    ax.set_ylabel(panel.get("ylabel", ", ".join(ys)))
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def draw_summary(ax, summary):
    items = [(k, v) for k, v in summary.items() if isinstance(v, (int, float)) and v is not None and math.isfinite(v)]
    ax.barh([k for k, _ in items], [v for _, v in items])
    ax.set_title("summary")
    ax.tick_params(axis="y", labelsize=7)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        res = json.load(f)
    panels = res.get("config", {}).get("plot") or []
    n = max(1, len(panels))
    cols = 2 if n > 1 else 1
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(6.5 * cols, 4.2 * nrows), squeeze=False)
    flat = [a for row in axes for a in row]
    if panels:
        for ax, panel in zip(flat, panels):
            draw_panel(ax, res.get("rows", []), panel)
    else:
        draw_summary(flat[0], res.get("summary", {}))
    for ax in flat[n:]:
        ax.axis("off")
    cfg = res.get("config", {})
    host = cfg.get("host", {})
    fig.suptitle(f"{res.get('suite')}  ({'quick, ' if cfg.get('quick') else ''}{host.get('nproc', '?')} cores, {cfg.get('date', '')})",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
