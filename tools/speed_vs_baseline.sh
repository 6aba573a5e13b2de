#!/usr/bin/env bash
# The speed benchmarks against an older version of mlsim, run in turns on the same machine so both
# see the same load: the engine hold model at 10^6 pending, the 4096-node ring all-reduce on the
# flow backend, and the whole Azure conversation trace on Llama-2-70B TP8 (`mlsim run`).
#
#   tools/speed_vs_baseline.sh BASE [NEW_BUILD_DIR] [ROUNDS]
#
# BASE is a git commit (built once into /tmp/mlsim-speed-base-COMMIT, with its own copy of the
# workloads) or a folder holding a build of it (mlsim, bench/, workloads/). NEW_BUILD_DIR (default
# build) must be a Release build with MLSIM_BUILD_BENCH=ON. Prints CPU seconds (user + system) per
# run and the median ratio new / base per benchmark; a ratio of 1.10 is 10% slower.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: tools/speed_vs_baseline.sh BASE [NEW_BUILD_DIR] [ROUNDS]}
new=${2:-build}
rounds=${3:-3}

if [ ! -d "$base" ]; then
  commit=$(git rev-parse --short "$base")
  dir=/tmp/mlsim-speed-base-$commit
  if [ ! -x "$dir/mlsim" ]; then
    src=$dir-src
    rm -rf "$src" && git worktree add --detach "$src" "$commit" >/dev/null
    cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DMLSIM_BUILD_BENCH=ON >/dev/null
    cmake --build "$src/build" -j2 --target mlsim mlsim_bench_engine mlsim_ring_allreduce_run >/dev/null
    mkdir -p "$dir/bench"
    cp "$src/build/cli/mlsim" "$dir/"
    cp "$src/build/bench/mlsim_bench_engine" "$src/build/bench/mlsim_ring_allreduce_run" "$dir/bench/"
    cp -r "$src/workloads" "$dir/"
    git worktree remove --force "$src"
  fi
  base=$dir
fi
# The serving scenario names its trace as ../../../shared/data/..., relative to its own folder.
shared=$(cd .. && pwd)/shared
[ -e "$base/../shared" ] || ln -s "$shared" "$base/../shared"

cpu() {  # CPU seconds (user + system) of a command, its output discarded
  /usr/bin/time -f '%U %S' -o /tmp/speed_vs_baseline.time "$@" >/dev/null 2>&1
  awk '{printf "%.3f", $1 + $2}' /tmp/speed_vs_baseline.time
}
engine() {  # events per CPU second at 10^6 pending, as CPU seconds per 10^8 events
  "$1" --benchmark_filter='BM_MlsimEngineHold/1000000$' --benchmark_min_time=1 \
    --benchmark_format=json 2>/dev/null |
    python3 -c 'import json,sys; b=json.load(sys.stdin)["benchmarks"][0]; print("%.3f" % (1e8 / b["items_per_second"]))'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; base $base, new $new"
declare -A runs
for ((r = 1; r <= rounds; ++r)); do
  for side in base new; do
    if [ $side = base ]; then bin=$base/mlsim bench=$base/bench wl=$base/workloads
    else bin=$new/cli/mlsim bench=$new/bench wl=workloads; fi
    e=$(engine "$bench/mlsim_bench_engine")
    g=$(cpu "$bench/mlsim_ring_allreduce_run" 4096 64MiB flow)
    out=$(mktemp -d)
    s=$(cpu "$bin" run "$wl/scenarios/serving_azure_conv_70b.json" --out "$out/r" --quiet)
    rm -rf "$out"
    echo "round $r $side: engine ${e}s per 1e8 events, ring4096 ${g}s, serving ${s}s"
    runs[$side.engine]+="$e "
    runs[$side.ring]+="$g "
    runs[$side.serving]+="$s "
  done
done
for k in engine ring serving; do
  b=$(tr ' ' '\n' <<<"${runs[base.$k]}" | grep . | median)
  n=$(tr ' ' '\n' <<<"${runs[new.$k]}" | grep . | median)
  awk -v k="$k" -v b="$b" -v n="$n" 'BEGIN {printf "%-8s base %.3f s  new %.3f s  new/base %.3f\n", k, b, n, n / b}'
done
