#!/usr/bin/env bash
# ThreadSanitizer over the threading tests (eval and async_eval, streams and devices, the
# transforms, the CPU thread pool, the multi-threaded stress test); see sanitizer_check.sh.
exec "$(dirname "$0")/sanitizer_check.sh" thread eval_test device_test transforms_test thread_pool_test thread_stress_test
