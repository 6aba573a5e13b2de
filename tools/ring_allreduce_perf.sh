#!/bin/sh
# Wall time, CPU time and peak RSS of ring all-reduce (64 MiB, 50 GB/s, 500 ns links) on 256,
# 1024 and 4096 nodes, on the flow and analytic backends. Target (issue 2): 4096 nodes on the
# flow backend in under 5 s and under 1 GB.
#   tools/ring_allreduce_perf.sh [BUILD_DIR]     (default: build; needs MLSIM_BUILD_BENCH=ON)
set -eu
build=${1:-build}
bin="$build/bench/mlsim_ring_allreduce_run"
if [ ! -x "$bin" ]; then
  cmake -S "$(dirname "$0")/.." -B "$build" -DMLSIM_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" --target mlsim_ring_allreduce_run -j2 >/dev/null
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
for backend in flow analytic; do
  for n in 256 1024 4096; do
    "$bin" "$n" 64MiB "$backend"
  done
done
