#!/usr/bin/env python3
"""Fits the collective layer's inter-node latency (CostModel::inter_node_latency) on measured
two-node NCCL all-reduces, and prints the errors of the hierarchical all-reduce across two nodes.

The model is sim_core/collectives/hierarchical.hpp (NCCL's ring through all GPUs or its tree of
intra-node chains, the cheaper by NCCL's own cost model; 2(h-1) inter-node ring steps, 2 ceil(log2 h)
tree steps), mirrored here in a few lines to fit one constant; the C++ test
tests/serving/tp_allreduce_fidelity_test.cpp (AcrossTwoNodesAgainstVidurA100Dgx) recomputes every
table below with the C++ code and checks that the fitted value is a minimum of the same objective.

Data: ../shared/data/network_profiles/vidur/a100_dgx/all_reduce.csv only (microsoft/vidur
data/profiling/network, commit 7d47513; median column, ms; `size` in bytes, docs/collectives.md).
Fixed inputs, all from workloads/collectives/nccl_a100.json (fitted earlier on the same profiles by
tools/calibrate_collectives.py): launch, the protocols' per-step latency and efficiency (one-node
all-reduce rows), the NIC's achieved fraction of its 200 Gb/s (25 GB/s; ConnectX-6,
workloads/hardware/nics.json) line rate (two-node send/recv rows); NVLink 300 GB/s per direction
(A100-SXM4-80GB, workloads/hardware/gpus.json) with 0 link latency, as in that fit.

Fitted on: the two-node all-reduce with one GPU per node (1 x 2), every size, one NIC per node
(a single GPU per node reaches one NIC). Objective: the mean over the two size bands (< 1 MiB,
1-64 MiB) of the median absolute relative error. Grid over 0-200 us by 0.5 us, then by 0.01 us
around the best. Held out: 2 x 2, 4 x 2 and 8 x 2 (how many NICs those runs used is not recorded:
printed for 1, 2 and one per GPU).

Usage: tools/calibrate_inter_node.py [SHARED_DATA_DIR] [--write]
  --write stores the value in workloads/collectives/nccl_a100.json (system.costs.inter_node_latency
  and _inter_node_fitted); without it the file is left alone.
"""
import csv, json, math, os, statistics, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = [a for a in sys.argv[1:] if not a.startswith("--")]
DATA = args[0] if args else os.path.join(ROOT, "..", "shared", "data")
FRAGMENT = os.path.join(ROOT, "workloads", "collectives", "nccl_a100.json")
MiB = 1 << 20
NVLINK = 300e9
NIC_LINE = 25e9


def seconds(text):
    for unit, scale in (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise ValueError(text)


def load_costs():
    fragment = json.load(open(FRAGMENT))
    c = fragment["system"]["costs"]
    protocols = {name: (seconds(p["hop_latency"]), p["efficiency"])
                 for name, p in c["protocols"].items()}
    nic = fragment["_nic_fitted"]["nic_efficiency"] * NIC_LINE
    return fragment, seconds(c["launch"]), protocols, nic


def load_rows():
    path = os.path.join(DATA, "network_profiles", "vidur", "a100_dgx", "all_reduce.csv")
    rows = []
    for r in csv.DictReader(open(path)):
        n, g = int(r["num_workers"]), int(r["devices_per_node"])
        if n == g:
            continue  # one node
        rows.append((g, n // g, int(r["size"]), float(r["time_stats.all_reduce.median"]) * 1e-3))
    return rows


def cost(launch, protocols, g, h, size, inter, latency):
    n = g * h
    best = None
    for algorithm in ("ring", "tree"):
        if algorithm == "ring":
            steps, inter_steps, wire = 2 * (n - 1), 2 * (h - 1), 2 * (n - 1) / n * size
        else:
            inter_steps = 2 * math.ceil(math.log2(h))
            steps, wire = 2 * (g - 1) + inter_steps, 2 * size
        bandwidth = min(NVLINK, inter) if g > 1 else inter
        for name, (hop, eff) in protocols.items():
            t = launch + steps * hop + inter_steps * latency + wire / (eff * bandwidth)
            if best is None or t < best[0]:
                best = (t, algorithm, name)
    return best


def band(size):
    return "< 1 MiB" if size < MiB else "1-64 MiB"


def errors(rows, launch, protocols, latency, nic_bw, nics):
    out = {}
    for g, h, size, t in rows:
        p = cost(launch, protocols, g, h, size, nics(g) * nic_bw, latency)[0]
        out.setdefault((g, h, band(size)), []).append(p / t - 1)
    return out


def objective(rows, launch, protocols, latency, nic_bw):
    fit = [r for r in rows if r[0] == 1]
    e = errors(fit, launch, protocols, latency, nic_bw, lambda g: 1)
    return sum(statistics.median(abs(x) for x in v) for v in e.values()) / len(e)


def main():
    fragment, launch, protocols, nic_bw = load_costs()
    rows = load_rows()
    grid = [i * 0.5e-6 for i in range(401)]
    coarse = min(grid, key=lambda L: objective(rows, launch, protocols, L, nic_bw))
    fine = [max(0.0, coarse + i * 0.01e-6) for i in range(-60, 61)]
    best = min(fine, key=lambda L: (objective(rows, launch, protocols, L, nic_bw), L))
    value = objective(rows, launch, protocols, best, nic_bw)
    print(f"inter_node_latency {best * 1e6:.2f} us, objective {value:.4f} "
          f"(0 us: {objective(rows, launch, protocols, 0.0, nic_bw):.4f})", file=sys.stderr)
    print("| GPUs per node x nodes | NICs per node | inter_node_latency | <1 MiB | 1-64 MiB |")
    print("|---|---|---|---|---|")
    for g in (1, 2, 4, 8):
        for label, nics in (("1", lambda g: 1), ("2", lambda g: min(g, 2)), ("g", lambda g: g)):
            if g == 1 and label != "1":
                continue
            for latency in (0.0, best):
                e = errors([r for r in rows if r[0] == g], launch, protocols, latency, nic_bw, nics)
                cells = []
                for b in ("< 1 MiB", "1-64 MiB"):
                    v = e[(g, 2, b)]
                    cells.append(f"{100 * statistics.median(abs(x) for x in v):.1f}% "
                                 f"({100 * statistics.median(v):+.1f}%)")
                print(f"| {g} x 2 | {label} | {latency * 1e6:.2f} us | {cells[0]} | {cells[1]} |")
    if "--write" in sys.argv:
        fragment["_inter_node_fitted"] = {"inter_node_latency_us": round(best * 1e6, 2)}
        fragment["_inter_node"] = (
            "inter_node_latency: time each inter-node step of the hierarchical all-reduce adds "
            "(sim_core/collectives/hierarchical.hpp), fitted by tools/calibrate_inter_node.py on "
            "a100_dgx/all_reduce.csv between two nodes with one GPU each, the constants above "
            "fixed; docs/collectives.md, 'Across hosts'")
        fragment["system"]["costs"]["inter_node_latency"] = f"{round(best * 1e9)}ns"
        with open(FRAGMENT, "w") as fh:
            json.dump(fragment, fh, indent=2)
            fh.write("\n")


if __name__ == "__main__":
    main()
