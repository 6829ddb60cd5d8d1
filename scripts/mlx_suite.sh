#!/usr/bin/env bash
# MLX's own C++ test suite and C++ examples (third_party/mlx, MLX 0.32.2 at the commit in
# third_party/mlx/COMMIT, MIT licence), compiled unedited against nuvec: every `mlx/<header>.h`
# is a shim that includes nuvec/nuvec.h and sets `namespace mlx { namespace core = ::nuvec; }`.
# This is the yardstick of the API contract (README, "MLX compatibility").
#
# Usage: scripts/mlx_suite.sh [BUILD_DIR] [FILE_REGEX]
#   BUILD_DIR holds libnuvec.so (default build). FILE_REGEX picks test files ('ops|vmap').
#   DEVICE=gpu runs the suite with the GPU as default device (and adds gpu_tests.cpp).
#   NUVEC_MLX_MIN_PASS: fail (exit 1) when fewer cases pass (default: 0, report only).
#   DOCTEST_INCLUDE: a folder holding doctest/doctest.h (default /usr/include; Debian's
#   doctest-dev). Logs and binaries go to $MLX_SUITE_WORK (default build/mlx-suite).
# residency_tests.cpp tests Metal residency sets and never runs. Prints one line per test file,
# one per example, and last "mlx-cpp-tests: P/N test cases pass".
set -u
cd "$(dirname "$0")/.."
root=$PWD
build=$(cd "${1:-build}" && pwd) || exit 2
pick=${2:-.}
lib=$(find "$build" -maxdepth 3 -name 'libnuvec.so' | head -1)
[ -n "$lib" ] || { echo "mlx-cpp-tests: no libnuvec.so under $build"; exit 2; }
doctest_inc=${DOCTEST_INCLUDE:-/usr/include}
[ -f "$doctest_inc/doctest/doctest.h" ] || { echo "mlx-cpp-tests: doctest is missing (apt-get install doctest-dev)"; exit 2; }
work=${MLX_SUITE_WORK:-$build/mlx-suite}
suite=$root/third_party/mlx
mkdir -p "$work/shim/mlx" "$work/bin"

# The shims: every header MLX's tests and examples include.
for h in mlx.h primitives.h graph_utils.h scheduler.h allocator.h memory.h export.h ops.h stream.h \
         device.h transforms.h array.h dtype.h fast.h linalg.h fft.h random.h io.h compile.h \
         einsum.h utils.h backend/cuda/cuda.h backend/metal/device.h backend/metal/metal.h \
         backend/gpu/device_info.h; do
  mkdir -p "$(dirname "$work/shim/mlx/$h")"
  printf '#pragma once\n#include "nuvec/nuvec.h"\nnamespace mlx { namespace core = ::nuvec; }\n' \
    >"$work/shim/mlx/$h"
done
cxx=(g++ -std=c++20 -O1 -I"$work/shim" -I"$root/include" -I"$build/include" -I"$doctest_inc")
link=("$lib" -Wl,-rpath,"$(dirname "$lib")" -lpthread)

# MLX's doctest main calls clear_streams() at exit, which is not a test.
sed 's/^ *clear_streams();//' "$suite/tests/tests.cpp" >"$work/tests_main.cpp"
"${cxx[@]}" -c "$work/tests_main.cpp" -o "$work/bin/main.o" 2>"$work/bin/main.log" ||
  { echo "mlx-cpp-tests: 0/0 (the doctest main does not compile: $work/bin/main.log)"; exit 1; }

files=()
for f in "$suite"/tests/*_tests.cpp; do
  n=$(basename "$f" .cpp)
  echo "$n" | grep -Eq "$pick" || continue
  [ "$n" = residency_tests ] && continue
  [ "$n" = gpu_tests ] && [ "${DEVICE:-cpu}" != gpu ] && continue
  files+=("$n")
done

# Compile the files in parallel (the ops file alone takes a while), then run them in turn.
export MLX_CXX="${cxx[*]}" MLX_LINK="${link[*]}" MLX_SUITE="$suite" MLX_WORK="$work"
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} sh -c \
  '$MLX_CXX "$MLX_SUITE/tests/{}.cpp" "$MLX_WORK/bin/main.o" -o "$MLX_WORK/bin/{}" $MLX_LINK \
     >"$MLX_WORK/bin/{}.log" 2>&1 || rm -f "$MLX_WORK/bin/{}"'

total=0
pass=0
for n in "${files[@]}"; do
  cases=$(grep -c "TEST_CASE" "$suite/tests/$n.cpp")
  total=$((total + cases))
  if [ ! -x "$work/bin/$n" ]; then
    echo "$n: does not compile ($(grep -c 'error:' "$work/bin/$n.log") errors, $work/bin/$n.log)"
    continue
  fi
  DEVICE=${DEVICE:-cpu} timeout 600 "$work/bin/$n" >"$work/bin/$n.out" 2>&1
  res=$(grep -E "^\[doctest\] test cases:" "$work/bin/$n.out" | tail -1)
  p=$(echo "$res" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+")
  echo "$n: ${res:-crashed or timed out ($work/bin/$n.out)}"
  grep -E "^TEST CASE:" "$work/bin/$n.out" | sort -u | sed "s/^TEST CASE: */  failing: /"
  pass=$((pass + ${p:-0}))
done

# MLX's C++ examples: they must compile with the shim alone and run to the end.
# metal_capture needs Metal and distributed a launcher (mlx.launch); both must still compile.
if [ "$pick" = . ]; then
  for f in "$suite"/examples/cpp/*.cpp; do
    n=example_$(basename "$f" .cpp)
    if ! "${cxx[@]}" -I"$suite/examples/cpp" "$f" -o "$work/bin/$n" "${link[@]}" \
        >"$work/bin/$n.log" 2>&1; then
      echo "$n: does not compile ($work/bin/$n.log)"
      continue
    fi
    case $n in
      example_metal_capture|example_distributed) echo "$n: compiles"; continue ;;
    esac
    if timeout 300 "$work/bin/$n" >"$work/bin/$n.out" 2>&1; then
      echo "$n: runs; last line: $(tail -1 "$work/bin/$n.out")"
    else
      echo "$n: exits with an error ($work/bin/$n.out)"
    fi
  done
fi

echo "mlx-cpp-tests: $pass/$total test cases pass"
min=${NUVEC_MLX_MIN_PASS:-0}
if [ "$pass" -lt "$min" ]; then
  echo "mlx-cpp-tests: fewer than $min cases pass"
  exit 1
fi
