// nuvec: the vector instruction set of the CPU's hot loops, chosen at run time. The library
// is built for baseline x86-64 (SSE2) so that one binary runs on any x86-64 machine; a loop
// that matters runs through vectorized(f), which compiles f's body three times (baseline,
// x86-64-v3 = AVX2 + FMA, x86-64-v4 = AVX-512) and calls the widest the CPU has, as GCC's
// function multiversioning would. The pick is a plain switch, not target_clones: an ifunc
// resolver runs while the loader relocates libnuvec, before a sanitizer's runtime is up, and
// crashed every ThreadSanitizer program.
//
// Every version is compiled with floating-point contraction off (no a * b + c fused into an
// FMA), so the three round alike: a loop whose order the code fixes (lane partials, never a
// reassociated reduction) gives the same bits whichever version runs, on any machine. FMA
// measured only a few percent faster on the exp-bound row loops (logsumexp's), not worth
// answers that depend on the machine.
#pragma once

namespace nuvec::cpu {

/// The versions vectorized() compiles, narrowest first.
enum class Isa { baseline, avx2, avx512 };

/// The version vectorized() runs: the widest this CPU supports (cpuid, read once), or a
/// narrower one that set_isa asked for.
Isa active_isa();

/// Makes vectorized() run `isa`, or the widest the CPU supports when that is narrower;
/// returns the version that ran before. For tests and benchmarks comparing the versions.
Isa set_isa(Isa isa);

namespace detail {

// flatten inlines f's body (and what it calls) into each version, where it is compiled with
// that version's instructions; f itself must not call vectorized() again.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NUVEC_CPU_SIMD_VERSIONS 1
template <typename F>
[[gnu::flatten, gnu::optimize("fp-contract=off"), gnu::target("arch=x86-64-v4")]] auto run_avx512(F& f) {
  return f();
}
template <typename F>
[[gnu::flatten, gnu::optimize("fp-contract=off"), gnu::target("arch=x86-64-v3")]] auto run_avx2(F& f) {
  return f();
}
template <typename F>
[[gnu::flatten, gnu::optimize("fp-contract=off")]] auto run_baseline(F& f) {
  return f();
}
#else
#define NUVEC_CPU_SIMD_VERSIONS 0
template <typename F>
auto run_baseline(F& f) {
  return f();
}
#endif

} // namespace detail

/// f() run in the version for active_isa(): f's loops vectorise to the CPU's widest
/// registers. Write them so that the vectoriser need not reorder floating-point sums (fixed
/// lane partials, as sum_lanes in fast/rows.h) and every version gives the same result.
template <typename F>
auto vectorized(F&& f) {
#if NUVEC_CPU_SIMD_VERSIONS
  switch (active_isa()) {
    case Isa::avx512: return detail::run_avx512(f);
    case Isa::avx2: return detail::run_avx2(f);
    case Isa::baseline: break;
  }
#endif
  return detail::run_baseline(f);
}

} // namespace nuvec::cpu
