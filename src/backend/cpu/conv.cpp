// nuvec: CPU kernel of the Convolution family. im2col (one row per output position, one
// column per kernel tap and input channel of a group) into a bounded scratch buffer, then one
// BLAS gemm per group and row chunk; float16/bfloat16 are widened to float32 around sgemm.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/common/conv_geometry.h"
#include "backend/common/dispatch.h"
#include "backend/common/gemm_problem.h"
#include "backend/cpu/blas.h"
#include "backend/cpu/thread_pool.h"
#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// The shared geometry (backend/common/conv_geometry.h) plus the CPU's tap tables, planned
// once per node: taps[d][o * K_d + k] is tap_index(g, d, o, k), the input index that output
// o reads through kernel tap k along spatial axis d, or -1 where it reads padding or a hole
// left by the input dilation.
struct ConvPlan {
  ConvGeometry g;
  std::vector<std::vector<int>> taps;
};

ConvPlan plan_conv(const ConvGeometry& g) {
  ConvPlan p{g, {}};
  for (int d = 0; d < g.spatial; ++d) {
    std::vector<int> t(static_cast<size_t>(g.out_size[d] * g.k_size[d]));
    for (int64_t o = 0; o < g.out_size[d]; ++o) {
      for (int64_t k = 0; k < g.k_size[d]; ++k) {
        t[static_cast<size_t>(o * g.k_size[d] + k)] = static_cast<int>(tap_index(g, d, o, k));
      }
    }
    p.taps.push_back(std::move(t));
  }
  return p;
}

// The weight as gemm's B operand: (C_out, kernel_taps * cig) rows in tap-major order, the
// kernel reversed along every spatial axis when flip is set, converted to T.
template <typename T, typename E>
std::vector<T> pack_weight(const ConvPlan& p, const array& wt, bool flip) {
  std::vector<T> packed(static_cast<size_t>(p.g.c_out) * p.g.kc);
  const E* w = static_cast<const E*>(wt.raw_data());
  const Strides& ws = wt.strides();
  std::vector<int> k(p.g.spatial, 0);
  for (int64_t kf = 0; kf < p.g.taps; ++kf) {
    int64_t tap_off = 0;
    for (int d = 0; d < p.g.spatial; ++d) {
      int kk = flip ? p.g.k_size[d] - 1 - k[d] : k[d];
      tap_off += int64_t{kk} * ws[1 + d];
    }
    for (int co = 0; co < p.g.c_out; ++co) {
      const E* src = w + co * ws[0] + tap_off;
      T* dst = packed.data() + co * p.g.kc + kf * p.g.cig;
      for (int c = 0; c < p.g.cig; ++c) dst[c] = cast_to<T>(src[c * ws.back()]);
    }
    for (int d = p.g.spatial - 1; d >= 0; --d) {
      if (++k[d] < p.g.k_size[d]) break;
      k[d] = 0;
    }
  }
  return packed;
}

// Fills rows [r0, r1) of group g's im2col matrix (row stride p.g.kc) from the input.
template <typename T, typename E>
void im2col_rows(const ConvPlan& p, const E* in, int g, int64_t r0, int64_t r1, T* col) {
  const int sp = p.g.spatial;
  // The output position of row r0, as a batch index and per-axis indices.
  int64_t n = r0 / p.g.positions, rem = r0 % p.g.positions;
  std::vector<int> o(sp), k(sp);
  for (int d = sp - 1; d >= 0; --d) {
    o[d] = static_cast<int>(rem % p.g.out_size[d]);
    rem /= p.g.out_size[d];
  }
  std::vector<const int*> row_taps(sp);
  const E* group_in = in + int64_t{g} * p.g.cig * p.g.in_c_stride;
  const bool dense_channels = p.g.in_c_stride == 1;
  for (int64_t r = r0; r < r1; ++r) {
    for (int d = 0; d < sp; ++d) row_taps[d] = p.taps[d].data() + int64_t{o[d]} * p.g.k_size[d];
    const E* base = group_in + n * p.g.in_n_stride;
    T* dst = col + (r - r0) * p.g.kc;
    std::fill(k.begin(), k.end(), 0);
    for (int64_t kf = 0; kf < p.g.taps; ++kf, dst += p.g.cig) {
      int64_t off = 0;
      bool hit = true;
      for (int d = 0; d < sp; ++d) {
        int i = row_taps[d][k[d]];
        if (i < 0) {
          hit = false;
          break;
        }
        off += int64_t{i} * p.g.in_sp_stride[d];
      }
      if (!hit) {
        std::fill(dst, dst + p.g.cig, T(0));
      } else if constexpr (std::is_same_v<T, E>) {
        if (dense_channels) {
          std::memcpy(dst, base + off, sizeof(T) * p.g.cig);
        } else {
          for (int c = 0; c < p.g.cig; ++c) dst[c] = base[off + c * p.g.in_c_stride];
        }
      } else {
        for (int c = 0; c < p.g.cig; ++c) dst[c] = cast_to<T>(base[off + c * p.g.in_c_stride]);
      }
      for (int d = sp - 1; d >= 0; --d) {
        if (++k[d] < p.g.k_size[d]) break;
        k[d] = 0;
      }
    }
    // Next output position (the batch index moves when every axis wraps).
    int d = sp - 1;
    for (; d >= 0; --d) {
      if (++o[d] < p.g.out_size[d]) break;
      o[d] = 0;
    }
    if (d < 0) ++n;
  }
}

