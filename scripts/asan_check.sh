#!/usr/bin/env bash
# Builds nuvec and its CPU tests with AddressSanitizer and UndefinedBehaviorSanitizer
# (build-asan/, CPU backend, system malloc; the caching allocator gives every buffer an
# exact-size block of its own there, so reads past a buffer's end are caught) and runs the
# test programs. Exits non-zero on a test failure or any sanitizer report.
# Usage: scripts/asan_check.sh [test program ...]   (default: every test program)
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh >/dev/null
flags="-fsanitize=address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer -O1 -g1"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=None -DNUVEC_BUILD_CUDA=OFF \
  -DNUVEC_BUILD_BENCHMARKS=OFF -DNUVEC_BUILD_EXAMPLES=ON -DNUVEC_USE_JEMALLOC=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null || exit 1
if [ $# -gt 0 ]; then tests=("$@"); else
  mapfile -t tests < <(ninja -C build-asan -t targets all | grep -v '^cmake_' | sed -n 's/^\([a-z0-9_]*_test\): phony$/\1/p' | sort -u)
fi
cmake --build build-asan -j "$(nproc)" --target "${tests[@]}" nuvec-lm || exit 1
status=0
for t in "${tests[@]}"; do
  log=build-asan/$t.asan.log
  # Leaks are not this check's subject (static caches live to exit on purpose).
  ASAN_OPTIONS="detect_leaks=0:halt_on_error=0:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1" \
    NUVEC_TEST_DEVICE=cpu NUVEC_LM_TEST_DATA="$PWD/tests/data/lm" timeout 1800 "build-asan/tests/$t" \
    --gtest_brief=1 >"$log" 2>&1
  rc=$?
  reports=$(grep -c "ERROR: AddressSanitizer\|runtime error:" "$log")
  echo "$t: exit $rc, $reports sanitizer reports ($log)"
  if [ "$rc" -ne 0 ] || [ "$reports" -ne 0 ]; then status=1; fi
done
exit $status
