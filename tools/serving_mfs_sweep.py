#!/usr/bin/env python3
"""MFS vs separate serving over a grid of arrival rates and tier mixes.

Runs `mlsim run workloads/scenarios/mfs_llama2.json --variant {mfs,separate} --set ...` for every
grid point (sequentially; each run takes well under a second) and prints one CSV row per point:
both variants' mean end-to-end latency, mean latency per output token and GPU memory (weights +
KV peak), and MFS's reductions relative to separate serving (positive = MFS better). The MFS
paper's headline figures are 56.1% (latency) and 47.8% (memory); see docs/serving.md.

Usage: tools/serving_mfs_sweep.py [--mlsim build/cli/mlsim] [--out /tmp/mfs_sweep] > sweep.csv
"""
import argparse, csv, json, os, subprocess, sys

RATES = [1.0, 2.5, 5.38, 8.0]
MIXES = {"small_heavy": [0.6, 0.3, 0.1], "uniform": [1 / 3, 1 / 3, 1 / 3], "large_heavy": [0.1, 0.3, 0.6]}
ESCALATION = [0.0, 0.3]


def run(mlsim, scenario, out, variant, sets):
    args = [mlsim, "run", scenario, "--variant", variant, "--out", out, "--quiet"]
    for k, v in sets.items():
        args += ["--set", f"{k}={json.dumps(v)}"]
    subprocess.run(args, check=True)
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)["metrics"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("--mlsim", default=os.path.join(here, "..", "build", "cli", "mlsim"))
    p.add_argument("--scenario", default=os.path.join(here, "..", "workloads", "scenarios", "mfs_llama2.json"))
    p.add_argument("--out", default="/tmp/mlsim_mfs_sweep")
    p.add_argument("--count", type=int, default=2000)
    a = p.parse_args()
    w = csv.writer(sys.stdout)
    w.writerow(["rate_per_s", "tier_mix", "escalation", "e2e_mean_mfs_s", "e2e_mean_separate_s",
                "e2e_per_token_mfs_s", "e2e_per_token_separate_s", "memory_peak_mfs_GB",
                "memory_peak_separate_GB", "e2e_reduction", "e2e_per_token_reduction",
                "memory_peak_reduction", "memory_mean_reduction"])
    for esc in ESCALATION:
        for mix_name, mix in MIXES.items():
            for rate in RATES:
                sets = {"workload.generator.rate": rate, "workload.generator.count": a.count,
                        "workload.tier_mix": mix, "workload.escalation_probability": esc}
                m = {v: run(a.mlsim, a.scenario, os.path.join(a.out, f"{v}_{rate}_{mix_name}_{esc}"), v, sets)
                     for v in ("mfs", "separate")}
                red = lambda k: 1 - m["mfs"][k] / m["separate"][k]
                w.writerow([rate, mix_name, esc,
                            f"{m['mfs']['serving_e2e_mean_s']:.3f}", f"{m['separate']['serving_e2e_mean_s']:.3f}",
                            f"{m['mfs']['serving_e2e_per_token_mean_s']:.4f}",
                            f"{m['separate']['serving_e2e_per_token_mean_s']:.4f}",
                            f"{m['mfs']['serving_memory_peak_bytes'] / 1e9:.1f}",
                            f"{m['separate']['serving_memory_peak_bytes'] / 1e9:.1f}",
                            f"{red('serving_e2e_mean_s'):.3f}", f"{red('serving_e2e_per_token_mean_s'):.3f}",
                            f"{red('serving_memory_peak_bytes'):.3f}", f"{red('serving_memory_mean_bytes'):.3f}"])
                sys.stdout.flush()


if __name__ == "__main__":
    main()
