#!/usr/bin/env bash
# Installs what is needed, builds nuvec and runs the main program.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
./build/examples/nuvec-demo "$@"
