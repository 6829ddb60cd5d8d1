#!/usr/bin/env bash
# Runs nuvec's core and scan/sort benchmarks and the same operations in NumPy in one go, and prints a
# table with the ratio to NumPy and to the physical floor. Usage: bench/run.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ ! -x "$build/bench/core_bench" ]; then ./scripts/build.sh; fi
"$build/bench/core_bench" --benchmark_format=json --benchmark_min_time=0.5 > "$build/core_bench.json" 2>/dev/null
"$build/bench/scan_bench" --benchmark_format=json --benchmark_min_time=0.5 > "$build/scan_bench.json" 2>/dev/null
# Debian's interpreter has python3-numpy; a python3 earlier on PATH may not.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" bench/compare.py "$build/core_bench.json" "$build/scan_bench.json"
