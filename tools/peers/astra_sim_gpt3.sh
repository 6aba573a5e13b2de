#!/usr/bin/env bash
# Reproduces the ASTRA-sim (analytical network backend) measurement of docs/llm_training.md
# ("Peers' simulation time"): GPT-3 175B Megatron iterations (TP 8, PP 16, DP as given)
# simulated by ASTRA-sim, timed with /usr/bin/time -v next to mlsim on the same iteration.
#
# NOT part of CI and nothing in the build or the tests depends on it. It needs the peers'
# sources already on this machine as bare git mirrors (the session's `fetch` tool puts them in
# /work/.mirror/<owner>+<name>/repo) and these Debian packages (beyond the ones mlsim needs):
#   libspdlog-dev libyaml-cpp-dev (libfmt-dev, libprotobuf-dev, protobuf-compiler, python3-protobuf)
# Nothing of ASTRA-sim is copied into mlsim: it is unpacked, built and run under $PEERS.
#
# Usage: tools/peers/astra_sim_gpt3.sh [build|traces|run|all]   (default all), from the repository
#   root, with mlsim built (build/cli/mlsim). Environment: PEERS=/work/peers MIRRORS=/work/.mirror
#   MLSIM=./build/cli/mlsim JOBS=2 RUNS="2:192 8:24" (DP degree:micro-batches per pipeline; NPUs
#   = 128 x DP) MEM_CAP_KB=12582912 (ASTRA-sim's address-space cap)
set -euo pipefail

PEERS=${PEERS:-/work/peers}
MIRRORS=${MIRRORS:-/work/.mirror}
MLSIM=${MLSIM:-./build/cli/mlsim}
JOBS=${JOBS:-2}
REPO_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$PEERS/astra-sim
OUT=$PEERS/out

# Exact versions. ASTRA-sim's newest snapshot (518bd51, 2026-03-25) pins chakra 0e3cd40 and
# astra-network-analytical e8c5119, which the stored mirrors of those forks do not hold; c459ab6
# (2025-08-11) is the newest ASTRA-sim commit whose pinned submodules are all available.
ASTRA_SIM=c459ab61193bdb5b663ab61d2e923314dae8a77f      # astra-sim/astra-sim
CHAKRA=214f2c559c10f897bcc395f8e1502d80d14f1541          # astra-sim/chakra (pinned by c459ab6)
NET_ANALYTICAL=599a0473a9a74f5383f73b3cea5a12b9bc5ebaef  # astra-sim/astra-network-analytical
MEM_ANALYTICAL=641cce854d256bfd288b1de9607b6757313363f9  # astra-sim/astra-memory-analytical

unpack() {  # unpack <mirror> <commit> <dir>
  mkdir -p "$3"
  git --git-dir="$MIRRORS/$1/repo" archive "$2" | tar -x -C "$3"
}

build() {
  rm -rf "$SRC"
  unpack astra-sim+astra-sim $ASTRA_SIM "$SRC"
  for d in extern/graph_frontend/chakra extern/network_backend/analytical \
           extern/remote_memory_backend/analytical; do rm -rf "${SRC:?}/$d"; done
  unpack astra-sim+chakra $CHAKRA "$SRC/extern/graph_frontend/chakra"
  unpack astra-sim+astra-network-analytical $NET_ANALYTICAL "$SRC/extern/network_backend/analytical"
  unpack astra-sim+astra-memory-analytical $MEM_ANALYTICAL "$SRC/extern/remote_memory_backend/analytical"
  # The fmt, spdlog and yaml-cpp submodules are replaced by the Debian packages (find_package
  # instead of add_subdirectory); nothing else in the sources is changed.
  sed -i -e 's|^add_subdirectory("${CMAKE_CURRENT_SOURCE_DIR}/extern/helper/fmt")|find_package(fmt REQUIRED)|' \
         -e 's|^add_subdirectory("${CMAKE_CURRENT_SOURCE_DIR}/extern/helper/spdlog")|find_package(spdlog REQUIRED)|' \
         "$SRC/CMakeLists.txt"
  sed -i -e 's|^add_subdirectory(${CMAKE_CURRENT_SOURCE_DIR}/extern/yaml-cpp yaml-cpp)|find_package(yaml-cpp REQUIRED)|' \
         "$SRC/extern/network_backend/analytical/CMakeLists.txt"
  local proto=$SRC/extern/graph_frontend/chakra/schema/protobuf
  protoc et_def.proto --proto_path="$proto" --cpp_out="$proto"
  protoc et_def.proto --proto_path="$proto" --python_out="$proto"
  cmake -S "$SRC/build/astra_analytical" -B "$SRC/build/astra_analytical/build" \
        -DCMAKE_BUILD_TYPE=Release -DBUILDTARGET=congestion_unaware
  nice -n 10 cmake --build "$SRC/build/astra_analytical/build" -j"$JOBS"
}

