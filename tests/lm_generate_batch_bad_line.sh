#!/bin/sh
# nuvec-lm generate --batch with a line too long for the model's context between two good
# ones and a blank line: the good lines (index 0 and 2, file lines 1 and 4) generate their
# tokens, the long line (index 1, line 2) alone reports the engine's refusal, and the run
# exits 1 because a line failed. The last line ends in CRLF, whose CR is not part of the
# prompt. A file without prompts exits 1 too.
# Usage: lm_generate_batch_bad_line.sh NUVEC_LM MODEL_DIR SCRATCH_PREFIX
set -u
lm=$1 model=$2 scratch=$3
{
  echo 'the people'
  i=0
  while [ $i -lt 300 ]; do printf 'word '; i=$((i + 1)); done
  echo
  echo
  printf 'and again\r\n'
} > "$scratch.txt"
"$lm" generate --model "$model" --batch "$scratch.txt" --max-tokens 4 --ignore-eos --device cpu > "$scratch.out"
rc=$?
cat "$scratch.out"
[ "$rc" = 1 ] || { echo "expected exit status 1 (one line failed); got $rc"; exit 1; }
[ "$(grep -c '"completion_tokens":4' "$scratch.out")" = 2 ] || { echo "expected two lines of 4 tokens"; exit 1; }
grep -q '"completion_tokens":0,"finish_reason":"error: \[lm.Engine\] the prompt has [0-9]* tokens.*"index":1,' "$scratch.out" ||
  { echo "expected line 1 to carry the engine's refusal"; exit 1; }
grep -q '"index":0,' "$scratch.out" && grep -q '"index":2,' "$scratch.out" || { echo "missing lines"; exit 1; }
grep -q '"index":1,"line":2,' "$scratch.out" && grep -q '"index":2,"line":4,' "$scratch.out" ||
  { echo "expected the file's line numbers beside the indices"; exit 1; }
grep -q '"prompt":"and again"' "$scratch.out" || { echo "expected the CRLF line's prompt without its CR"; exit 1; }
: > "$scratch.empty"
"$lm" generate --model "$model" --batch "$scratch.empty" --max-tokens 4 --device cpu > /dev/null 2> "$scratch.err"
rc=$?
[ "$rc" = 1 ] && grep -q "holds no prompt" "$scratch.err" || { echo "expected an empty --batch file to fail; rc $rc"; exit 1; }
