#!/usr/bin/env bash
# Builds nuvec with the CUDA backend on a GPU host and runs the test suite there (every test
# on the CPU and again with the GPU as the default device). Logs go to $OUT (or /tmp/nuvec-gpu).
# Usage: scripts/gpu_check.sh [ctest -R regex]
# Needs .devdeps/googletest (a GoogleTest source tree) where libgtest-dev is not installed;
# scripts/device/make_deps.sh fills .devdeps for a host that cannot install packages, and
# scripts/device/env.sh (sourced there) builds with it.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/nuvec-gpu}
mkdir -p "$out"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
gtest=()
[ -d .devdeps/googletest ] && gtest=(-DNUVEC_GTEST_SOURCE_DIR="$PWD/.devdeps/googletest")
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNUVEC_BUILD_CUDA=ON \
  -DNUVEC_USE_JEMALLOC=OFF -DNUVEC_BUILD_BENCHMARKS=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  "${gtest[@]}" >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
# Keep going past a failing target: the rest of the suite still runs.
ninja -C build-gpu -k 0 -j"$(nproc)" >"$out/build.log" 2>&1 ||
  grep -E "error|FAILED" -A6 "$out/build.log" | head -60
t1=$(date +%s)
echo "build: $((t1 - t0)) s"
ctest --test-dir build-gpu -j"$(nproc)" --timeout 300 --output-on-failure ${1:+-R "$1"} \
  >"$out/ctest.log" 2>&1
t2=$(date +%s)
echo "ctest: $((t2 - t1)) s"
grep -E "tests passed|tests failed" "$out/ctest.log"
grep -E "^\s+[0-9]+ - " "$out/ctest.log" | head -60
echo "--- most frequent failure messages"
grep -hE "Failure|what\(\)|error|Expected|Which is|terminate" "$out/ctest.log" | sed 's/[0-9.e+-]\{6,\}/N/g' |
  sort | uniq -c | sort -rn | head -40