// im2col over [r0, r1) split over the thread pool when the chunk is large enough to pay
// for it. At most 4 chunks: more gained nothing measurable on 16 cores, where OpenBLAS's own
// workers (still spinning after the previous gemm) compete for the same cores.
template <typename T, typename E>
void im2col(const ConvPlan& p, const E* in, int g, int64_t r0, int64_t r1, T* col) {
  constexpr int64_t kMinPerChunk = int64_t{1} << 16; // elements written
  int64_t work = (r1 - r0) * p.g.kc;
  int64_t chunks = std::min<int64_t>({cpu::num_threads(), 4, work / kMinPerChunk});
  if (chunks <= 1) {
    im2col_rows(p, in, g, r0, r1, col);
    return;
  }
  int64_t per = (r1 - r0 + chunks - 1) / chunks;
  cpu::run_tasks(static_cast<size_t>(chunks), [&](size_t t) {
    int64_t a = r0 + static_cast<int64_t>(t) * per, b = std::min(r1, a + per);
    if (a < b) im2col_rows(p, in, g, a, b, col + (a - r0) * p.g.kc);
  });
}

// The whole convolution for element type E, computing in T (float for half types).
template <typename E>
void conv_im2col(const ConvPlan& p, const array& in, const array& wt, array& out, bool flip) {
  using T = std::conditional_t<is_half_v<E>, float, E>;
  constexpr bool widen = !std::is_same_v<T, E>;
  E* o = static_cast<E*>(out.raw_data());
  if (p.g.kc == 0) {
    // Empty sums: every output is zero.
    std::fill(o, o + out.size(), E(0.0f));
    return;
  }
  std::vector<T> w = pack_weight<T, E>(p, wt, flip);
  const E* x = static_cast<const E*>(in.raw_data());
  bool direct = false;
  if constexpr (!widen) direct = input_is_im2col(p.g, in);
  // Row chunks bound the scratch (im2col and widened output) to 16 MiB (float) per chunk.
  // 2^22 elements measured best on 16 cores (1-2^26 tried): large enough for gemm, small
  // enough that the scratch is not a large fresh allocation per call.
  constexpr int64_t kChunkElems = int64_t{1} << 22;
  int64_t chunk = std::clamp<int64_t>(kChunkElems / std::max<int64_t>(p.g.kc, p.g.c_out), 1, p.g.rows);
  std::vector<T> col(direct ? 0 : static_cast<size_t>(chunk * p.g.kc));
  std::vector<T> wide(widen ? static_cast<size_t>(chunk * p.g.c_out) : 0);
  for (int64_t r0 = 0; r0 < p.g.rows; r0 += chunk) {
    int64_t r1 = std::min(p.g.rows, r0 + chunk);
    int m = static_cast<int>(r1 - r0);
    T* dst;
    if constexpr (widen) {
      dst = wide.data();
    } else {
      dst = o + r0 * p.g.c_out;
    }
    for (int g = 0; g < p.g.groups; ++g) {
      const T* a = nullptr;
      int lda = 0;
      if constexpr (!widen) {
        if (direct) {
          a = x + r0 * p.g.c_in + int64_t{g} * p.g.cig;
          lda = p.g.c_in;
        }
      }
      if (!direct) {
        im2col<T, E>(p, x, g, r0, r1, col.data());
        a = col.data();
        lda = static_cast<int>(p.g.kc);
      }
      // C (m x cog, ld c_out) = A (m x kc, lda) @ W_g^T, W_g (cog x kc) row-major.
      GemmProblem prod{cpu::blas_dtype<T>(), m, p.g.cog, p.g.kc, 1, {}, {}, {}, 1.0, 0.0};
      prod.a = {a, false, lda, 0};
      prod.b = {w.data() + int64_t{g} * p.g.cog * p.g.kc, true, p.g.kc, 0};
      prod.out = {dst + int64_t{g} * p.g.cog, nullptr, p.g.c_out, 0};
      cpu::blas_gemm(prod);
    }
    if constexpr (widen) {
      size_t count = static_cast<size_t>(m) * p.g.c_out;
      E* od = o + r0 * p.g.c_out;
      for (size_t i = 0; i < count; ++i) od[i] = E(wide[i]);
    }
  }
}

} // namespace

void Convolution::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  const array& wt = inputs[1];
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const ConvPlan p = plan_conv(
      conv_geometry(in, wt, out, strides_, padding_lo_, kernel_dilation_, input_dilation_, groups_));
  dispatch_all_types(out.dtype(), [&]<typename E>() {
    if constexpr (is_float_v<E>) {
      conv_im2col<E>(p, in, wt, out, flip_);
    } else {
      throw_invalid_argument("conv_general", "the dtype must be floating; got ", out.dtype(), ".");
    }
  });
}

} // namespace nuvec
