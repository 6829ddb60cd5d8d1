#!/usr/bin/env bash
# Installs what is needed, builds nuvec and runs every test suite through CTest, then MLX's own
# C++ test suite and examples against the build (scripts/mlx_suite.sh; it prints its count and
# fails below the issue's bar of 243 of 251 cases).
set -euo pipefail
cd "$(dirname "$0")/.."
# (build.sh leaves the CUDA kernels out on a machine without a GPU; NUVEC_TEST_CUDA=1 keeps them.)
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
NUVEC_MLX_MIN_PASS=${NUVEC_MLX_MIN_PASS:-243} ./scripts/mlx_suite.sh build
