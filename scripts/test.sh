#!/usr/bin/env bash
# Installs what is needed, builds nuvec and runs every test suite through CTest, then MLX's own
# C++ test suite and examples against the build (scripts/mlx_suite.sh; it prints its count and
# fails below the issue's bar of 243 of 251 cases).
set -euo pipefail
cd "$(dirname "$0")/.."
# The CUDA kernels are compiled only where they can run: on a machine without a GPU
# (nvidia-smi lists none; CI has 2 cores and no GPU) the build leaves CUDA out, which keeps the
# run within CI's 45 minutes, and the GPU tests, which would all skip, are not registered. The
# kernels are built and tested on a GPU machine. NUVEC_TEST_CUDA=1 compiles them anyway.
cuda_flags=()
if [ "${NUVEC_TEST_CUDA:-0}" != 1 ] && ! nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
  cuda_flags=(-DNUVEC_BUILD_CUDA=OFF)
fi
./scripts/build.sh "${cuda_flags[@]}"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
NUVEC_MLX_MIN_PASS=${NUVEC_MLX_MIN_PASS:-243} ./scripts/mlx_suite.sh build
