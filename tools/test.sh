#!/usr/bin/env bash
# Set-up, build, and every test: the unit/property/regression suite (ctest), the same suite under
# AddressSanitizer + UBSan, and the claims regression (`mlsim check`) when claims exist.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase is stamped with the wall clock and seconds since the start, so a CI log shows where
# the time goes.
start=$SECONDS
phase() { echo "== [$(date -u +%H:%M:%S), +$((SECONDS - start)) s] $*"; }
bash tools/setup-debian.sh

phase "formatting (clang-format, .clang-format)"
find sim_core models cli tests bench fuzz -name '*.cpp' -o -name '*.hpp' -o -name '*.cc' | sort |
  xargs clang-format --dry-run --Werror

phase "build (Release) and test"
# The test binaries are unity builds (tests/CMakeLists.txt, batches of 8 files): CI has no ccache
# and builds twice from cold, and most of a test file's compile time is the shared front end of
# gtest/json/abseil/scenario headers. Measured 2026-12-06 (2-core VM, load 3-9): the 8 files of
# serving's first batch cost 82.4 CPU s compiled one by one and 31.4 CPU s as one TU; the whole
# tests/ part of a cold Release build 669 CPU s (23 unity TUs for 94 files, 25 single files, 20
# links); the figure without unity was not re-measured, see docs/performance.md ("CI time").
bash tools/build.sh build -DMLSIM_BUILD_BENCH=ON
(cd build && ctest --output-on-failure -j2 --timeout 600)

phase "benchmarks compile and run briefly (smoke)"
# One small case per binary: the engine at 100 and 1000 pending, the network's "Small" cases, the
# ring at 256 nodes on the flow backend, serving's continuous-batching run, strict JSON at 1 MiB,
# AutoPipe's DP planner on VGG16.
smoke='/100$|/1000$|Small|nodes:256/flow:1|continuous|Strict[A-Za-z]*/1$|dp_plan/profile:0/slow:0$'
for b in build/bench/mlsim_bench_*; do
  [ -x "$b" ] || continue
  if ! "$b" --benchmark_list_tests --benchmark_filter="$smoke" | grep -q .; then
    echo "error: $b has no benchmark matching the smoke filter '$smoke'" >&2
    exit 1
  fi
  "$b" --benchmark_min_time=0.01 --benchmark_filter="$smoke" >/dev/null
done

if [ -f results/claims.json ] && ./build/cli/mlsim check --help >/dev/null 2>&1; then
  phase "claims regression"
  ./build/cli/mlsim check --claims results/claims.json -j 2
fi

phase "AddressSanitizer + UBSan build and test"
# Debug (asserts on) at -O1 with line tables only, as ASan's documentation recommends for usable
# speed; stack traces keep file and line. Measured 2026-12-05 on the 2-core machine under load:
# the suite below took 415 CPU s (about 900 at -O0; the two-rack INA scenario 25 s, was 164 s),
# and the cold build cost about the same as at -O0 (1,780 against 1,930 CPU s).
# The libraries are unity builds here too (MLSIM_UNITY_BUILD_LIBS, batches of 8 files of one
# library): measured 2026-12-06 with these flags, mlsim_core's 53 files cost 348 CPU s compiled
# one by one and 203 as 7 unity TUs; see docs/performance.md ("CI time") for the other libraries.
# The Release build above keeps one TU per library file (what the benchmarks measure). Neither
# bench nor the helper programs of tools/ (MLSIM_BUILD_TOOLS) are built: no test runs them, and
# the Release build compiles them.
bash tools/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
  -DMLSIM_SANITIZE=ON -DMLSIM_BUILD_BENCH=OFF -DMLSIM_UNITY_BUILD_LIBS=ON -DMLSIM_BUILD_TOOLS=OFF
# The 4096-node ring formula cases and the large-ring routing test take 20 s in Release but
# 3-4 CPU minutes each under the sanitizers (18 minutes in all): they run in the Release suite
# above, and their smaller siblings (up to 1024 nodes) run here. The validate-agrees battery (every
# shipped scenario and variant x its bad overrides, about 40 CPU s in Release) passes the 900 s
# limit under the sanitizers: it runs in the Release suite only.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j2 --timeout 900 \
    -E 'Ring4096/|Routing.LazyPerDestinationOnLargeRing|ValidateAgreesWithRun.EveryShipped')
phase "done"
