#!/usr/bin/env python3
"""Writes the shipped example Chakra execution trace (workloads/traces/chakra_example): a
hand-checkable training iteration of 4 ranks, 2 pipeline stages x 2 data-parallel replicas, as
MLCommons Chakra traces (one file per rank, <dir>/trace.<rank>.et) plus ASTRA-sim's
communicator-group file (<dir>/groups.json). Run: python3 tools/chakra_example.py <dir>

Built here rather than downloaded: no trace data enters mlsim (helper-guide: no other measured
dataset), so every duration and size below is [assumed], chosen so the iteration can be timed by
hand (tests/llm_training/chakra_test.cpp, ShippedExampleTraceTakesTheHandDerivedTime).

Rank r = d + 2 s (replica d, stage s). Per rank, one micro-batch:
  stage 0: forward (100 us) -> send the activation (1 MB) to its stage-1 peer -> receive the
           activation's gradient (1 MB) -> backward (200 us) -> all-reduce 2 MB over its DP group
  stage 1: receive the activation -> forward (100 us) -> backward (200 us) -> send the gradient
           -> all-reduce 2 MB over its DP group
DP groups (pg_name): "dp0" = ranks 0, 1 (stage 0), "dp1" = ranks 2, 3 (stage 1).

No protobuf package is needed: the few fields used are encoded by hand, with the field numbers of
Chakra's schema/protobuf/et_def.proto (mlcommons/chakra), which sim_core/workload/chakra/
chakra_et.proto repeats: each file is a varint-length-delimited GlobalMetadata, then Nodes
(Chakra's encodeMessage). Output is deterministic (same bytes every run).
"""
import json
import os
import sys

from chakra_wire import delimited, varint

# et_def.proto enums
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
ALL_REDUCE = 0


def key(field, wire):
    return varint(field << 3 | wire)


def f_varint(field, n):
    return key(field, 0) + varint(n)


def f_bytes(field, data):
    return key(field, 2) + varint(len(data)) + data


def attr(name, value):
    """AttributeProto: name = 1; int64_val = 9; string_val = 29."""
    body = f_bytes(1, name.encode())
    if isinstance(value, str):
        body += f_bytes(29, value.encode())
    else:
        body += f_varint(9, value)
    return body


def node(nid, name, ntype, deps=(), duration_us=0, attrs=()):
    """Node: id = 1; name = 2; type = 3; data_deps = 5 (packed); duration_micros = 7; attr = 10."""
    body = f_varint(1, nid) + f_bytes(2, name.encode()) + f_varint(3, ntype)
    if deps:
        body += f_bytes(5, b"".join(varint(d) for d in deps))
    if duration_us:
        body += f_varint(7, duration_us)
    for a in attrs:
        body += f_bytes(10, attr(*a))
    return body


MB = 1_000_000


def rank_nodes(rank):
    d, s = rank % 2, rank // 2
    peer = d + 2 * (1 - s)
    group = f"dp{s}"
    coll = (COMM_COLL_NODE, [("comm_type", ALL_REDUCE), ("comm_size", 2 * MB), ("pg_name", group)])
    if s == 0:
        return [
            node(1, "forward", COMP_NODE, (), 100),
            node(2, "send_activation", COMM_SEND_NODE, (1,), 0,
                 [("comm_dst", peer), ("comm_size", MB)]),
            node(3, "recv_gradient", COMM_RECV_NODE, (2,), 0,
                 [("comm_src", peer), ("comm_size", MB)]),
            node(4, "backward", COMP_NODE, (3,), 200),
            node(5, "dp_all_reduce", coll[0], (4,), 0, coll[1]),
        ]
    return [
        node(1, "recv_activation", COMM_RECV_NODE, (), 0,
             [("comm_src", peer), ("comm_size", MB)]),
        node(2, "forward", COMP_NODE, (1,), 100),
        node(3, "backward", COMP_NODE, (2,), 200),
        node(4, "send_gradient", COMM_SEND_NODE, (3,), 0,
             [("comm_dst", peer), ("comm_size", MB)]),
        node(5, "dp_all_reduce", coll[0], (4,), 0, coll[1]),
    ]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: chakra_example.py <output dir>")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    metadata = delimited(f_bytes(1, b"0.0.4"))  # GlobalMetadata.version = 1
    for rank in range(4):
        with open(os.path.join(out, f"trace.{rank}.et"), "wb") as f:
            f.write(metadata)
            for n in rank_nodes(rank):
                f.write(delimited(n))
    with open(os.path.join(out, "groups.json"), "w") as f:
        json.dump({"dp0": [0, 1], "dp1": [2, 3]}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
