#!/usr/bin/env python3
"""Summarises the DSA study's sweeps over what its paper does not state (issue 14): the arrival
rate, the job mix and the workers per job (workloads/sweeps/ina_dsa_{arrivals,job_mix,workers}.json),
each point under SwitchML, ATP and DSA with 3 seeds.

The same sweeps at full size (20 iterations per job, the arrivals unscaled) are
workloads/sweeps/ina_dsa_{arrivals,job_mix,workers}_full.json.

usage: ina_dsa_sweeps.py SWEEPS_DIR RESULTS_DIR [--reduced REDUCED_RESULTS_DIR]
  SWEEPS_DIR holds one `mlsim sweep ... --out SWEEPS_DIR/<sweep name>` folder per sweep (its
  sweep.csv and points/<id>/summary.json); RESULTS_DIR gets, per sweep, <name>.csv (mlsim's tidy
  sweep.csv, copied), <name>_jobs.csv (one row per job of every run: its model, arrival and JCT)
  and one summary.md with a table per lever. With --reduced (the RESULTS_DIR of the 3-iteration
  sweeps, whose <name>.csv it reads), each full-size sweep's table is followed by one setting
  against the 3-iteration figures of the same setting and seeds.

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
# The same levers at full size: 20 iterations per job, the mean inter-arrival not scaled.
LEVERS.update({
    name + "_full": ("mean inter-arrival (full size)" if name == "ina_dsa_arrivals" else label, lever)
    for name, (label, lever) in list(LEVERS.items())})
# Each lever's column in the 3-iteration tidy CSV (docs/sweeps.md).
REDUCED_COLUMN = {"ina_dsa_arrivals": "workload.arrivals.mean_interarrival",
                  "ina_dsa_job_mix": "name", "ina_dsa_workers": "workload.jobs[0].workers"}


def duration_s(text):
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(text)


def order_key(sweep, value):
    sweep = sweep.removesuffix("_full")
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


def per_seed_ratios(rows):
    """{seed: (DSA vs ATP, DSA vs best baseline, best baseline)} from {seed: {policy: jct}}."""
    out = {}
    for seed, jct in rows.items():
        if all(p in jct for p in POLICIES):
            s, a, d = (jct[p] for p in POLICIES)
            out[seed] = (a / d, min(s, a) / d, "SwitchML" if s <= a else "ATP")
    return out


def against_reduced(sweep, runs, reduced_csv):
    """One row per full-size setting: its ratios beside the 3-iteration ones (same seeds)."""
    lever = sweep.removesuffix("_full")
    reduced = {}
    with open(reduced_csv) as f:
        for row in csv.DictReader(f):
            reduced.setdefault(row[REDUCED_COLUMN[lever]], {}).setdefault(
                int(row["seed"]), {})[row["system.policy"]] = float(row["jct_mean_s"])
    full = {}
    for r in runs:
        full.setdefault(r["setting"], {}).setdefault(r["seed"], {})[r["policy"]] = \
            r["metrics"]["jct_mean_s"]
    full_settings = sorted(full, key=lambda v: order_key(sweep, v))

    def reduced_setting(value):
        if lever != "ina_dsa_arrivals":
            return value
        # The full-size mean inter-arrival is the reduced one x 20/3 (6.666667 ms for 1 ms).
        return min(reduced, key=lambda v: abs(duration_s(v) - duration_s(value) * 3 / 20))
    lines = [f"Full size against 3 iterations per job ({lever}.json), over the seeds run at full "
             "size: mean [min, max] over those seeds.", "",
             "| setting (full size) | 3 iterations | seeds | DSA vs ATP, full | 3 iterations "
             "| DSA vs best baseline, full | 3 iterations | best baseline full / 3 iterations |",
             "|---|---|---|---|---|---|---|---|"]
    for fs in full_settings:
        rs = reduced_setting(fs)
        f, r = per_seed_ratios(full[fs]), per_seed_ratios(reduced.get(rs, {}))
        seeds = sorted(k for k in f if k in r)
        if not seeds:
            continue

        def cell(d, i):
            return mean_range([d[k][i] for k in seeds], "{:.4f}") + "x"

        def best(d):
            return "/".join(sorted({d[k][2] for k in seeds}))
        lines.append(f"| {fs} | {rs} | {','.join(map(str, seeds))} | {cell(f, 0)} | {cell(r, 0)} "
                     f"| {cell(f, 1)} | {cell(r, 1)} | {best(f)} / {best(r)} |")
    return lines


def main():
    args = sys.argv[1:]
    reduced_dir = None
    if len(args) == 4 and args[2] == "--reduced":
        reduced_dir = args[3]
        args = args[:2]
    if len(args) != 2:
        sys.exit(__doc__)
    src, dst = args
    os.makedirs(dst, exist_ok=True)
    full = any(os.path.isdir(os.path.join(src, n)) for n in LEVERS if n.endswith("_full"))
    if full:
        md = ["# DSA study at full size: arrival rate, job mix, workers per job, seeds",
              "",
              "Written by `models/ina/tools/ina_dsa_sweeps.py` from the sweeps",
              "`workloads/sweeps/ina_dsa_{arrivals,job_mix,workers}_full.json` (20 iterations per",
              "job, as shipped; docs/ina.md, \"Arrival rate, job mix, workers per job and seeds\").",
              "Cells: mean over the seeds run [min, max]; ratios are per seed (DSA vs the better of",
              "SwitchML and ATP under the same seed), then averaged. Counts are means over the seeds.",
              "The shipped setting (200 ms, the shipped mix, 4 workers) runs in each of the three",
              "sweeps, with identical results.", ""]
    else:
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
        reduced_csv = os.path.join(reduced_dir or "", sweep.removesuffix("_full") + ".csv")
        if reduced_dir and sweep.endswith("_full") and os.path.exists(reduced_csv):
            md += against_reduced(sweep, runs, reduced_csv) + [""]
    with open(os.path.join(dst, "summary.md"), "w") as f:
        f.write("\n".join(md))


if __name__ == "__main__":
    main()
