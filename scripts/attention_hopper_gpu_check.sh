#!/usr/bin/env bash
# Issue 15's checks of the Hopper attention forward (src/backend/cuda/fast/attention_hopper.cu)
# on the GPU host: its tests against the float64 graph, compute-sanitizer (memcheck and
# racecheck) on the small shapes, then the prefill table beside PyTorch's cuDNN and flash
# backends with the kernel enabled (NUVEC_ATTENTION_HOPPER=1) and without it (the mma.sync
# kernel), in the same run.
# Usage: scripts/attention_hopper_gpu_check.sh BUILD_DIR   (a CUDA build with tests and benchmarks)
# Logs go to $OUT (or /tmp/nuvec-hopper-check); a summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/attention_hopper_gpu_check.sh BUILD_DIR}
out=${OUT:-/tmp/nuvec-hopper-check}
mkdir -p "$out"
summary=()
t=$build/tests/fast_attention_hopper_test
timeout 600 "$t" --gtest_brief=1 > "$out/hopper_test.log" 2>&1
summary+=("hopper test rc=$? $(grep -E '^\[  PASSED|FAILED TEST' "$out/hopper_test.log" | tr '\n' ' ')")
for tool in memcheck racecheck; do
  timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" --gtest_brief=1 \
    --gtest_filter='FastAttentionHopper.Deterministic' > "$out/sanitizer_$tool.log" 2>&1
  summary+=("compute-sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY' "$out/sanitizer_$tool.log" | head -1)")
done
for hopper in 0 1; do
  NUVEC_ATTENTION_HOPPER=$hopper timeout 300 python3 bench/gpu_compare.py --nuvec "$build/bench/nuvec-gpu-timings" \
    --only attention > "$out/attention_hopper$hopper.txt" 2>&1
  summary+=("gpu_compare attention NUVEC_ATTENTION_HOPPER=$hopper rc=$?")
done
printf '%s\n' "${summary[@]}"
grep -h "TFLOP" "$out/hopper_test.log"
for hopper in 0 1; do echo "== NUVEC_ATTENTION_HOPPER=$hopper"; grep -i "prefill" "$out/attention_hopper$hopper.txt"; done
