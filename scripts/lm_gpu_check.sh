#!/usr/bin/env bash
# Issue 17's checks that need transformers and a GPU, in one run on the GPU host:
#  1. every architecture of tests/data/lm in bfloat16 against transformers' bfloat16 model
#     (scripts/lm_make_fixtures.py --reference ... --dtype bfloat16 --device cuda, then
#     lm_model_test's NUVEC_LM_CHECK on the GPU). The MoE architectures also as copies that
#     route every token to every expert (lm_make_fixtures.py --conditioned), so that no top-k
#     decision flips in bf16, and Qwen3-Next's with its matrices x0.2 besides: its fixture
#     amplifies a bf16 rounding to 0.27 of the logits even without routing decisions, so only
#     the copy is judged in bf16 (the fixture is judged in float32 by lm_model_test's
#     Architectures on the GPU, and the copies in float32 here);
#  2. a checkpoint written by `nuvec-lm train` (on the GPU, bf16 compute) loads in
#     transformers and gives nuvec's logits (float32 on both sides);
#  3. `nuvec-lm train` tokens/s beside an equivalent PyTorch loop (bench/lm_train_compare.py).
# Usage: scripts/lm_gpu_check.sh BUILD_DIR   (a CUDA build with tests and examples)
# NUVEC_LM_CORPUS=DIR trains on DIR's text files where Debian's fortunes are not installed.
# Logs go to $OUT (or /tmp/nuvec-lm-check); a summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/lm_gpu_check.sh BUILD_DIR}
out=${OUT:-/tmp/nuvec-lm-check}
mkdir -p "$out"
data=$(mktemp -d)
cp -r tests/data/lm/. "$data/"
for spec in qwen3_moe:1 gpt_oss:1 qwen3_next:0.2; do
  a=${spec%:*}
  python3 scripts/lm_make_fixtures.py --conditioned "$data/$a" "$data/${a}_conditioned" --scale "${spec#*:}" \
    --device cuda >> "$out/references.log" 2>&1 || echo "conditioned copy of $a failed"
done
archs="llama qwen3 qwen3_moe gpt_oss qwen3_moe_conditioned gpt_oss_conditioned qwen3_next_conditioned"
check=""
for a in $archs; do
  python3 scripts/lm_make_fixtures.py --reference "$data/$a" --dtype bfloat16 --device cuda \
    --name reference_bf16.safetensors >> "$out/references.log" 2>&1 || echo "reference $a failed"
  check="$check${check:+,}$data/$a:bfloat16:reference_bf16.safetensors"
done
run=$(mktemp -d)/run
data_flag=()
[ -n "${NUVEC_LM_CORPUS:-}" ] && data_flag=(--data "$NUVEC_LM_CORPUS")
"$build/examples/nuvec-lm" train --out "$run" --steps ${TRAIN_STEPS:-200} --no-plot --no-progress \
  --device gpu "${data_flag[@]}" > "$out/train.log" 2>&1 || echo "train failed (see train.log)"
python3 scripts/lm_make_fixtures.py --reference "$run" --dtype float32 --device cuda >> "$out/references.log" 2>&1 ||
  echo "reference of the trained checkpoint failed"
check="$check,$run:float32:reference.safetensors"
for a in qwen3_moe gpt_oss qwen3_next; do check="$check,$data/${a}_conditioned:float32:reference.safetensors"; done
NUVEC_TEST_DEVICE=gpu NUVEC_LM_TEST_DATA="$data" NUVEC_LM_CHECK="$check" \
  "$build/tests/lm_model_test" --gtest_filter='Env/*' > "$out/check.log" 2>&1
echo "reference checks rc=$?"
grep -E "^\[reference\]|FAILED|Failure|Expected|Which is" "$out/check.log"
python3 bench/lm_train_compare.py --nuvec "$build/examples/nuvec-lm" --device cuda "${data_flag[@]}" > "$out/train_compare.log" 2>&1
echo "train compare rc=$?"; tail -3 "$out/train_compare.log"
