#!/usr/bin/env bash
# Configures and builds nuvec in build/ (Release, Ninja). Extra arguments go to cmake's
# configure step; NUVEC_BUILD_TARGETS="a b" builds only those targets (default: everything).
#
# The CUDA kernels are compiled only where they can run: on a machine without a GPU
# (nvidia-smi lists none; CI has 2 cores and no GPU) the build leaves CUDA out, which keeps
# the first build within minutes on 2 cores, and the GPU tests, which would all skip, are not
# registered. NUVEC_TEST_CUDA=1 compiles them anyway; -DNUVEC_BUILD_CUDA=ON|OFF as an
# argument decides outright (cmake alone builds them whenever nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# Said every time (the cache would otherwise keep an earlier run's choice); the output is
# captured first, as `nvidia-smi | grep -q` under pipefail can fail on a closed pipe.
gpus=$(nvidia-smi -L 2>/dev/null || true)
if [ "${NUVEC_TEST_CUDA:-0}" = 1 ] || grep -q "^GPU" <<<"$gpus"; then
  cuda_flags=(-DNUVEC_BUILD_CUDA=AUTO) # built when nvcc is found
else
  cuda_flags=(-DNUVEC_BUILD_CUDA=OFF)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "${cuda_flags[@]}" "$@" >/dev/null
targets=()
for t in ${NUVEC_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j "$(nproc)" "${targets[@]}"
