#!/usr/bin/python3
"""Figures from mlsim's outputs (Debian's python3-matplotlib; see tools/setup-debian.sh).

  tools/plot.py compare DIR [--metrics M,...] [--out DIR]
      DIR holds compare.json (mlsim compare --out DIR): one bar chart per metric with a bar per
      variant, labelled with its ratio to the baseline (compare_metrics.png), plus one CDF
      figure per CDF found in the variants' summaries (compare_<name>.png).
  tools/plot.py sweep CSV [--x COL] [--y M,...] [--by COL] [--logx] [--logy] [--out DIR]
      CSV is a sweep's tidy CSV (mlsim sweep): each metric against a swept parameter, one line
      per value of the other parameters (sweep_<metric>.png). Parameter columns are read from
      sweep.json beside the CSV.
  tools/plot.py cdf SUMMARY.json... [--out DIR]
      Every CDF in the summaries, one line per summary (cdf_<name>.png).

A CDF is a summary.json "details" entry whose name ends in "_cdf" and whose value is a list of
[value, cumulative fraction] pairs. PNGs go to --out (default: beside the input).
"""
import argparse
import csv
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402

# Quantities as mlsim writes them ("64MiB", "500ns", "50GB/s"), to SI numbers for plot axes.
_UNITS = {
    "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
    "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600,
    "bps": 1 / 8, "Kbps": 1e3 / 8, "Mbps": 1e6 / 8, "Gbps": 1e9 / 8, "Tbps": 1e12 / 8,
    "B/s": 1, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
}
_QUANTITY = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]+)?\s*$")


def as_number(text):
    """The value as a float (units converted), or None when it is not a quantity."""
    m = _QUANTITY.match(str(text))
    if not m:
        return None
    value, unit = float(m.group(1)), m.group(2)
    if unit is None:
        return value
    return value * _UNITS[unit] if unit in _UNITS else None


def short_number(v):
    return f"{v:.3g}" if v is not None and math.isfinite(v) else "-"


def grid_of(n):
    cols = min(n, 3)
    return (n + cols - 1) // cols, cols


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(path)


# Units of the CDFs mlsim writes (models/serving/metrics.cpp: latencies in seconds), for the x axis.
_CDF_UNITS = {"serving_e2e_cdf": "s", "serving_ttft_cdf": "s", "serving_tpot_cdf": "s",
              "serving_kv_transfer_cdf": "s"}


def cdf_xlabel(name):
    unit = _CDF_UNITS.get(name)
    return f"{name[:-4]} ({unit})" if unit else name[:-4]


def find_cdfs(summary):
    details = summary.get("details", {}) if isinstance(summary, dict) else {}
    return {k: v for k, v in details.items()
            if k.endswith("_cdf") and isinstance(v, list) and v and len(v[0]) == 2}


def plot_cdfs(curves, name, path, xlabel):
    """curves: [(label, [[x, F], ...])]"""
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, points in curves:
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        ax.step(xs, ys, where="post", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cumulative fraction")
    ax.set_ylim(0, 1.02)
    ax.set_title(name)
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, path)


