#!/bin/sh
# nuvec-lm generate --batch with a line too long for the model's context between two good
# ones: the run succeeds, the good lines (index 0 and 2) generate their tokens, and the long
# line (index 1) alone reports the engine's refusal.
# Usage: lm_generate_batch_bad_line.sh NUVEC_LM MODEL_DIR SCRATCH_PREFIX
set -u
lm=$1 model=$2 scratch=$3
{
  echo 'the people'
  i=0
  while [ $i -lt 300 ]; do printf 'word '; i=$((i + 1)); done
  echo
  echo 'and again'
} > "$scratch.txt"
"$lm" generate --model "$model" --batch "$scratch.txt" --max-tokens 4 --ignore-eos --device cpu > "$scratch.out" ||
  { echo "generate failed"; exit 1; }
cat "$scratch.out"
[ "$(grep -c '"completion_tokens":4' "$scratch.out")" = 2 ] || { echo "expected two lines of 4 tokens"; exit 1; }
grep -q '"completion_tokens":0,"finish_reason":"error: \[lm.Engine\] the prompt has [0-9]* tokens.*"index":1,' "$scratch.out" ||
  { echo "expected line 1 to carry the engine's refusal"; exit 1; }
grep -q '"index":0,' "$scratch.out" && grep -q '"index":2,' "$scratch.out" || { echo "missing lines"; exit 1; }
