#!/usr/bin/env bash
# Configures and builds mlsim into $1 (default build/) with the remaining arguments passed to
# cmake. Two parallel jobs: the reference machine has 2 cores.
set -euo pipefail
dir=${1:-build}
shift || true
launcher=()
# ccache, when installed, makes rebuilds in several worktrees cheap; CI does not need it.
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
cmake --build "$dir" -j2
