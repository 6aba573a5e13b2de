#!/usr/bin/env python3
"""Runs the INA study: every (aggregator_memory, policy) point of the scenario's "sweep" section
through mlsim_ina_run, then writes results/<name>/study.csv and study.md (average JCT per policy
and the DSA gain over the best baseline at each memory size).

usage: ina_study.py BUILD_DIR SCENARIO.json [OUT_DIR [--set path=value ...]]
(extra --set overrides apply to every point, e.g. a sensitivity run)

study.csv holds only simulated quantities, so a rerun reproduces it byte for byte; wall time,
events per second and peak RSS depend on the machine and go to stdout and timing.csv (not
committed).
"""
import csv
import json
import os
import subprocess
import sys


def main():
    build, scenario = sys.argv[1], sys.argv[2]
    spec = json.load(open(scenario))
    out_dir = sys.argv[3] if len(sys.argv) > 3 else os.path.join("results", spec["name"])
    extra = sys.argv[4:]
    os.makedirs(out_dir, exist_ok=True)
    sweep = spec["sweep"]
    memories, policies = sweep["system.aggregator_memory"], sweep["system.policy"]
    runner = os.path.join(build, "models", "ina", "mlsim_ina_run")
    rows, timing = [], []
    for memory in memories:
        for policy in policies:
            cmd = [runner, scenario, "--set", f"system.policy={policy}",
                   "--set", f"system.aggregator_memory={memory}"] + extra
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed:\n{res.stderr}")
            d = json.loads(res.stdout)
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
                   "events": d["events"]}
            timing.append({"aggregator_memory": memory, "policy": policy, "wall_s": d["wall_s"],
                           "events_per_s": d["events_per_s"],
                           "peak_rss_mib": d["peak_rss_mib"]})
            for j in d["jobs"]:
                row[f"jct_{j['model']}_{j['arrival_s']:.3f}"] = j["jct_s"]
            rows.append(row)
            print(f"{memory:>9} {policy:>8}: mean JCT {m['jct_mean_s']:.3f} s "
                  f"({d['wall_s']:.1f} s wall, {d['events_per_s']/1e6:.2f} M events/s)", flush=True)
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
        f.write("| aggregator memory | SwitchML JCT (s) | ATP JCT (s) | DSA JCT (s) | DSA gain vs best baseline |\n")
        f.write("|---|---|---|---|---|\n")
        for memory in memories:
            jct = {r["policy"]: r["jct_mean_s"] for r in rows if r["aggregator_memory"] == memory}
            best = min(jct.get("switchml", float("inf")), jct.get("atp", float("inf")))
            f.write(f"| {memory} | {jct.get('switchml', float('nan')):.3f} | "
                    f"{jct.get('atp', float('nan')):.3f} | {jct.get('dsa', float('nan')):.3f} | "
                    f"{best / jct['dsa']:.3f}x |\n")
    print(open(os.path.join(out_dir, "study.md")).read())


if __name__ == "__main__":
    main()
