#!/usr/bin/env python3
"""Regenerates the measured tables of docs/elastic_serving.md (issue 16's elastic-serving study).

Every row is one `mlsim run workloads/serving/elastic_multiworld.json --variant V --set ...`;
the rows' variants and overrides are listed below, table by table, in the order of the doc. A
run shared by several tables (e.g. the static `multiworld`) runs once. Prints the tables as
markdown (with --commands, each row's command in a comment under its table), so that a doc
table can be replaced whole.

    python3 tools/elastic_tables.py --mlsim build/cli/mlsim            # every table, -j 2
    python3 tools/elastic_tables.py --mlsim build/cli/mlsim --only study routers
    python3 tools/elastic_tables.py --list                               # the tables' names

Rows the current binary cannot produce (the old boundary router of 2026-12-04, the trial build
of 2026-12-05) are not here: the doc keeps them as history, marked as such.
"""
import argparse
import concurrent.futures
import hashlib
import json
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "workloads/serving/elastic_multiworld.json"
E = "system.separate[0].elastic."

H100 = [
    ('topology.hardware.groups', '[{"hosts": [2, 3, 4], "gpu": "H100-SXM5-80GB"}]'),
    ('compute.profiles.gpus', '{"a100": "A100-SXM4-80GB", "h100": "H100-SXM5-80GB"}'),
]


def slo_autoscaler(out_below, in_above, cooldown):
    return (E + "autoscaler", json.dumps({"stage": 1, "signal": "slo_attainment",
                                          "scale_out_below": out_below,
                                          "scale_in_above": in_above, "cooldown": cooldown}))


def waiting_autoscaler(out_above):
    return (E + "autoscaler", json.dumps({"stage": 1, "signal": "waiting",
                                          "scale_out_above": out_above, "scale_in_below": 1,
                                          "cooldown": "120s"}))


class Run:
    """One mlsim run: a variant and its overrides (a list of (path, value))."""

    def __init__(self, variant, sets=()):
        self.variant = variant
        self.sets = tuple(sets)

    def key(self):
        return (self.variant, self.sets)

    def argv(self, mlsim, out):
        a = [mlsim, "run", str(SCENARIO), "--variant", self.variant]
        for p, v in self.sets:
            a += ["--set", f"{p}={v}"]
        return a + ["--out", str(out), "--quiet"]

    def shown(self):
        a = ["mlsim", "run", "workloads/serving/elastic_multiworld.json", "--variant", self.variant]
        for p, v in self.sets:
            a += ["--set", f"{p}={v}"]
        return " ".join(shlex.quote(x) for x in a)


# Formatting of one figure.
def f0(x):
    return f"{x:.0f}"


def f1(x):
    return f"{x:.1f}"


def f2(x):
    return f"{x:.2f}"


def f3(x):
    return f"{x:.3f}"


def ttft(x):  # seconds: 3 decimals, 2 past 10 s (as the doc's sweep table)
    return f"{x:.2f}" if x >= 10 else f"{x:.3f}"


def avail(x):
    return "1" if x == 1.0 else f"{x:.3f}"


def count(x):
    return f"{x:.0f}"


def pct(x):
    return f"{x:.2f}%"


def busy(stage):
    def get(r):
        u = r["details"]["serving_elastic"]["stages"][stage]["worker_utilisation"]
        # The spare (placed, never started) shows 0: leave it out as the doc's table does.
        return ", ".join(f"{100 * x:.0f}%" for x in u if x > 0)
    return get


def m(name, fmt, scale=1.0):
    return lambda r: fmt(r["metrics"][name] * scale)


TOK = m("serving_throughput_tokens_per_s", f0)
TOK1 = m("serving_throughput_tokens_per_s", f1)
TTFT = m("serving_ttft_mean_s", ttft)
TPOT = m("serving_tpot_mean_s", f1, 1000)
SLO = m("serving_slo_attainment", f3)
GOOD = m("serving_goodput_requests_per_s", f3)
AVAIL = m("serving_elastic_availability", avail)
UNAV = m("serving_elastic_unavailable_s", lambda x: "0" if x == 0 else f1(x))
RECOMP = m("serving_elastic_requests_recomputed", count)
GPUH = m("serving_elastic_gpu_hours", f2)
GPUH3 = m("serving_elastic_gpu_hours", f3)
POLL = m("serving_elastic_poll_cpu_hours", f3)
OUTS = m("serving_elastic_scale_outs", count)
INS = m("serving_elastic_scale_ins", count)
FAIL = m("serving_elastic_failures", count)
DONE = m("serving_requests_completed", count)
UNFIN = m("serving_elastic_requests_unfinished", count)


