#!/usr/bin/env bash
# The GPU checks of the code sessions 13, 14 and 15 wrote without a device, one part per device
# call or several in one (the device tool runs a command for at most 10 minutes; the build
# stays on a warm machine between calls, which a machine keeps for 30 s only):
#   scripts/device/pending_checks.sh build    configure and build what the checks need
#   scripts/device/pending_checks.sh kernels  the new kernels' GPU tests, compute-sanitizer
#   scripts/device/pending_checks.sh engine   the routes beside them and the engine on the GPU
#   scripts/device/pending_checks.sh bench    issue 15's attention table (three configurations)
#   scripts/device/pending_checks.sh serve    issue 18's hybrid serving throughput
#   scripts/device/pending_checks.sh d256     the attention backward's D 256 tensor-core path
#   scripts/device/pending_checks.sh moe      gather_mm's plain experts on the tiled tensor-core kernel
#   scripts/device/pending_checks.sh gdtc     the gated delta state pass on tensor cores
#   scripts/device/pending_checks.sh table13  issue 13's quantized table (cuBLAS bf16, torch int4) and qqmm
#   scripts/device/pending_checks.sh table15  issue 15's attention table (cuDNN, FlashAttention-2)
#   scripts/device/pending_checks.sh inplace  which nodes the eager gated_delta_slots in-place test runs
#   scripts/device/pending_checks.sh lmtests  the engine and server tests on the GPU
#   scripts/device/pending_checks.sh table18  issue 18's serving table beside transformers
#   scripts/device/pending_checks.sh profile18 the kernels of one Llama-3.2-1B batch-1 decode step (ncu)
# What each test verifies:
#  - fast_attention_hopper_test: the Hopper attention forward (attention_hopper.cu) against the
#    float64 graph; compute-sanitizer memcheck and racecheck on one small case;
#  - fast_paged_attention_test: paged_attention's sinks and windows on the decode kernel;
#  - fast_gated_delta_test: gated_delta_slots updating its pool in place; the backward
#    kernel (GatedDeltaVjp's CUDA kernel against its CPU one, GpuBackwardMatchesCpu);
#  - lm_engine_test, lm_serve_test: the hybrid (Qwen3-Next) and GPT-OSS engines on the GPU;
#  - fast_attention_tiled_test, fast_attention_backward_test: the routes beside them unchanged.
# They passed on 2026-12-05 (bench/GPU-NOTES.md, fifteenth session), after which the Hopper
# forward and the GPU gated-delta backward became the defaults; the script stays as the check
# to repeat after changing those kernels.
# Needs .devdeps (scripts/device/make_deps.sh here first; carry .devdeps). Logs: $OUT/logs.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/device/env.sh
[ $# -gt 0 ] || { echo "usage: scripts/device/pending_checks.sh build|kernels|engine|bench|serve|d256|moe|inplace|lmtests|table18|profile18|gdtc|table13|table15..." >&2; exit 2; }
# Several parts run in one call, in order; a part is skipped once fewer than its seconds are
# left of the call's 10 minutes (NUVEC_CALL_SECONDS, counted from this script's start).
budget=${NUVEC_CALL_SECONDS:-590}
need() { [ $((budget - SECONDS)) -ge "$1" ] || { echo "skipped $part: $((budget - SECONDS)) s left, $1 s needed"; return 1; }; }
for part in "$@"; do
case "$part" in
  build)
    t0=$(date +%s)
    build fast_attention_hopper_test fast_attention_tiled_test fast_attention_backward_test fast_paged_attention_test \
      fast_gated_delta_test lm_engine_test lm_serve_test nuvec-gpu-timings nuvec-lm-serve-timings gpu_quantized_test \
      nuvec-lm-timings
    echo "build: $(($(date +%s) - t0)) s"
    ;;
  kernels)
    need 200 || continue
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
    GT_TIMEOUT=280 gtest fast_attention_hopper_test # both schedules: about twice the tiled test's cases
    GT_TIMEOUT=110 gtest fast_paged_attention_test
    GT_TIMEOUT=60 gtest fast_gated_delta_test
    for tool in memcheck racecheck; do
      timeout 45 compute-sanitizer --tool "$tool" --error-exitcode 9 build-gpu/tests/fast_attention_hopper_test \
        --gtest_brief=1 --gtest_filter='FastAttentionHopper.Deterministic' >"$L/sanitizer_$tool.log" 2>&1
      echo "compute-sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY' "$L/sanitizer_$tool.log" | head -1)"
    done
    grep -h "TFLOP\|compute capability" "$L/fast_attention_hopper_test.log"
    ;;
  engine)
    need 150 || continue
    GT_TIMEOUT=120 gtest fast_attention_tiled_test
    GT_TIMEOUT=120 gtest fast_attention_backward_test
    GT_TIMEOUT=200 gtest lm_engine_test
    GT_TIMEOUT=120 gtest lm_serve_test
    ;;
  bench)
    need 300 || continue
    # The mma.sync kernel, then the Hopper kernel's pipelined and plain schedules.
    for cfg in 0:1 1:1 1:0; do
      NUVEC_ATTENTION_HOPPER=${cfg%:*} NUVEC_ATTENTION_HOPPER_PIPELINE=${cfg#*:} timeout 170 python3 bench/gpu_compare.py \
        --nuvec build-gpu/bench/nuvec-gpu-timings --only attention >"$L/attention_$cfg.txt" 2>&1
      echo "== attention, NUVEC_ATTENTION_HOPPER=${cfg%:*} NUVEC_ATTENTION_HOPPER_PIPELINE=${cfg#*:} rc=$?"
      grep -E "sdpa_prefill|paged" "$L/attention_$cfg.txt"
    done
    ;;
  d256)
    # The attention backward's D 256 on the mma.sync kernels (NUVEC_ATTENTION_BACKWARD_D256=1,
    # fifteenth session): its test, then issue 15's D 256 forward-plus-backward rows.
    need 200 || continue
    build fast_attention_backward_test nuvec-gpu-timings
    GT_TIMEOUT=240 gtest fast_attention_backward_test
    timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 build-gpu/tests/fast_attention_backward_test \
      --gtest_brief=1 --gtest_filter='*D256SmallCase*' >"$L/sanitizer_d256.log" 2>&1
    echo "compute-sanitizer racecheck (D 256) rc=$? $(grep -E 'ERROR SUMMARY' "$L/sanitizer_d256.log" | head -1)"
    NUVEC_ATTENTION_BACKWARD_D256=1 timeout 170 python3 bench/gpu_compare.py --nuvec build-gpu/bench/nuvec-gpu-timings \
      --only attention >"$L/attention_d256.txt" 2>&1
    grep -E "fwd_bwd" "$L/attention_d256.txt"
    ;;
  moe)
    # gather_mm's transposed plain W on the tiled tensor-core kernel (NUVEC_GATHER_MM_TENSOR_CORES=1,
    # fifteenth session): its tests, then the hybrid serving rows without and with it (first
    # token: the experts' sorted prefill products).
    need 200 || continue
    build gpu_quantized_test nuvec-lm-serve-timings
    GT_TIMEOUT=120 gtest gpu_quantized_test 'GpuQuantized.GatherMm*:GpuQuantized.Indices*'
    # memcheck over the whole test (racecheck's slowdown would pass the limit; a host
    # emulation of the kernel checked its barriers); rc 124 is the time limit, not a finding.
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 build-gpu/tests/gpu_quantized_test \
      --gtest_brief=1 --gtest_filter='*GatherMmTransposedWeightsOnTensorCores*' >"$L/sanitizer_moe.log" 2>&1
    echo "compute-sanitizer memcheck (gather_mm tensor cores) rc=$? $(grep -E 'ERROR SUMMARY' "$L/sanitizer_moe.log" | head -1)"
    for on in 0 1; do
      NUVEC_GATHER_MM_TENSOR_CORES=$on timeout 100 build-gpu/bench/nuvec-lm-serve-timings qwen3-next-8l \
        --concurrency 1,8 --prompt 512 --output 64 2>"$L/moe_serve_$on.log" | cut -c1-300
    done
    ;;
  gdtc)
    # The chunked gated delta's state pass on tf32 tensor cores (NUVEC_GATED_DELTA_TENSOR_CORES=1,
    # sixteenth session): its tests, racecheck on a small case, then issue 14's rows without
    # and with it.
    need 200 || continue
    build fast_gated_delta_test nuvec-gpu-timings
    GT_TIMEOUT=150 gtest fast_gated_delta_test '*Chunked*:*DecaysOfAnySign*'
    NUVEC_GATED_DELTA_TENSOR_CORES=1 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 \
      build-gpu/tests/fast_gated_delta_test --gtest_brief=1 --gtest_filter='*DecaysOfAnySign*' >"$L/sanitizer_gdtc.log" 2>&1
    echo "compute-sanitizer racecheck (gated delta, tensor cores) rc=$? $(grep -E 'ERROR SUMMARY' "$L/sanitizer_gdtc.log" | head -1)"
    for on in 0 1; do
      NUVEC_GATED_DELTA_TENSOR_CORES=$on timeout 90 python3 bench/gpu_compare.py --nuvec build-gpu/bench/nuvec-gpu-timings \
        --only gated_delta >"$L/gated_delta_$on.txt" 2>&1
      echo "== gated_delta, NUVEC_GATED_DELTA_TENSOR_CORES=$on rc=$?"
      grep -E "prefill" "$L/gated_delta_$on.txt"
    done
    ;;
  table13)
    # Issue 13's table: qmv/qmm W4 and W8 at M 1..512 beside cuBLAS bf16 and torch's int4
    # kernel, the MoE gather_qmm rows, then qqmm (mxfp8 at M 4096) beside cuBLAS bf16.
    need 200 || continue
    build nuvec-gpu-timings
    timeout 200 python3 bench/gpu_compare.py --nuvec build-gpu/bench/nuvec-gpu-timings --only quantized \
      >"$L/quantized.txt" 2>&1
    echo "== quantized rc=$?"
    tail -40 "$L/quantized.txt"
    /usr/local/cuda/bin/nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
      --extended-lambda -Iinclude -Isrc bench/qqmm_bench.cu -lcublas -o build-gpu/qqmm_bench >"$L/qqmm_build.log" 2>&1 &&
      timeout 60 build-gpu/qqmm_bench 4096 4096 4096 2>&1 | tail -12
    ;;
  table15)
    # Issue 15's table with today's defaults (the Hopper forward; the D 256 backward on
    # tensor cores when NUVEC_ATTENTION_BACKWARD_D256 is on by default or set by the caller).
    need 180 || continue
    build nuvec-gpu-timings
    timeout 170 python3 bench/gpu_compare.py --nuvec build-gpu/bench/nuvec-gpu-timings --only attention \
      >"$L/attention_table.txt" 2>&1
    echo "== attention rc=$?"
    grep -E "sdpa|paged" "$L/attention_table.txt"
    ;;
  inplace)
    # Why FastGatedDelta.SlotsUpdateAnUnsharedPoolInPlace fails on the GPU (the values are right,
    # the pool's buffer is not reused; a print in cu::donate_or_alloc_output showed nothing):
    # which primitives the test's evals ran on the GPU.
    need 60 || continue
    build fast_gated_delta_test
    NUVEC_HOST_PROFILE=1 NUVEC_TEST_DEVICE=gpu timeout 60 build-gpu/tests/fast_gated_delta_test --gtest_brief=1 \
      --gtest_filter='*InPlace*' 2>&1 | grep -E "gpu eval|PASSED|FAILED" | head -40
    ;;
  lmtests)
    need 150 || continue
    build lm_engine_test lm_serve_test fast_cross_entropy_test
    GT_TIMEOUT=200 gtest lm_engine_test
    GT_TIMEOUT=120 gtest lm_serve_test
    # Session 17 reordered the CUDA cross_entropy kernels' arithmetic (large logits) blind:
    # GpuMatchesCpu and LargeLogitsKeepTheirDigits on the GPU.
    GT_TIMEOUT=60 gtest fast_cross_entropy_test
    ;;
  table18)
    # Issue 18's table: nuvec's engine and transformers' batched generate, both shapes; the
    # lines print as they come, so a run cut by the limit keeps what it measured.
    need 120 || continue
    build nuvec-lm-serve-timings
    timeout $((budget - SECONDS - 10)) python3 bench/lm_serve_compare.py --nuvec build-gpu/bench/nuvec-lm-serve-timings \
      --shapes qwen3-8b,llama-3.2-1b --concurrency 1,8,64,256 --prompt 512 --output 256 2>"$L/table18.log" | tee "$L/table18.txt"
    echo "table18 rc=${PIPESTATUS[0]}"
    ;;
  profile18)
    # Where batch-1 decode's step goes (0.31 of the floor at Llama-3.2-1B): per-kernel device
    # times of replayed steps, summed between two argmax launches by bench/ncu_step.py.
    need 90 || continue
    build nuvec-lm-timings
    timeout 80 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
      --launch-skip 3000 --launch-count 700 build-gpu/bench/nuvec-lm-timings llama-3.2-1b --prefill 512 --decode 40 \
      >"$L/step.csv" 2>"$L/ncu.log"
    echo "ncu rc=$?"
    python3 bench/ncu_step.py "$L/step.csv" | head -30
    ;;
  serve)
    need 200 || continue
    timeout $((budget - SECONDS - 10)) build-gpu/bench/nuvec-lm-serve-timings qwen3-next-8l --concurrency 1,8,64,256 --prompt 512 --output 256 \
      >"$L/hybrid_serve.jsonl" 2>"$L/hybrid_serve.log"
    echo "hybrid serve rc=$?"
    cat "$L/hybrid_serve.jsonl"
    ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
done
pack
