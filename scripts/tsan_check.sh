#!/usr/bin/env bash
# Builds nuvec and the threading tests with ThreadSanitizer (build-tsan/, CPU backend, system
# malloc) and runs them: eval and async_eval, streams and devices, the transforms, the CPU
# thread pool and the multi-threaded stress test. Exits non-zero on a test failure or on any
# race TSan reports. Usage: scripts/tsan_check.sh [extra cmake args]
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
tests=(eval_test device_test transforms_test thread_pool_test thread_stress_test)
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNUVEC_BUILD_CUDA=OFF \
  -DNUVEC_BUILD_BENCHMARKS=OFF -DNUVEC_BUILD_EXAMPLES=OFF -DNUVEC_USE_JEMALLOC=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1" -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread "$@" >/dev/null || exit 1
cmake --build build-tsan -j "$(nproc)" --target "${tests[@]}" || exit 1
status=0
for t in "${tests[@]}"; do
  log=build-tsan/$t.tsan.log
  TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1" NUVEC_TEST_DEVICE=cpu \
    timeout 900 "build-tsan/tests/$t" >"$log" 2>&1
  rc=$?
  races=$(grep -c "WARNING: ThreadSanitizer" "$log")
  echo "$t: exit $rc, $races ThreadSanitizer reports ($log)"
  if [ "$rc" -ne 0 ] || [ "$races" -ne 0 ]; then status=1; fi
done
exit $status
