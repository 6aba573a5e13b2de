#!/usr/bin/env bash
# Set-up, build, and every test: the unit/property/regression suite (ctest), the same suite under
# AddressSanitizer + UBSan, and the claims regression (`mlsim check`) when claims exist.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup-debian.sh

echo "== build (Release) and test"
bash tools/build.sh build -DMLSIM_BUILD_BENCH=ON
(cd build && ctest --output-on-failure -j2 --timeout 600)

echo "== benchmarks compile and run briefly (smoke)"
for b in build/bench/mlsim_bench_*; do
  [ -x "$b" ] || continue
  "$b" --benchmark_min_time=0.01 --benchmark_filter='/100$|/1000$|Small' >/dev/null
done

if [ -f results/claims.json ] && ./build/cli/mlsim check --help >/dev/null 2>&1; then
  echo "== claims regression"
  ./build/cli/mlsim check --claims results/claims.json -j 2
fi

echo "== AddressSanitizer + UBSan build and test"
bash tools/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DMLSIM_SANITIZE=ON -DMLSIM_BUILD_BENCH=OFF
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j2 --timeout 900 -LE slow)
