// nuvec: which version vectorized() runs (simd.h): the CPU's widest, from cpuid.
#include "backend/cpu/simd.h"

#include <algorithm>
#include <atomic>

namespace nuvec::cpu {

namespace {

Isa widest_supported() {
#if NUVEC_CPU_SIMD_VERSIONS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return Isa::avx512;
  if (__builtin_cpu_supports("x86-64-v3")) return Isa::avx2;
#endif
  return Isa::baseline;
}

std::atomic<Isa>& current() {
  static std::atomic<Isa> isa{widest_supported()};
  return isa;
}

} // namespace

Isa active_isa() { return current().load(std::memory_order_relaxed); }

Isa set_isa(Isa isa) {
  static const Isa widest = widest_supported();
  return current().exchange(std::min(isa, widest));
}

} // namespace nuvec::cpu
