#!/usr/bin/env bash
# Installs what is needed, builds nuvec and runs the Fashion-MNIST trainer with its defaults
# (arguments are passed on; see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
./build/examples/nuvec-mnist "$@"
