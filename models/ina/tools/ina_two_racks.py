#!/usr/bin/env python3
"""Decomposes the two-rack INA scenario's JCTs against the one-switch star (docs/ina.md,
"Two racks"): the same six jobs on the star over the packet path, on the star over the flow
backend, and on the two-rack leaf-spine over flow with the leaf-spine bandwidth swept
(topology.oversubscription) and the uplink latency varied, per policy. Then the scenario itself
with and without its link failure (events section).

usage: ina_two_racks.py MLSIM [OUT_DIR] [--iterations N] [--headline] [--policies a,b]
                        [--points REGEX] [--resume] [--levels one_switch|two_level]
  --iterations N: every job runs N iterations (default 3; 0 = as shipped, 20)
  --points REGEX: only the sweep points whose name matches
  --resume: a point whose OUT_DIR/runs/<point>_<policy>/summary.json exists is read, not rerun
  --headline: instead, the scenario itself (with --iterations N), each policy with and without
              its link failures
  --levels two_level: the two-rack runs with ATP's two-level aggregation (system.levels, docs/ina.md
              "Two-level aggregation"): leaf1 aggregates its rack first, leaf0 stays the root.
              The star points have one switch, so they run (and are written) as with one_switch
              for reference; SwitchML has no two-level form and is refused by the model, so it
              is left out. Default one_switch (the runs as before).

Writes OUT_DIR/sweep_N_iterations.csv or headline_N_iterations.csv, with a suffix _two_level
under --levels two_level (simulated quantities only, so a rerun reproduces it byte for byte)
and prints wall times (machine-dependent, not written).
"""
import argparse
import csv
import json
import os
import re
import subprocess
import time

STUDY = "workloads/scenarios/ina_dsa_study.json"
RACKS = "workloads/scenarios/ina_dsa_two_racks.json"
NO_FAILURE = ["--set", "events.list=[]"]


def points(policies, levels):
    star_flow = ["--set", "system.data_path=network", "--set", "network.backend=flow"]
    for p in policies:
        yield ("star_packet", p, STUDY, [], "one_switch")
        yield ("star_flow", p, STUDY, star_flow, "one_switch")
        for os_ in ["0.25", "1", "2", "4", "8", "16"]:
            yield (f"racks_oversub_{os_}", p, RACKS,
                   NO_FAILURE + ["--set", f"topology.oversubscription={os_}"], levels)
        for lat in ["0ns", "2us"]:
            yield (f"racks_uplink_latency_{lat}", p, RACKS,
                   NO_FAILURE + ["--set", f"topology.uplink_latency={lat}"], levels)
        yield ("racks_oversub_0.25_uplink_latency_0ns", p, RACKS,
               NO_FAILURE + ["--set", "topology.oversubscription=0.25",
                             "--set", "topology.uplink_latency=0ns"], levels)


def run(mlsim, out_dir, name, policy, scenario, sets, levels, iterations, resume=False):
    # The two-level runs keep their own folders, so --resume never mixes the settings.
    suffix = "" if levels == "one_switch" else f"_{levels}"
    folder = os.path.join(out_dir, "runs", f"{name}_{policy}{suffix}")
    cmd = [mlsim, "run", scenario, "--quiet", "--out", folder,
           "--set", f"system.policy={policy}"] + sets
    if levels != "one_switch":
        cmd += ["--set", f"system.levels={levels}"]
    if iterations > 0:
        for i in range(6):
            cmd += ["--set", f"workload.jobs[{i}].iterations={iterations}"]
    t0 = time.time()
    if not (resume and os.path.exists(os.path.join(folder, "summary.json"))):
        subprocess.run(cmd, check=True)
    wall = time.time() - t0
    d = json.load(open(os.path.join(folder, "summary.json")))
    m = d["metrics"]
    row = {"point": name, "policy": policy, "levels": levels, "iterations": iterations or 20,
           "jct_mean_s": m.get("jct_mean_s", float("nan")),
           "jobs_finished": m["jobs_finished"], "jobs_failed": m.get("jobs_failed", 0),
           "makespan_s": m["makespan_s"], "fallback_packets": m["fallback_packets"],
           "collision_packets": m["collision_packets"], "preemptions": m["preemptions"],
           "occupancy_mean": m["aggregator_occupancy_mean"],
           "idle_reserved_mean": m["aggregator_idle_reserved_mean"],
           "timeouts": m["timeouts"], "undelivered_packets": m.get("undelivered_packets", 0),
           "wrong_sums": m["wrong_sums"]}
    if levels != "one_switch":  # the root's pool above; the rack switches' here
        row["rack_occupancy_mean"] = m["rack_aggregator_occupancy_mean"]
        row["upward_packets"] = m["upward_packets"]
    for k, j in enumerate(d["details"]["jobs"]):
        row[f"jct_{j['model']}_{j['arrival_s']:.3f}"] = j["jct_s"]
    print(f"{name:>40} {policy:>8} {levels:>10}: mean JCT {row['jct_mean_s']:.4f} s, "
          f"fallback {row['fallback_packets']:.4g}, {wall:.0f} s wall", flush=True)
    return row


def main():
    a = argparse.ArgumentParser()
    a.add_argument("mlsim")
    a.add_argument("out_dir", nargs="?", default="results/ina_two_racks")
    a.add_argument("--iterations", type=int, default=3)
    a.add_argument("--headline", action="store_true")
    a.add_argument("--policies", default="atp,dsa,switchml")
    a.add_argument("--points", default="")
    a.add_argument("--resume", action="store_true")
    a.add_argument("--levels", choices=["one_switch", "two_level"], default="one_switch")
    args = a.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    policies = args.policies.split(",")
    if args.levels == "two_level":
        if "switchml" in policies:
            print("--levels two_level: SwitchML has no two-level form, left out")
        policies = [p for p in policies if p != "switchml"]
        if not policies:
            a.error("--levels two_level needs atp or dsa among --policies")
    rows = []
    kind = "headline" if args.headline else "sweep"
    suffix = "" if args.levels == "one_switch" else f"_{args.levels}"
    name = f"{kind}_{args.iterations or 20}_iterations{suffix}.csv"

    def write():  # after every run, so that a stopped sweep keeps what it measured
        keys = list(rows[0])
        for r in rows:
            keys += [k for k in r if k not in keys]
        with open(os.path.join(args.out_dir, name), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)

    if args.headline:
        for p in policies:
            rows.append(run(args.mlsim, args.out_dir, "two_racks_failure", p, RACKS, [],
                            args.levels, args.iterations, args.resume))
            write()
            rows.append(run(args.mlsim, args.out_dir, "two_racks_no_failure", p, RACKS,
                            NO_FAILURE, args.levels, args.iterations, args.resume))
            write()
    else:
        for point in points(policies, args.levels):
            if args.points and not re.search(args.points, point[0]):
                continue
            rows.append(run(args.mlsim, args.out_dir, *point, args.iterations, args.resume))
            write()


if __name__ == "__main__":
    main()
