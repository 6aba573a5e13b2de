#!/usr/bin/env python3
"""Throughput over time of the elastic serving study, single world against MultiWorld.

Runs workloads/serving/elastic_multiworld.json's *_events variants (a stage-1 host fails at
1200 s and is repaired 600 s later; stage 1 scales out at 2400 s) unless --runs points at
finished runs, and plots completed requests per minute from serving_elastic_timeline.csv.

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
    # A plain SVG (no plotting library needed).
    w, h, left, bottom, top = 900, 380, 60, 40, 30
    curves = {v: per_minute(timeline(runs / v)) for v in VARIANTS}
    t_max = max(t for c in curves.values() for t, _ in c)
    y_max = max(x for c in curves.values() for _, x in c) * 1.1
    sx = lambda t: left + (w - left - 20) * t / t_max  # noqa: E731
    sy = lambda y: h - bottom - (h - bottom - top) * y / y_max  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w/2}" y="18" text-anchor="middle">Llama-2-70B, 2 stages x TP 4, Azure '
           'conversation trace: requests completed per minute</text>']
    for t, what in [(1200, "stage-1 host fails"), (1800, "repaired"), (2400, "scale-out")]:
        out.append(f'<line x1="{sx(t)}" y1="{top}" x2="{sx(t)}" y2="{h-bottom}" stroke="grey" '
                   'stroke-dasharray="3,3"/>')
        out.append(f'<text x="{sx(t)+3}" y="{top+12}">{what}</text>')
    for y in range(0, int(y_max) + 1, max(1, int(y_max / 5) // 50 * 50 or 50)):
        out.append(f'<text x="{left-5}" y="{sy(y)+4}" text-anchor="end">{y}</text>')
    for t in range(0, int(t_max) + 1, 600):
        out.append(f'<text x="{sx(t)}" y="{h-bottom+15}" text-anchor="middle">{t} s</text>')
    out.append(f'<line x1="{left}" y1="{h-bottom}" x2="{w-20}" y2="{h-bottom}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h-bottom}" stroke="black"/>')
    for (v, c), colour in zip(curves.items(), ["#d62728", "#1f77b4"]):
        pts = " ".join(f"{sx(t):.1f},{sy(x):.1f}" for t, x in c)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.2" points="{pts}"/>')
        i = VARIANTS.index(v)
        out.append(f'<text x="{w-220}" y="{h-bottom-30+15*i}" fill="{colour}">'
                   f'{v.replace("_events", "")}</text>')
    out.append("</svg>")
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text("\n".join(out) + "\n")
    print(args.out)


if __name__ == "__main__":
    main()
