#!/usr/bin/env bash
# Configures and builds mlsim into $1 (default build/) with the remaining arguments passed to
# cmake. Two parallel jobs: the reference machine has 2 cores.
set -euo pipefail
dir=${1:-build}
shift || true
launcher=()
# ccache, when installed, makes rebuilds in several worktrees cheap; CI does not need it.
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# Ninja keeps both cores busy to the end of the build (make's recursive per-target steps left one
# idle for about 8% of a clean build); a build folder configured earlier keeps its generator.
generator=()
if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
cmake --build "$dir" -j2
