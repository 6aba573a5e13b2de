#!/usr/bin/env python3
"""Throughput over time of the elastic serving study, single world against MultiWorld.

Runs workloads/serving/elastic_multiworld.json's *_events variants (a stage-1 host fails at
1200 s and is repaired 600 s later; stage 1 scales out at 2400 s) unless --runs points at
finished runs, and plots from serving_elastic_timeline.csv completed requests per minute and,
below, the mean time to first token of the requests completed in each minute (latency over time).

    python3 tools/elastic_timeline_plot.py            # runs both variants (about 1 s each)
    python3 tools/elastic_timeline_plot.py --out docs/img/elastic_throughput.svg
"""
import argparse
import csv
import pathlib
import subprocess
import tempfile


ROOT = pathlib.Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "workloads/serving/elastic_multiworld.json"
VARIANTS = ["single_world_events", "multiworld_events"]


def timeline(run_dir):
    rows = list(csv.DictReader(open(run_dir / "serving_elastic_timeline.csv")))
    return [(float(r["time_s"]), float(r["completed"]), float(r["serving"])) for r in rows]


def ttft_per_minute(run_dir):
    """Mean TTFT of the requests completed in the minute ending at each sample (s)."""
    rows = list(csv.DictReader(open(run_dir / "serving_elastic_timeline.csv")))
    pts = []  # (time, completed in the sample's interval, their TTFT sum)
    prev = 0.0
    for r in rows:
        done = float(r["completed"])
        n = done - prev
        prev = done
        mean = float(r["ttft_mean_s"])
        pts.append((float(r["time_s"]), n, n * mean if n > 0 else 0.0))
    out = []
    for i, (t, _, _) in enumerate(pts):
        window = [p for p in pts[: i + 1] if p[0] > t - 60]
        if t < 60:
            continue
        n = sum(p[1] for p in window)
        if n > 0:
            out.append((t, sum(p[2] for p in window) / n))
    return out


def panel(out, curves, y_label, top, h, w, left, t_max, events, log=False):
    """One panel of polylines (one per variant) between y = top and top + h."""
    import math
    f = (lambda y: math.log10(max(y, 1e-3))) if log else (lambda y: y)  # noqa: E731
    ys = [f(x) for c in curves.values() for _, x in c]
    y_lo = min(ys) if log else 0
    y_hi = max(ys) + (0.1 if log else max(ys) * 0.1)
    sx = lambda t: left + (w - left - 20) * t / t_max  # noqa: E731
    sy = lambda y: top + h - h * (f(y) - y_lo) / (y_hi - y_lo)  # noqa: E731
    out.append(f'<text x="{left}" y="{top-6}">{y_label}</text>')
    for t, what in events:
        out.append(f'<line x1="{sx(t)}" y1="{top}" x2="{sx(t)}" y2="{top+h}" stroke="grey" '
                   'stroke-dasharray="3,3"/>')
        out.append(f'<text x="{sx(t)+3}" y="{top+12}">{what}</text>')
    ticks = ([10 ** k for k in range(math.floor(y_lo), math.ceil(y_hi) + 1)] if log
             else [y_hi / 5 * k for k in range(6)])
    for y in ticks:
        if f(y) < y_lo or f(y) > y_hi:
            continue
        label = f"{y:.3g}" if log else f"{y:.0f}"
        out.append(f'<text x="{left-5}" y="{sy(y)+4}" text-anchor="end">{label}</text>')
    out.append(f'<line x1="{left}" y1="{top+h}" x2="{w-20}" y2="{top+h}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top+h}" stroke="black"/>')
    for (v, c), colour in zip(curves.items(), ["#d62728", "#1f77b4"]):
        pts = " ".join(f"{sx(t):.1f},{sy(x):.1f}" for t, x in c)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.2" points="{pts}"/>')


def per_minute(rows):
    out = []
    j = 0
    for t, done, _ in rows:
        while rows[j][0] < t - 60:
            j += 1
        if t - rows[j][0] >= 59:
            out.append((t, (done - rows[j][1]) * 60 / (t - rows[j][0])))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlsim", default=str(ROOT / "build/cli/mlsim"))
    ap.add_argument("--runs", help="folder with one sub-folder per variant (already run)")
    ap.add_argument("--out", default=str(ROOT / "docs/img/elastic_throughput.svg"))
    args = ap.parse_args()
    runs = pathlib.Path(args.runs) if args.runs else pathlib.Path(tempfile.mkdtemp())
    if not args.runs:
        for v in VARIANTS:
            subprocess.run([args.mlsim, "run", str(SCENARIO), "--variant", v, "--out",
                            str(runs / v)], check=True, stdout=subprocess.DEVNULL)
    # A plain SVG (no plotting library needed): throughput above, latency below.
    w, h, left, bottom, top, gap = 900, 620, 60, 40, 30, 50
    ph = (h - top - bottom - gap) // 2
    curves = {v: per_minute(timeline(runs / v)) for v in VARIANTS}
    ttft = {v: ttft_per_minute(runs / v) for v in VARIANTS}
    t_max = max(t for c in curves.values() for t, _ in c)
    events = [(1200, "stage-1 host fails"), (1800, "repaired"), (2400, "scale-out")]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w/2}" y="14" text-anchor="middle">Llama-2-70B, 2 stages x TP 4, Azure '
           'conversation trace</text>']
    panel(out, curves, "requests completed per minute", top + 10, ph - 10, w, left, t_max, events)
    panel(out, ttft, "mean TTFT of the requests completed in the last minute (s, log scale)",
          top + ph + gap, ph, w, left, t_max, events, log=True)
    sx = lambda t: left + (w - left - 20) * t / t_max  # noqa: E731
    for t in range(0, int(t_max) + 1, 600):
        out.append(f'<text x="{sx(t)}" y="{h-bottom+15}" text-anchor="middle">{t} s</text>')
    for i, (v, colour) in enumerate(zip(VARIANTS, ["#d62728", "#1f77b4"])):
        out.append(f'<text x="{w-220}" y="{top+ph-40+15*i}" fill="{colour}">'
                   f'{v.replace("_events", "")}</text>')
    out.append("</svg>")
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text("\n".join(out) + "\n")
    print(args.out)


if __name__ == "__main__":
    main()
