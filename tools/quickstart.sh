#!/usr/bin/env bash
# Set-up, build, and the main job: the quickstart scenario (ring all-reduce, flow backend).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup-debian.sh
bash tools/build.sh build -DMLSIM_BUILD_BENCH=OFF
./build/cli/mlsim run workloads/scenarios/quickstart.json --out results/runs/quickstart
