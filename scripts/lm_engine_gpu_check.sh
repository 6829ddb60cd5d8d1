#!/usr/bin/env bash
# Issue 18's engine checks on the GPU host, for the paths the CPU suite cannot reach: the
# hybrid (Qwen3-Next) engine's decode steps as CUDA graphs over the Gated DeltaNet state
# pools (gated_delta_slots updating its pool in place), GPT-OSS's sinks and windows through
# paged_attention's fallback, and the engine against the dense path for every architecture;
# then the hybrid serving throughput at Qwen3-Next-80B-A3B's widths (8 of its layers).
# Usage: scripts/lm_engine_gpu_check.sh BUILD_DIR   (a CUDA build with tests and benchmarks)
# Logs go to $OUT (or /tmp/nuvec-engine-check); a summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/lm_engine_gpu_check.sh BUILD_DIR}
out=${OUT:-/tmp/nuvec-engine-check}
mkdir -p "$out"
export NUVEC_LM_TEST_DATA=${NUVEC_LM_TEST_DATA:-$PWD/tests/data/lm}
summary=()
for t in fast_gated_delta_test fast_paged_attention_test lm_engine_test lm_serve_test; do
  NUVEC_TEST_DEVICE=gpu timeout 600 "$build/tests/$t" --gtest_brief=1 > "$out/$t.log" 2>&1
  summary+=("$t rc=$? $(grep -E '^\[  PASSED|FAILED TEST' "$out/$t.log" | tr '\n' ' ')")
done
timeout 600 "$build/bench/nuvec-lm-serve-timings" qwen3-next-8l --concurrency 1,8,64,256 --prompt 512 --output 256 \
  > "$out/hybrid_serve.jsonl" 2> "$out/hybrid_serve.log"
summary+=("hybrid serve rc=$?")
printf '%s\n' "${summary[@]}"
cat "$out/hybrid_serve.jsonl"
