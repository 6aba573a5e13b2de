#!/usr/bin/env python3
"""Appends one row per `mlsim run` of ina_dsa_two_racks.json to a results CSV in the layout of
results/ina_two_racks/two_level.csv (docs/ina.md, "Two-level aggregation on the two racks"):
simulated quantities only, read from each run's summary.json as mlsim wrote it, so a rerun
reproduces the row byte for byte.

usage: ina_two_racks_rows.py OUT.csv EVENTS SUMMARY.json [SUMMARY.json ...]
  EVENTS: "failure" or "no_failure" (whether the run kept the scenario's link failures)
The levels and policy columns are the run's own (details.levels, one_switch where absent; details.policy); iterations is
job 0's. A new file gets the header; an existing one must have the same header.
"""
import csv
import json
import os
import sys

KEYS = ["levels", "policy", "events", "iterations", "jct_mean_s", "jobs_finished", "jobs_failed",
        "makespan_s", "fallback_packets", "collision_packets", "preemptions", "ps_fallback_bytes",
        "aggregator_occupancy_mean", "aggregator_idle_reserved_mean",
        "rack_aggregator_occupancy_mean", "upward_packets", "timeouts", "undelivered_packets",
        "wrong_sums", "duplicate_results"]
METRICS = KEYS[4:]


def row(summary, events):
    d = json.load(open(summary))
    m, det = d["metrics"], d["details"]
    r = {"levels": det.get("levels", "one_switch"), "policy": det["policy"], "events": events,
         "iterations": det["jobs"][0]["iterations"]}
    for k in METRICS:
        if r["levels"] == "one_switch" and k.startswith(("rack_", "upward_")):
            r[k] = ""  # one switch: no rack level
        else:
            r[k] = m[k]
    for j in sorted(det["jobs"], key=lambda j: j["arrival_s"]):  # columns in arrival order
        r[f"jct_{j['model']}_{j['arrival_s']:.3f}"] = j["jct_s"]
    return r


def main():
    if len(sys.argv) < 4 or sys.argv[2] not in ("failure", "no_failure"):
        sys.exit(__doc__)
    out, events = sys.argv[1], sys.argv[2]
    rows = [row(s, events) for s in sys.argv[3:]]
    keys = list(rows[0])
    new = not os.path.exists(out)
    if not new:
        with open(out, newline="") as f:
            header = next(csv.reader(f))
        if header != keys:
            sys.exit(f"{out}: header {header} differs from {keys}")
    with open(out, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        if new:
            w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