# The GPT-3 shapes (workloads/llm_training/gpt3_175b.json) and the scenario mlsim ships.
SCENARIO=$REPO_ROOT/workloads/scenarios/llm_training_gpt3_1024.json
PROTO=$SRC/extern/graph_frontend/chakra/schema/protobuf
PY=/usr/bin/python3  # Debian's, for python3-protobuf

# Kernel times from mlsim's own pricing of the scenario (roofline), so that both simulators
# run the same compute. Three small runs (TP 8, DP 1, one micro-batch, no recomputation):
#   1 layer,  PP 1: compute = 3L + 3e + 3h   (L = one layer's forward, e = embedding, h = head;
#   2 layers, PP 1: compute = 6L + 3e + 3h    backward is every forward kernel twice)
#   2 layers, PP 2: the first stage (last to finish) computes 3L + 3e
kernel_times() {
  local common=(--set system.dp=1 --set system.global_batch=1 --set system.recompute=false --quiet)
  "$MLSIM" run "$SCENARIO" "${common[@]}" --set system.pp=1 --set workload.model.layers=1 --out "$OUT/k1"
  "$MLSIM" run "$SCENARIO" "${common[@]}" --set system.pp=1 --set workload.model.layers=2 --out "$OUT/k2"
  "$MLSIM" run "$SCENARIO" "${common[@]}" --set system.pp=2 --set workload.model.layers=2 --out "$OUT/k3"
  $PY - "$OUT" > "$OUT/kernels.env" <<'PYEOF'
import json, sys
out = sys.argv[1]
m = lambda k: json.load(open(f"{out}/{k}/summary.json"))["metrics"]
c1, c2 = m("k1")["compute_s"], m("k2")["compute_s"]
k3 = json.load(open(f"{out}/k3/summary.json"))
assert k3["details"]["critical_rank"] == 0
L = (c2 - c1) / 3
e = k3["metrics"]["critical_rank_compute_s"] / 3 - L
h = c1 / 3 - L - e
# Attention's share of a layer's forward by Megatron's FLOP count (Narayanan et al. SC'21,
# eq. 3): QKV + output projections 8 b s H^2 and attention 4 b s^2 H, against the MLP's 16 b s H^2
# (GPT-3: H = 12288, s = 2048). Within a rank the chain is serial (attention, all-reduce, MLP,
# all-reduce), so the split moves no time; only the sum is mlsim's.
H, S = 12288, 2048
share = round((8 * H * H + 4 * S * H) / (24 * H * H + 4 * S * H), 3)  # 0.351
us = lambda x: int(round(x * 1e6))
layer = us(L)
attn = int(round(layer * share))
print(f"LAYER_US={layer}\nATTN_US={attn}\nMLP_US={layer - attn}\nEMB_US={us(e)}\nHEAD_US={us(h)}")
# Gradient bytes per GPU (fp16), the formulas of mlsim's read_training_params for TP 8 and
# 6 layers per stage: layer parameters per GPU, plus the embedding (first stage, with the
# learned positions) or the LM head (last stage).
f, t, V, lps = 4 * H, 8, 51200, 6
lp = (H * 3 * H + 3 * H + H * H + H * f + f + f * H) / t + H + H + 4 * H
print(f"GRAD_FIRST={int(2 * (lps * lp + V * H / t + S * H))}")
print(f"GRAD_MIDDLE={int(2 * lps * lp)}")
print(f"GRAD_LAST={int(2 * (lps * lp + V * H / t))}")
print(f"ACTIVATION={S * H * 2}")
PYEOF
  cat "$OUT/kernels.env"
}

