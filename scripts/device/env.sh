# Sourced on the GPU host by a device script (after scripts/device/make_deps.sh filled
# .devdeps here): unpacks the Debian libraries to /tmp/sysdeps, points CMake at them and at the
# Python wheel's NCCL, and defines
#   build TARGET...      configure build-gpu (Release, CUDA, sm_90a) and build the targets
#   gtest NAME [FILTER]  run build-gpu/tests/NAME on the GPU, one summary line (+ failures)
#   pack                 tar $OUT/logs into $OUT/logs.tgz (the tool returns a few files only)
# Logs go to $L ($OUT/logs). Executables get an RPATH (not RUNPATH) to /tmp/sysdeps, so that
# libicuuc finds its libicudata there too.
mkdir -p /tmp/sysdeps
[ -f /tmp/sysdeps/.done ] || { tar xJf .devdeps/sysdeps.tar.xz -C /tmp/sysdeps && touch /tmp/sysdeps/.done; }
export CMAKE_PREFIX_PATH=/tmp/sysdeps
if nvidia_dir=$(python3 -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))" 2>/dev/null); then
  export NCCL_ROOT=$nvidia_dir/nvidia/nccl
else
  echo "env.sh: no nvidia Python package: NCCL from the CUDA toolkit, if any" >&2
fi
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
export NUVEC_LM_TEST_DATA=$PWD/tests/data/lm
export NUVEC_LM_CORPUS=$PWD/.devdeps/fortunes
SYSLINK="-Wl,--disable-new-dtags -Wl,-rpath,/tmp/sysdeps/lib/x86_64-linux-gnu -Wl,-rpath-link,/tmp/sysdeps/lib/x86_64-linux-gnu"
L=${OUT:-/tmp/nuvec-device}/logs
mkdir -p "$L"
build() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNUVEC_BUILD_CUDA=ON -DNUVEC_USE_JEMALLOC=OFF \
    -DNUVEC_BUILD_BENCHMARKS=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    -DNUVEC_GTEST_SOURCE_DIR="$PWD/.devdeps/googletest" \
    "-DCMAKE_EXE_LINKER_FLAGS=$SYSLINK" "-DCMAKE_SHARED_LINKER_FLAGS=$SYSLINK" >"$L/configure.log" 2>&1 ||
    { tail -30 "$L/configure.log"; return 1; }
  ninja -C build-gpu -k 0 -j"$(nproc)" "$@" >"$L/build.log" 2>&1 || grep -E "error|FAILED" -A5 "$L/build.log" | head -60
}
gtest() {
  local t0 rc
  t0=$(date +%s)
  mkdir -p "$L"
  NUVEC_TEST_DEVICE=gpu timeout "${GT_TIMEOUT:-200}" "build-gpu/tests/$1" --gtest_brief=1 ${2:+--gtest_filter=$2} >"$L/$1.log" 2>&1
  rc=$?
  printf "%-34s rc=%s %3ss %s\n" "$1" "$rc" "$(($(date +%s) - t0))" \
    "$(grep -E '^\[  PASSED|FAILED TEST|tests? ran' "$L/$1.log" | tr '\n' ' ' | cut -c1-150)"
  [ "$rc" = 0 ] || grep -E "Failure|FAILED|what\(\)|Expected|Which is" "$L/$1.log" | head -12
  return 0 # a failing test is reported, not fatal to a caller under set -e
}
# Last: the logs are removed once packed.
pack() { tar czf "${OUT:-/tmp/nuvec-device}/logs.tgz" -C "${OUT:-/tmp/nuvec-device}" logs 2>/dev/null && rm -rf "$L"; }
