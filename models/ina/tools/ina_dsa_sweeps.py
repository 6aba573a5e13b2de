#!/usr/bin/env python3
"""Summarises the DSA study's sweeps over what its paper does not state (issue 14): the arrival
rate, the job mix and the workers per job (workloads/sweeps/ina_dsa_{arrivals,job_mix,workers}.json),
each point under SwitchML, ATP and DSA with 3 seeds.

usage: ina_dsa_sweeps.py SWEEPS_DIR RESULTS_DIR
  SWEEPS_DIR holds one `mlsim sweep ... --out SWEEPS_DIR/<sweep name>` folder per sweep (its
  sweep.csv and points/<id>/summary.json); RESULTS_DIR gets, per sweep, <name>.csv (mlsim's tidy
  sweep.csv, copied), <name>_jobs.csv (one row per job of every run: its model, arrival and JCT)
  and one summary.md with a table per lever.

Reads only simulated quantities from each run's summary.json (the resolved scenario says which
setting, seed and policy a run had), so a rerun of the sweeps reproduces every file byte for byte.
"""
import csv
import glob
import json
import os
import shutil
import statistics
import sys

POLICIES = ["switchml", "atp", "dsa"]
COMM_BOUND = ("gnmt", "alexnet")  # communication intensity 0.86 and 0.28 (docs/ina.md)

# Per sweep: the lever's label, how to read it from a run's resolved scenario, and its order.
LEVERS = {
    "ina_dsa_arrivals": ("mean inter-arrival (3 iterations; x 20/3 at full size)",
                         lambda s: s["workload"]["arrivals"]["mean_interarrival"]),
    "ina_dsa_job_mix": ("job mix", lambda s: s["name"]),
    "ina_dsa_workers": ("workers per job", lambda s: str(s["workload"]["jobs"][0]["workers"])),
}


def duration_s(text):
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(text)


def order_key(sweep, value):
    if sweep == "ina_dsa_arrivals":
        return duration_s(value)
    if sweep == "ina_dsa_workers":
        return int(value)
    return ["mix_compute_bound", "mix_shipped", "mix_gnmt_vgg16", "mix_comm_bound",
            "mix_gnmt_only"].index(value)


def load_runs(folder, lever):
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "points", "*", "summary.json"))):
        with open(path) as f:
            d = json.load(f)
        s = d["scenario"]
        runs.append({"setting": lever(s), "seed": d["seed"], "policy": s["system"]["policy"],
                     "metrics": d["metrics"], "jobs": d["details"]["jobs"]})
    return runs


def mean_range(values, fmt):
    return (fmt.format(statistics.mean(values)) + " [" + fmt.format(min(values)) + ", " +
            fmt.format(max(values)) + "]")


def comm_jct(run):
    jcts = [j["jct_s"] for j in run["jobs"] if j["model"] in COMM_BOUND]
    return statistics.mean(jcts) if jcts else None


def table(sweep, label, runs):
    by = {}
    for r in runs:
        by.setdefault(r["setting"], {}).setdefault(r["seed"], {})[r["policy"]] = r
    lines = [f"| {label} | seeds | SwitchML | ATP | DSA | DSA vs ATP | DSA vs best baseline "
             "| best baseline | GNMT+AlexNet JCT SwitchML / ATP / DSA | DSA preemptions "
             "| PS fallback packets ATP / DSA | DSA resend requests |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for setting in sorted(by, key=lambda v: order_key(sweep, v)):
        seeds = {k: v for k, v in by[setting].items() if all(p in v for p in POLICIES)}
        if not seeds:
            continue
        jct = {p: [seeds[k][p]["metrics"]["jct_mean_s"] for k in sorted(seeds)] for p in POLICIES}
        vs_atp = [a / d for a, d in zip(jct["atp"], jct["dsa"])]
        vs_best = [min(s, a) / d for s, a, d in zip(jct["switchml"], jct["atp"], jct["dsa"])]
        best = sorted({"SwitchML" if s <= a else "ATP" for s, a in zip(jct["switchml"], jct["atp"])})
        comm = [comm_jct(seeds[k][p]) for p in POLICIES for k in sorted(seeds)]
        if None in comm:
            comm_cell = "-"
        else:
            n = len(seeds)
            comm_cell = " / ".join(f"{statistics.mean(comm[i * n:(i + 1) * n]):.3f}"
                                   for i in range(3)) + " s"

        def m(p, key, scale=1.0, fmt="{:.2f}"):
            return fmt.format(statistics.mean(seeds[k][p]["metrics"].get(key, 0.0) / scale
                                              for k in seeds))
        lines.append(
            f"| {setting} | {len(seeds)} | {mean_range(jct['switchml'], '{:.4f}')} s "
            f"| {mean_range(jct['atp'], '{:.4f}')} s | {mean_range(jct['dsa'], '{:.4f}')} s "
            f"| {mean_range(vs_atp, '{:.4f}')}x | {mean_range(vs_best, '{:.4f}')}x "
            f"| {'/'.join(best)} | {comm_cell} | {m('dsa', 'preemptions', 1e3, '{:.1f}')} k "
            f"| {m('atp', 'fallback_packets', 1e6)} / {m('dsa', 'fallback_packets', 1e6)} M "
            f"| {m('dsa', 'resend_requests', 1.0, '{:.0f}')} |")
    return lines


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    md = ["# DSA study: arrival rate, job mix, workers per job, seeds",
          "",
          "Written by `models/ina/tools/ina_dsa_sweeps.py` from the sweeps",
          "`workloads/sweeps/ina_dsa_{arrivals,job_mix,workers}.json` (3 iterations per job;",
          "docs/ina.md, \"Arrival rate, job mix, workers per job and seeds\"). Cells: mean over the",
          "seeds [min, max]; ratios are per seed (DSA vs the better of SwitchML and ATP under the",
          "same seed), then averaged. Counts are means over the seeds. The shipped setting (30 ms, the",
          "shipped mix, 4 workers) runs in each of the three sweeps, with identical results.", ""]
    for sweep, (label, lever) in LEVERS.items():
        folder = os.path.join(src, sweep)
        if not os.path.isdir(folder):
            continue
        runs = load_runs(folder, lever)
        if os.path.exists(os.path.join(folder, "sweep.csv")):
            shutil.copyfile(os.path.join(folder, "sweep.csv"), os.path.join(dst, sweep + ".csv"))
        with open(os.path.join(dst, sweep + "_jobs.csv"), "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["setting", "seed", "policy", "model", "workers", "arrival_s",
                        "jct_s", "mean_iteration_s", "priority"])
            for r in sorted(runs, key=lambda r: (order_key(sweep, r["setting"]), r["seed"],
                                                 POLICIES.index(r["policy"]))):
                for j in sorted(r["jobs"], key=lambda j: j["arrival_s"]):
                    w.writerow([r["setting"], r["seed"], r["policy"], j["model"], j["workers"],
                                repr(j["arrival_s"]), repr(j["jct_s"]),
                                repr(j["mean_iteration_s"]), j.get("priority", "")])
        md += [f"## {sweep}", ""] + table(sweep, label, runs) + [""]
    with open(os.path.join(dst, "summary.md"), "w") as f:
        f.write("\n".join(md))


if __name__ == "__main__":
    main()