def cmd_compare(args):
    src = args.input
    path = os.path.join(src, "compare.json") if os.path.isdir(src) else src
    with open(path) as f:
        comp = json.load(f)
    folder = os.path.dirname(os.path.abspath(path))
    out = args.out or folder
    os.makedirs(out, exist_ok=True)
    variants, baseline = comp["variants"], comp["baseline"]
    metrics = args.metrics.split(",") if args.metrics else sorted(comp["metrics"])
    metrics = [m for m in metrics if m in comp["metrics"]]
    if not metrics:
        sys.exit("plot: no metric to plot")
    rows, cols = grid_of(len(metrics))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, m in enumerate(metrics):
        ax = axes[i // cols][i % cols]
        per = comp["metrics"][m]
        values = [per[v]["value"] if per[v]["value"] is not None else float("nan")
                  for v in variants]
        bars = ax.bar(range(len(variants)), values,
                      color=[colors[k % len(colors)] for k in range(len(variants))])
        for b, v in zip(bars, variants):
            r = per[v]["ratio"]
            label = "baseline" if v == baseline else (f"{r:.2f}x" if r is not None else "")
            ax.annotate(label, (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(variants)), variants, rotation=20 if len(variants) > 3 else 0)
        ax.set_title(m, fontsize=9)
        ax.margins(y=0.15)
        ax.grid(axis="y", alpha=0.3)
    for j in range(len(metrics), rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.suptitle(f"{os.path.basename(comp['scenario'])}: variants (ratio to {baseline})")
    save(fig, os.path.join(out, "compare_metrics.png"))

    # CDFs kept in each variant's summary.json.
    cdfs = {}
    for v in variants:
        s = os.path.join(folder, "variants", v, "summary.json")
        if os.path.exists(s):
            with open(s) as f:
                for name, points in find_cdfs(json.load(f)).items():
                    cdfs.setdefault(name, []).append((v, points))
    for name, curves in sorted(cdfs.items()):
        plot_cdfs(curves, name, os.path.join(out, f"compare_{name}.png"), cdf_xlabel(name))


def cmd_sweep(args):
    with open(args.input, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("plot: the CSV has no rows")
    columns = list(rows[0].keys())
    meta_path = os.path.join(os.path.dirname(os.path.abspath(args.input)), "sweep.meta.json")
    params = []
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            params = json.load(f).get("parameters", [])
    if args.x:
        if args.x not in columns:
            sys.exit(f"plot: no column {args.x} (columns: {', '.join(columns)})")
        if args.x not in params:
            params = params + [args.x]
    if not params:
        sys.exit("plot: cannot tell parameters from metrics: give --x (no sweep.meta.json beside "
                 "the CSV)")
    x = args.x or next((p for p in params if all(as_number(r[p]) is not None for r in rows)),
                       params[0])
    metrics = [c for c in columns if c not in params]
    if args.y:
        metrics = args.y.split(",")
    by = [args.by] if args.by else [p for p in params if p != x]
    out = args.out or os.path.dirname(os.path.abspath(args.input))
    os.makedirs(out, exist_ok=True)
    numeric_x = all(as_number(r[x]) is not None for r in rows)
    for m in metrics:
        groups = {}
        for r in rows:
            if r.get(m, "") == "":
                continue
            key = ", ".join(f"{b}={r[b]}" for b in by)
            groups.setdefault(key, []).append(r)
        fig, ax = plt.subplots(figsize=(6, 4))
        categories = []
        for key, rs in groups.items():
            if numeric_x:
                rs = sorted(rs, key=lambda r: as_number(r[x]))
                xs = [as_number(r[x]) for r in rs]
            else:
                for r in rs:
                    if r[x] not in categories:
                        categories.append(r[x])
                xs = [categories.index(r[x]) for r in rs]
            ax.plot(xs, [float(r[m]) for r in rs], marker="o", label=key or None)
        if not numeric_x:
            ax.set_xticks(range(len(categories)), categories)
        if args.logx:
            ax.set_xscale("log")
        if args.logy:
            ax.set_yscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(m)
        ax.grid(alpha=0.3)
        if len(groups) > 1:
            ax.legend(fontsize=8)
        ax.set_title(f"{m} against {x}")
        save(fig, os.path.join(out, f"sweep_{re.sub(r'[^A-Za-z0-9_.-]', '_', m)}.png"))


def cmd_cdf(args):
    cdfs = {}
    for path in args.input:
        with open(path) as f:
            summary = json.load(f)
        label = summary.get("variant") or summary.get("name") or path
        for name, points in find_cdfs(summary).items():
            cdfs.setdefault(name, []).append((label, points))
    if not cdfs:
        sys.exit("plot: no *_cdf entry in the summaries' details")
    out = args.out or os.path.dirname(os.path.abspath(args.input[0]))
    os.makedirs(out, exist_ok=True)
    for name, curves in sorted(cdfs.items()):
        plot_cdfs(curves, name, os.path.join(out, f"cdf_{name}.png"), cdf_xlabel(name))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="bar charts of a comparison, and CDFs")
    c.add_argument("input", help="folder holding compare.json, or the file")
    c.add_argument("--metrics", help="comma-separated metrics (default: all)")
    c.add_argument("--out")
    c.set_defaults(func=cmd_compare)
    s = sub.add_parser("sweep", help="metrics against a swept parameter")
    s.add_argument("input", help="the sweep's tidy CSV")
    s.add_argument("--x", help="parameter on the x axis (default: the first numeric one)")
    s.add_argument("--y", help="comma-separated metrics (default: all)")
    s.add_argument("--by", help="one line per value of this column (default: the others)")
    s.add_argument("--logx", action="store_true")
    s.add_argument("--logy", action="store_true")
    s.add_argument("--out")
    s.set_defaults(func=cmd_sweep)
    d = sub.add_parser("cdf", help="CDFs kept in summary.json files")
    d.add_argument("input", nargs="+")
    d.add_argument("--out")
    d.set_defaults(func=cmd_cdf)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
