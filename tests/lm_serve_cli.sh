#!/bin/sh
# LmCli.Serve: `nuvec-lm serve` on a free port of 127.0.0.1 with curl against it.
# Usage: lm_serve_cli.sh NUVEC_LM MODEL_DIR CHAT_TEMPLATE
set -u
bin=$1 model=$2 template=$3
log=$(mktemp) out=$(mktemp)
"$bin" serve --model "$model" --model-name tiny --port 0 --chat-template "$template" --device cpu >"$log" 2>&1 &
pid=$!
fail() {
  echo "FAIL: $*"
  echo "--- server output:"
  cat "$log"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -f "$log" "$out"
  exit 1
}
url=""
for _ in $(seq 1 300); do
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log")
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || fail "the server exited"
  sleep 0.1
done
[ -n "$url" ] || fail "the server did not start"
echo "server at $url"

curl -sf "$url/health" | grep -q '"status":"ok"' || fail "/health"
curl -sf "$url/v1/models" | grep -q '"id":"tiny"' || fail "/v1/models"
curl -sf "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "tiny", "prompt": "the people", "max_tokens": 5, "temperature": 0, "ignore_eos": true}' >"$out" \
  || fail "completion"
cat "$out"; echo
grep -q '"completion_tokens":5' "$out" || fail "completion: 5 tokens"
curl -sfN "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "ignore_eos": true, "stream": true}' >"$out" \
  || fail "streamed chat"
cat "$out"
grep -q '"object":"chat.completion.chunk"' "$out" || fail "streamed chat: chunks"
tail -n 2 "$out" | grep -q '^data: \[DONE\]$' || fail "streamed chat: [DONE]"
code=$(curl -s -o "$out" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' -d '{"prompt": ')
[ "$code" = 400 ] || fail "malformed JSON gave $code"
grep -q '"type":"invalid_request_error"' "$out" || fail "malformed JSON: error body"

kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
grep -q "stopping" "$log" || fail "no stop message"
rm -f "$log" "$out"
echo "PASS"
