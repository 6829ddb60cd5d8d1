#!/usr/bin/env bash
# Installs what is needed, builds nuvec and runs the first program: nuvec-lm train with its
# defaults (a small Llama trained from scratch on Debian's fortune cookies, about 5 minutes on
# 2 CPU cores; it prints samples at the end), then one more sample from the checkpoint.
# Arguments go to nuvec-lm train (see build/examples/nuvec-lm --help).
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the demo runs: the library and nuvec-lm (./scripts/test.sh builds the rest).
NUVEC_BUILD_TARGETS=nuvec-lm ./scripts/build.sh
./build/examples/nuvec-lm train "$@"
out=lm-run
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = "--out" ]; then j=$((i + 1)); out=${!j}; fi
done
./build/examples/nuvec-lm generate --model "$out" --prompt "Life is" --max-tokens 60 --temp 0.8 --top-p 0.95 --seed 1
