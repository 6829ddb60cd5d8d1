#!/usr/bin/env bash
# Builds nuvec's CPU backend and test programs with a sanitizer and runs them; exits non-zero
# on a test failure or any sanitizer report. Usage:
#   scripts/sanitizer_check.sh thread  [test ...]  ThreadSanitizer (build-tsan/)
#   scripts/sanitizer_check.sh address [test ...]  AddressSanitizer and UBSan (build-asan/);
#     the caching allocator gives each buffer an exact-size block of its own there, so reads
#     past a buffer's end meet ASan's redzone (src/core/allocator.cpp)
# Without tests: every test program. System malloc (no jemalloc) in both.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
case "$mode" in
  thread)
    dir=build-tsan flags="-fsanitize=thread -O1 -g1" link="-fsanitize=thread"
    pattern="WARNING: ThreadSanitizer" env_opts=(TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1") ;;
  address)
    dir=build-asan flags="-fsanitize=address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer -O1 -g1"
    link="-fsanitize=address,undefined" pattern="ERROR: AddressSanitizer\|runtime error:"
    # Leaks are not this check's subject (static caches live to exit on purpose).
    env_opts=(ASAN_OPTIONS="detect_leaks=0" UBSAN_OPTIONS="print_stacktrace=1") ;;
  *) echo "usage: scripts/sanitizer_check.sh thread|address [test ...]" >&2; exit 2 ;;
esac
./scripts/setup.sh >/dev/null
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DNUVEC_BUILD_CUDA=OFF -DNUVEC_BUILD_BENCHMARKS=OFF \
  -DNUVEC_BUILD_EXAMPLES=OFF -DNUVEC_USE_JEMALLOC=OFF -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$link" -DCMAKE_SHARED_LINKER_FLAGS="$link" >/dev/null || exit 1
if [ $# -gt 0 ]; then tests=("$@"); else
  mapfile -t tests < <(ninja -C "$dir" -t targets all | grep -v '^cmake_' | sed -n 's/^\([a-z0-9_]*_test\): phony$/\1/p' | sort -u)
fi
cmake --build "$dir" -j "$(nproc)" --target "${tests[@]}" || exit 1
status=0
for t in "${tests[@]}"; do
  log=$dir/$t.$mode.log
  env "${env_opts[@]}" NUVEC_TEST_DEVICE=cpu NUVEC_LM_TEST_DATA="$PWD/tests/data/lm" \
    timeout 1800 "$dir/tests/$t" --gtest_brief=1 >"$log" 2>&1
  rc=$?
  reports=$(grep -c "$pattern" "$log")
  echo "$t: exit $rc, $reports sanitizer reports ($log)"
  if [ "$rc" -ne 0 ] || [ "$reports" -ne 0 ]; then status=1; fi
done
exit $status
