#!/usr/bin/env bash
# Regenerates the measured table of docs/backends.md: every cross-validation scenario
# (sim_core/crossval) on every backend, one process per (scenario, backend) so that peak memory
# is that run's own and SimGrid's and ns-3's singletons start fresh.
#   usage: tools/backend_table.sh [BUILD_DIR]   (default: build) > table.md
# Columns: simulated makespan, wall and CPU seconds of the run (wall includes waiting for a
# shared CPU), peak resident memory of the process (includes ~30 MB of loaded libraries).
set -euo pipefail
build="${1:-build}"
run="$build/sim_core/network/crossval/mlsim_backend_run"
[ -x "$run" ] || { echo "build $run first (make mlsim_backend_run)" >&2; exit 1; }
scenarios="one_flow two_flows incast_8to1 parking_lot ring_allreduce_16 leaf_spine_all_to_all"
backends="flow analytic simgrid ns3"

echo "| scenario | backend | simulated time | vs flow | wall | CPU | peak RSS | transfers |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for s in $scenarios; do
  flow_time=""
  for b in $backends; do
    line=$("$run" "$s" "$b") || { echo "| $s | $b | (not built) | | | | | |"; continue; }
    IFS=$'\t' read -r _ _ sim wall cpu rss transfers _ <<<"$line"
    [ "$b" = flow ] && flow_time="$sim"
    ratio=""
    [ -n "$flow_time" ] && ratio=$(awk -v a="$sim" -v f="$flow_time" 'BEGIN { printf "%.3f", a / f }')
    awk -v s="$s" -v b="$b" -v sim="$sim" -v r="$ratio" -v w="$wall" -v c="$cpu" -v m="$rss" -v t="$transfers" \
      'BEGIN { printf "| %s | %s | %.1f us | %s | %.3f s | %.3f s | %.1f MiB | %d |\n", s, b, sim * 1e6, r, w, c, m / 1024, t }'
  done
done
