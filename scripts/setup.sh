#!/usr/bin/env bash
# Installs the Debian packages nuvec's build, tests and benchmarks need (idempotent: skips
# the install when every package is already present).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libopenblas-dev liblapacke-dev libfftw3-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy
  zlib1g-dev libjemalloc-dev dataset-fashion-mnist gnuplot-nox doctest-dev
  libopenmpi-dev openmpi-bin
  libpcre2-dev libicu-dev libcpp-httplib-dev
  fortunes fortunes-min
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "nuvec setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