def opt(name, fmt):
    """A metric only some runs report (drain and KV migration): blank when absent."""
    return lambda r: fmt(r["metrics"][name]) if name in r["metrics"] else ""


KVM = opt("serving_elastic_kv_migrations", count)
DRAIN = opt("serving_elastic_drain_mean_s", f2)


def loss(base):
    """Throughput loss against the run `base` (percent)."""
    def get(r, runs):
        b = runs[base.key()]["metrics"]["serving_throughput_tokens_per_s"]
        return pct(100 * (b - r["metrics"]["serving_throughput_tokens_per_s"]) / b)
    get.needs_runs = True
    return get


def human(duration):
    """"100us" -> "100 us", "0s" -> "0", as the doc writes them."""
    if duration == "0s":
        return "0"
    for unit in ("us", "ms", "s"):
        if duration.endswith(unit):
            return duration[: -len(unit)] + " " + unit
    return duration


def tables():
    """name -> (title, header, rows); a row is (label cells, Run, figure getters)."""
    t = {}

    rows = []
    for gpu, extra in (("H100", H100), ("A100", [])):
        for router in ("round_robin", "fewest_engines", "least_work"):
            label = router + (" (default)" if router == "round_robin" else "")
            run = Run("multiworld_saturated", list(extra) + [(E + "stage_router", router)])
            rows.append(([gpu, label], run, [TOK, busy(0), busy(1)]))
    t["routers"] = ("Boundary routers: busy-time balance",
                    ["stage 1 on", "router", "tokens/s", "stage-0 workers busy",
                     "stage-1 workers busy"], rows)

    rows = []
    for v in ("multiworld_events", "single_world_events", "multiworld_autoscaled",
              "multiworld_autoscaled_drain"):
        for rb in ("fewest_engines", "least_work"):
            run = Run(v, [(E + "poll_step", "5us"), (E + "rebalance", rb)])
            rows.append(([v, rb], run, [RECOMP, TTFT, TPOT, SLO, GOOD, AVAIL, GPUH, OUTS]))
    # The prose under it: both policies with the least_work router as well, poll_step 0.
    for rb in ("fewest_engines", "least_work"):
        run = Run("multiworld_events", [(E + "stage_router", "least_work"), (E + "rebalance", rb)])
        rows.append((["multiworld_events, least_work router, poll_step 0", rb], run,
                     [RECOMP, TTFT, TPOT, SLO, GOOD, AVAIL, GPUH, OUTS]))
    t["rebalance"] = ("Join rebalancing (poll_step 5 us unless said)",
                      ["variant", "rebalance", "recomputed", "TTFT mean (s)", "TPOT mean (ms)",
                       "SLO attainment", "goodput (req/s)", "availability", "GPU-hours",
                       "scale-outs"], rows)

    sw_sat = Run("single_world_saturated")
    rows = [(["single_world_saturated", "any"], sw_sat, [TOK1, "", "", "", POLL, GPUH3])]
    for ps in ("0", "5us", "50us", "500us"):
        sets = [] if ps == "0" else [(E + "poll_step", ps)]
        shown = "0 (study)" if ps == "0" else ps.replace("us", " us")
        rows.append((["multiworld_saturated", shown], Run("multiworld_saturated", sets),
                     [TOK1, loss(sw_sat), "", "", POLL, GPUH3]))
    rows.append((["single_world (trace)", "any"], Run("single_world"),
                 [TOK, "", TPOT, SLO, POLL, GPUH]))
    for ps in ("0", "5us"):
        sets = [] if ps == "0" else [(E + "poll_step", ps)]
        rows.append((["multiworld (trace)", "0 (study)" if ps == "0" else "5 us"],
                     Run("multiworld", sets), [TOK, "", TPOT, SLO, POLL, GPUH]))
    t["polling"] = ("Host-side polling: CPU time and rounds",
                    ["variant", "poll_step", "tokens/s", "loss against the single world",
                     "TPOT mean (ms)", "SLO attainment", "poll CPU (core-hours)", "GPU-hours"],
                    rows)

    rows = []
    for v in ("multiworld", "single_world"):
        for router in ("round_robin", "fewest_engines", "least_work"):
            rows.append(([v, router], Run(v, [(E + "stage_router", router)]),
                         [TOK, TTFT, TPOT, SLO, GOOD]))
    for cost in ("10us", "50us"):
        rows.append((["multiworld", f"round_robin, polling {cost}"],
                     Run("multiworld", [(E + "polling_overhead", cost)]),
                     [TOK, TTFT, TPOT, SLO, GOOD]))
    t["routers_trace"] = ("Boundary routers at the trace's rate (steady state)",
                          ["variant", "router", "tokens/s", "TTFT mean (s)", "TPOT mean (ms)",
                           "SLO attainment", "goodput (req/s)"], rows)

    rows = []
    for label, v in (("single_world (steady)", "single_world"),
                     ("multiworld (steady)", "multiworld"),
                     ("single_world_events", "single_world_events"),
                     ("multiworld_events", "multiworld_events")):
        rows.append(([label], Run(v), [TOK, TTFT, TPOT, SLO, GOOD, AVAIL, UNAV, RECOMP, GPUH,
                                       POLL]))
    for v in ("single_world_saturated", "multiworld_saturated"):
        rows.append(([v], Run(v), [TOK, "", "", "", "", AVAIL, UNAV, RECOMP, GPUH3, POLL]))
    t["study"] = ("Study",
                  ["variant", "tokens/s", "TTFT mean (s)", "TPOT mean (ms)", "SLO attainment",
                   "goodput (req/s)", "availability", "unavailable (s)", "recomputed",
                   "GPU-hours", "poll CPU (core-hours)"], rows)

    rows = []
    for router in ("round_robin", "least_work"):
        rs = [(E + "stage_router", router)]
        base = Run("single_world_saturated", rs)
        rows.append(([router, "single world"], base, [TOK1, ""]))
        for cost in ("0s", "100us", "500us", "1ms", "2ms", "5ms", "10ms", "20ms"):
            run = Run("multiworld_saturated", rs + [(E + "polling_overhead", cost)])
            rows.append(([router, human(cost)], run, [TOK1, loss(base)]))
    t["polling_cost"] = ("Steady-state loss against the polling cost per send (saturated)",
                         ["router", "polling per send", "tokens/s",
                          "loss against the single world"], rows)

    rows = []
    for policy in ("multiworld", "single_world"):
        for mtbf in ("20000h", "10000s", "2500s"):
            for cost in ("0s", "100us", "1ms", "5ms"):
                sets = [(E + "polling_overhead", cost), ("events.random_failures.mtbf", mtbf),
                        ("events.random_failures.repair", "300s"),
                        ("events.random_failures.until", "3500s")]
                shown_mtbf = {"20000h": "none", "10000s": "10,000 s", "2500s": "2,500 s"}[mtbf]
                rows.append(([policy, human(cost), shown_mtbf], Run(policy, sets),
                             [TTFT, SLO, GOOD, AVAIL, UNAV, FAIL, RECOMP, GPUH, DONE, UNFIN]))
    t["sweep"] = ("Sweep: polling cost x failure rate (the scenario's sweep, point by point)",
                  ["policy", "polling", "MTBF per host", "TTFT mean (s)", "SLO attainment",
                   "goodput (req/s)", "availability", "unavailable (s)", "failures", "recomputed",
                   "GPU-hours", "completed", "unfinished"], rows)

    auto_cols = [TOK, TTFT, TPOT, SLO, GOOD, GPUH, OUTS, INS, RECOMP, KVM, DRAIN]
    rows = [(["multiworld (static, 2 stage-1 workers)"], Run("multiworld"), auto_cols),
            (["multiworld_autoscaled (immediate scale-in)"], Run("multiworld_autoscaled"),
             auto_cols),
            (["multiworld_autoscaled_drain (drain + KV migration)"],
             Run("multiworld_autoscaled_drain"), auto_cols)]
    t["autoscaler"] = ("Autoscaling",
                       ["variant", "tokens/s", "TTFT mean (s)", "TPOT mean (ms)", "SLO attainment",
                        "goodput (req/s)", "GPU-hours", "scale-outs", "scale-ins", "recomputed",
                        "KV migrations", "drain mean (s)"], rows)

    rows = []
    for out_below, in_above, cd in ((0.8, 0.95, "120s"), (0.9, 0.98, "120s"),
                                    (0.8, 0.95, "300s")):
        for v, label in (("multiworld_autoscaled", "immediate"),
                         ("multiworld_autoscaled_drain", "drain + KV")):
            run = Run(v, [slo_autoscaler(out_below, in_above, cd)])
            rows.append(([f"{out_below} / {in_above} / {cd[:-1]} s", label], run,
                         [SLO, GOOD, GPUH, OUTS, RECOMP, KVM]))
    t["autoscaler_thresholds"] = ("Autoscaler thresholds (SLO signal)",
                                  ["scale_out_below / scale_in_above / cooldown", "scale-in",
                                   "SLO attainment", "goodput (req/s)", "GPU-hours", "scale-outs",
                                   "recomputed", "KV migrations"], rows)

    rows = []
    for above in (4, 16, 64):
        rows.append(([f"out above {above}, in below 1, 120 s"],
                     Run("multiworld_autoscaled", [waiting_autoscaler(above)]),
                     [SLO, OUTS, INS, RECOMP, GPUH, TPOT]))
    t["autoscaler_waiting"] = ("Autoscaler on the queue length (waiting, immediate scale-in)",
                               ["thresholds", "SLO attainment", "scale-outs", "scale-ins",
                                "recomputed", "GPU-hours", "TPOT mean (ms)"], rows)
    return t


