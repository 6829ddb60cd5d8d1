#!/usr/bin/env bash
# Installs what is needed, builds nuvec and runs every test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 900