# Traces and configuration for TP 8 x PP 16 x DP $1 (NPUs = 128 x DP) with $2 micro-batches
# per pipeline (192: the scenario's global batch of 1536 at DP 8, 12288 at DP 64).
traces() {
  local dp=$1 mb=${2:-192}
  local dir=$OUT/gpt3_dp${dp}_mb${mb}
  # shellcheck disable=SC1091
  source "$OUT/kernels.env"
  rm -rf "$dir"; mkdir -p "$dir"
  $PY "$REPO_ROOT/tools/peers/megatron_chakra.py" --proto-dir "$PROTO" --out "$dir/gpt3" \
      --tp 8 --pp 16 --dp "$dp" --micro-batches "$mb" --layers 96 --recompute \
      --attn-us "$ATTN_US" --mlp-us "$MLP_US" --emb-us "$EMB_US" --head-us "$HEAD_US" \
      --activation-bytes "$ACTIVATION" --grad-bytes-first "$GRAD_FIRST" \
      --grad-bytes-middle "$GRAD_MIDDLE" --grad-bytes-last "$GRAD_LAST"
  # Network: the scenario's DGX A100 cluster as ASTRA-sim's 3-D congestion-unaware topology
  # [TP, DP, PP]: NVSwitch at 300 GB/s per GPU (A100 datasheet, mlsim's catalog), one 200 Gb/s
  # HDR NIC per GPU (25 GB/s) across nodes for both the DP and the PP dimension (the scenario's
  # 1:1 leaf-spine). Latencies [assumed]: 1 us for NVSwitch, 2 us across the fabric (mlsim's
  # 1 us per link, host to leaf to host).
  cat > "$dir/network.yml" <<YML
topology: [ Switch, Switch, Switch ]
npus_count: [ 8, $dp, 16 ]
bandwidth: [ 300.0, 25.0, 25.0 ]  # GB/s
latency: [ 1000.0, 2000.0, 2000.0 ]  # ns
YML
  # System: ring collectives in every dimension, replayed kernel times (no roofline); the other
  # values are those of ASTRA-sim's examples/system/native_collectives/HGX-H100-validated.json
  # (except one active chunk per dimension instead of 2),
  # with the A100-80GB's HBM bandwidth (2039 GB/s, datasheet) as local-mem-bw.
  cat > "$dir/system.json" <<JSON
{"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
 "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring", "ring", "ring"],
 "all-gather-implementation": ["ring", "ring", "ring"],
 "reduce-scatter-implementation": ["ring", "ring", "ring"],
 "all-to-all-implementation": ["ring", "ring", "ring"], "collective-optimization": "localBWAware",
 "local-mem-bw": 2039, "boost-mode": 0, "roofline-enabled": 0}
JSON
  echo '{"memory-type": "NO_MEMORY_EXPANSION"}' > "$dir/memory.json"
}

# ASTRA-sim on those traces, then mlsim on the same iteration, back to back, each under
# /usr/bin/time -v. ASTRA-sim's address space is capped (MEM_CAP_KB, default 12 GiB) so that a
# run too large for the machine fails instead of pushing others out of memory.
run() {
  local dp=$1 mb=${2:-192}
  local dir=$OUT/gpt3_dp${dp}_mb${mb}
  local batch=$((dp * mb))
  # In $dir: ASTRA-sim writes its log/ folder into the working directory.
  ( cd "$dir"; ulimit -v "${MEM_CAP_KB:-12582912}"
    /usr/bin/time -v -o "$dir/astra.time" \
      "$SRC/build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware" \
      --workload-configuration="$dir/gpt3" --system-configuration="$dir/system.json" \
      --remote-memory-configuration="$dir/memory.json" --network-configuration="$dir/network.yml" \
      > "$dir/astra.log" 2>&1 ) || echo "ASTRA-sim failed: see $dir/astra.log" >&2
  # The iteration: the last NPU's finish (cycles are ns), and any error it printed.
  grep -E "error|critical" "$dir/astra.log" || true
  grep finished "$dir/astra.log" | sed -E 's/.*finished, ([0-9]+) cycles.*/\1/' | sort -n | tail -1 |
    awk '{printf "ASTRA-sim iteration: %.6f s\n", $1 / 1e9}'
  # On the execution graph, as docs/llm_training.md's table measured it (its graph ranks and
  # nodes; since 2026-12-07 the scenario's default core, "auto", takes the training core for the
  # collapsed run), then the collapsed run on that default core.
  for collapse in true false; do
    /usr/bin/time -v -o "$dir/mlsim_collapse_${collapse}.time" "$MLSIM" run "$SCENARIO" \
      --set system.dp="$dp" --set system.global_batch="$batch" --set system.core=graph \
      --set system.collapse_tensor_parallel=$collapse --out "$dir/mlsim_collapse_${collapse}" --quiet
  done
  /usr/bin/time -v -o "$dir/mlsim_core.time" "$MLSIM" run "$SCENARIO" \
    --set system.dp="$dp" --set system.global_batch="$batch" --out "$dir/mlsim_core" --quiet
  for f in "$dir"/*.time; do
    echo "== $f"; grep -E "Elapsed|User time|System time|Maximum resident" "$f"
  done
}

# RUNS: DP degree:micro-batches per pipeline. The default is what docs/llm_training.md reports:
# 256 NPUs with the full 192 micro-batches, 1024 NPUs with 24. The full 1024- and 8192-NPU
# iterations ("8:192 64:192") need about 18.5 and 148 GiB (raise MEM_CAP_KB on a machine that has it).
RUNS=${RUNS:-2:192 8:24}
case "${1:-all}" in
  build) build ;;
  traces) mkdir -p "$OUT"; kernel_times; for r in $RUNS; do traces "${r%%:*}" "${r##*:}"; done ;;
  run) for r in $RUNS; do run "${r%%:*}" "${r##*:}"; done ;;
  all) build; mkdir -p "$OUT"; kernel_times
       for r in $RUNS; do traces "${r%%:*}" "${r##*:}"; run "${r%%:*}" "${r##*:}"; done ;;
  *) echo "unknown step $1" >&2; exit 2 ;;
esac