def identity(mlsim):
    """What a reused run must share with this one: the binary (path, size, time) and the
    scenario files, so that a rebuild or an edited scenario never reuses stale results."""
    b = pathlib.Path(mlsim).resolve().stat()
    h = hashlib.sha1(f"{pathlib.Path(mlsim).resolve()} {b.st_size} {b.st_mtime_ns}".encode())
    for f in sorted(SCENARIO.parent.parent.rglob("*.json")):
        h.update(f.read_bytes())
    return h.hexdigest()


def run_one(mlsim, work, ident, run):
    # A run's folder is named by a hash of the binary, the scenarios and the run's variant and
    # overrides, so that --work reuses a finished run whatever --only selects.
    out = work / hashlib.sha1((ident + repr(run.key())).encode()).hexdigest()[:12]
    summary = out / "summary.json"
    if not summary.exists():
        subprocess.run(run.argv(mlsim, out), check=True, stdout=subprocess.DEVNULL)
    return json.loads(summary.read_text())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlsim", default=str(ROOT / "build/cli/mlsim"), help="the mlsim binary")
    ap.add_argument("--work", default="/tmp/elastic_tables",
                    help="folder for the runs' results (a finished run is reused)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="tables to print (default: all)")
    ap.add_argument("--list", action="store_true", help="list the tables and exit")
    ap.add_argument("--commands", action="store_true", help="print each row's command")
    args = ap.parse_args()

    t = tables()
    if args.list:
        for name, (title, _, rows) in t.items():
            print(f"{name}: {title} ({len(rows)} rows)")
        return 0
    names = args.only or list(t)
    for n in names:
        if n not in t:
            sys.exit(f"unknown table {n!r}; --list gives them")

    unique = {}
    for n in names:
        for _, run, _ in t[n][2]:
            unique.setdefault(run.key(), run)
    ident = identity(args.mlsim)
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futs = {k: pool.submit(run_one, args.mlsim, work, ident, r) for k, r in unique.items()}
        for k, f in futs.items():
            results[k] = f.result()

    for n in names:
        title, header, rows = t[n]
        print(f"### {n}: {title}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for labels, run, getters in rows:
            r = results[run.key()]
            cells = list(labels)
            for g in getters:
                if isinstance(g, str):
                    cells.append(g)
                elif getattr(g, "needs_runs", False):
                    cells.append(g(r, results))
                else:
                    cells.append(g(r))
            print("| " + " | ".join(cells) + " |")
        if args.commands:
            print()
            for labels, run, _ in rows:
                print(f"<!-- {' / '.join(labels)}: {run.shown()} -->")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
