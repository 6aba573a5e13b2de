#!/usr/bin/env python3
"""Runs the INA study: every (aggregator_memory, policy) point of the scenario's "sweep" section
through `mlsim run` (the same loading, checks and `events` section as any run), then writes results/<name>/study.csv and study.md (average JCT per policy
and the DSA gain over the best baseline at each memory size).

usage: ina_study.py BUILD_DIR SCENARIO.json [OUT_DIR [--memories M1,M2,...] [--set path=value ...]]
(extra --set overrides apply to every point, e.g. a sensitivity run, except that a PS summing
rate, system.host.ps_aggregation, is not passed to SwitchML points: SwitchML has no PS;
--memories runs only those aggregator memories of the sweep, --policies only those policies;
with --policies, the rows of the other policies already in OUT_DIR/study.csv are kept, so that
one policy can be rerun after a change that leaves the others as they were)

study.csv holds only simulated quantities, so a rerun reproduces it byte for byte; wall time,
events per second and peak RSS depend on the machine and go to stdout and timing.csv (not
committed).
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile


def run_point(mlsim, scenario, sets):
    """One `mlsim run`; returns its summary.json and the child's peak RSS in MiB."""
    out = tempfile.mkdtemp(prefix="ina_study_")
    try:
        cmd = [mlsim, "run", scenario, "--quiet", "--out", os.path.join(out, "r")]
        for s in sets:
            cmd += ["--set", s]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        err = proc.stderr.read()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err}")
        with open(os.path.join(out, "r", "summary.json")) as f:
            return json.load(f), usage.ru_maxrss / 1024.0
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main():
    build, scenario = sys.argv[1], sys.argv[2]
    spec = json.load(open(scenario))
    out_dir = sys.argv[3] if len(sys.argv) > 3 else os.path.join("results", spec["name"])
    extra = sys.argv[4:]
    only = None
    only_policies = None
    while extra[:1] in (["--memories"], ["--policies"]) and len(extra) > 1:
        if extra[0] == "--memories":
            only = extra[1].split(",")
        else:
            only_policies = extra[1].split(",")
        extra = extra[2:]
    if len(extra) % 2 or any(a != "--set" for a in extra[::2]):
        sys.exit("extra arguments must be --set path=value pairs")
    extra = extra[1::2]
    os.makedirs(out_dir, exist_ok=True)
    sweep = spec["sweep"]
    memories, policies = sweep["system.aggregator_memory"], sweep["system.policy"]
    if only is not None:
        unknown = [m for m in only if m not in memories]
        if unknown:
            sys.exit(f"--memories: {unknown} not in the sweep {memories}")
        memories = only
    if only_policies is not None:
        unknown = [p for p in only_policies if p not in policies]
        if unknown:
            sys.exit(f"--policies: {unknown} not in the sweep {policies}")
        policies = [p for p in policies if p in only_policies]
    mlsim = os.path.join(build, "cli", "mlsim")
    rows, timing = [], []
    for memory in memories:
        for policy in policies:
            sets = [s for s in extra
                    if not (policy == "switchml" and s.startswith("system.host.ps_aggregation="))]
            d, rss = run_point(mlsim, scenario, [f"system.policy={policy}",
                                                 f"system.aggregator_memory={memory}"] + sets)
            m = d["metrics"]
            row = {"aggregator_memory": memory, "policy": policy,
                   "jct_mean_s": m["jct_mean_s"], "jct_p50_s": m["jct_p50_s"],
                   "jct_p99_s": m["jct_p99_s"], "makespan_s": m["makespan_s"],
                   "aggregators": m["aggregators"],
                   "occupancy_mean": m["aggregator_occupancy_mean"],
                   "idle_reserved_mean": m["aggregator_idle_reserved_mean"],
                   "memory_utilisation": m["switch_memory_utilisation"],
                   "ps_fallback_bytes": m["ps_fallback_bytes"],
                   "retransmitted_packets": m["retransmitted_packets"],
                   "preemptions": m["preemptions"], "resend_requests": m["resend_requests"],
                   "wrong_sums": m["wrong_sums"],
                   "events": d["run"]["events_processed"]}
            wall = d["wall"]
            timing.append({"aggregator_memory": memory, "policy": policy,
                           "wall_s": wall["wall_time_s"], "events_per_s": wall["events_per_s"],
                           "peak_rss_mib": rss})
            for j in d["details"]["jobs"]:
                row[f"jct_{j['model']}_{j['arrival_s']:.3f}"] = j["jct_s"]
            rows.append(row)
            print(f"{memory:>9} {policy:>8}: mean JCT {m['jct_mean_s']:.3f} s "
                  f"({wall['wall_time_s']:.1f} s wall, {wall['events_per_s']/1e6:.2f} M events/s)", flush=True)
    kept = []
    old_csv = os.path.join(out_dir, "study.csv")
    if only_policies is not None and os.path.exists(old_csv):
        # Kept as the strings they were written as, so a kept row is reproduced byte for byte.
        with open(old_csv, newline="") as f:
            kept = [{k: v for k, v in r.items() if v != ""} for r in csv.DictReader(f)
                    if r["policy"] not in only_policies]
        order = {(m, p): i for i, (m, p) in enumerate(
            (m, p) for m in sweep["system.aggregator_memory"] for p in sweep["system.policy"])}
        rows = sorted(kept + rows, key=lambda r: order.get((r["aggregator_memory"], r["policy"]), 0))
        memories = [m for m in sweep["system.aggregator_memory"]
                    if any(r["aggregator_memory"] == m for r in rows)]
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k.startswith("jct_") and "_0" in k, k))
    with open(os.path.join(out_dir, "study.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out_dir, "timing.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(timing[0]))
        w.writeheader()
        w.writerows(timing)
    with open(os.path.join(out_dir, "study.md"), "w") as f:
        f.write("| aggregator memory | SwitchML JCT (s) | ATP JCT (s) | DSA JCT (s) | DSA vs ATP | DSA gain vs best baseline |\n")
        f.write("|---|---|---|---|---|---|\n")
        for memory in memories:
            jct = {r["policy"]: float(r["jct_mean_s"]) for r in rows
                   if r["aggregator_memory"] == memory}
            best = min(jct.get("switchml", float("inf")), jct.get("atp", float("inf")))
            dsa = jct.get("dsa", float("nan"))
            f.write(f"| {memory} | {jct.get('switchml', float('nan')):.3f} | "
                    f"{jct.get('atp', float('nan')):.3f} | {dsa:.3f} | "
                    f"{jct.get('atp', float('nan')) / dsa:.3f}x | {best / dsa:.3f}x |\n")
    print(open(os.path.join(out_dir, "study.md")).read())


if __name__ == "__main__":
    main()
