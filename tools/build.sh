#!/usr/bin/env bash
# Configures and builds mlsim into $1 (default build/) with the remaining arguments passed to
# cmake. Two parallel jobs: the reference machine has 2 cores.
set -euo pipefail
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$dir" -j2
