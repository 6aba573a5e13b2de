#!/usr/bin/env python3
"""Convert a Piper input file (profiled DNN, NeurIPS 2021) to PipeDream's graph.txt layer format.

Piper's input format is described in ../shared/data/dnn_profiles/piper/README.md: per node, a
map from tensor-parallel degree to TMPCs, each with `timePerSample` (forward + backward seconds
per sample), `parameterSize` (bytes of weights); edges carry `communicationCost` (bytes).
mlsim's profile reader (sim_core/hardware/dnn_profile.hpp) reads PipeDream's graph.txt: per layer
forward and backward milliseconds per minibatch, activation and parameter bytes.

What the conversion takes and assumes:
  - the TMPC with tensor-parallel degree 1 and id "vanilla" (no activation recomputation): plain
    data parallelism, each worker holds the whole layer;
  - forward = 1/3 and backward = 2/3 of timePerSample [assumed: Piper gives only the sum; a
    backward pass computes two products per forward product, the usual 1:2 split];
  - times per minibatch = timePerSample x --minibatch (per GPU), in milliseconds;
  - parameter_size = parameterSize, bytes (fp32: the BERT file's transformer layer is
    176,997,120 bytes = 4 x (12 h^2 + 6.5 h) for hidden size h = 1920, so 4 bytes per weight);
  - activation_size = sum of the node's outgoing edges' communicationCost x --minibatch
    [assumed: read as bytes per sample; Piper's README says only "in bytes"]. mlsim uses it only
    for the [assumed] HBM traffic that moves layer times between GPUs (profile_scaling.hpp);
  - Piper's zero-time, zero-weight "tensor" nodes (the model's inputs) become "Input<id>" nodes,
    which mlsim's models leave out of compute by default.

Usage: tools/piper_to_pipedream.py --minibatch 2 IN.json OUT/graph.txt
"""
import argparse
import json
import sys


def convert(piper, minibatch):
    nodes = {n["id"]: n for n in piper["nodes"]}
    out_edges = {}
    for e in piper["edges"]:
        out_edges.setdefault(e["sourceId"], []).append(e)
    lines = []
    for nid in sorted(nodes):
        n = nodes[nid]
        tmpcs = n["TMPCs"].get("1")
        if tmpcs is None:
            sys.exit(f"node {nid}: no TMPC for tensor-parallel degree 1")
        vanilla = [t for t in tmpcs if t["id"] == "vanilla"]
        if len(vanilla) != 1:
            sys.exit(f"node {nid}: expected one 'vanilla' TMPC at degree 1")
        t = vanilla[0]
        ms = t["timePerSample"] * minibatch * 1000.0
        act = sum(e["communicationCost"] for e in out_edges.get(nid, [])) * minibatch
        name = n.get("name", f"node{nid}")
        if name == "tensor" and t["timePerSample"] == 0 and t["parameterSize"] == 0:
            name = f"Input{nid}"
        lines.append(
            f"node{nid} -- {name} -- forward_compute_time={ms / 3:.6f}, "
            f"backward_compute_time={2 * ms / 3:.6f}, activation_size={act:.3f}, "
            f"parameter_size={t['parameterSize']:.3f}")
    for e in piper["edges"]:
        lines.append(f"\tnode{e['sourceId']} -- node{e['destId']}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minibatch", type=int, required=True, help="samples per GPU per iteration")
    ap.add_argument("input")
    ap.add_argument("output")
    a = ap.parse_args()
    if a.minibatch < 1:
        sys.exit("--minibatch must be >= 1")
    with open(a.input) as f:
        piper = json.load(f)
    text = convert(piper, a.minibatch)
    with open(a.output, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
