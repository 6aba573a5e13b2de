#!/usr/bin/env python3
"""Upper bound on what any switching method could gain over a pipeline run's own switch.

For each results folder given (`mlsim run ... --out DIR` of a pipeline scenario with one
re-partition, decided at the scenario's speed change, `--decision` seconds), it measures the new
configuration's steady rate from the run itself (the slope of `progress.csv` between a quarter
of the way from the decision to the end and 4 x hosts minibatches before the end, clear of the
switch and the final drain), and the time the run lost against completing minibatches at that
rate from the decision on. A switch that cost nothing (no drain, no copy, no refill) and even
had the minibatches in flight at the decision done for free (at most `--hosts` of them, the
1F1B in-flight limit of stage 0 times its replicas) would save at most
  lost + hosts x rate,
assuming nothing runs faster after the decision than the new configuration's steady rate.
docs/pipeline.md ("Switching") quotes its output on the shipped dynamic scenarios.
"""
import argparse
import csv
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="results folders (summary.json, progress.csv)")
    ap.add_argument("--decision", type=float, default=60.0, help="decision time, s")
    ap.add_argument("--hosts", type=int, default=4)
    a = ap.parse_args()
    for path in a.runs:
        m = json.load(open(f"{path}/summary.json"))["metrics"]
        if m.get("repartitions", 0) != 1:
            print(f"{path}: {m.get('repartitions', 0):.0f} re-partitions, skipped")
            continue
        rows = [(float(r["time_s"]), int(float(r["minibatches_completed"])))
                for r in csv.DictReader(open(f"{path}/progress.csv"))]
        n, total = int(m["minibatches"]), m["time_s"]
        done = max(c for t, c in rows if t <= a.decision)
        time_of = {c: t for t, c in rows}
        lo, hi = done + (n - done) // 4, n - 4 * a.hosts
        rate = (time_of[hi] - time_of[lo]) / (hi - lo)
        lost = (time_of[hi] - a.decision) - (hi - done) * rate
        bound = lost + a.hosts * rate
        print(f"{path}: {total:.2f} s, switch_time_s {m['switch_time_s']:.3f}, {done} done at the "
              f"decision, new rate {rate * 1e3:.2f} ms/minibatch, lost {lost:.3f} s "
              f"({100 * lost / total:.2f}%), bound {bound:.3f} s ({100 * bound / total:.2f}%)")


if __name__ == "__main__":
    main()
