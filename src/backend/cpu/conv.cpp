// nuvec: CPU kernel of the Convolution family. im2col (one row per output position, one
// column per kernel tap and input channel of a group) into a bounded scratch buffer, then one
// BLAS gemm per group and row chunk; float16/bfloat16 are widened to float32 around sgemm.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/cpu/thread_pool.h"
#include "core/errors.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// The convolution as index arithmetic, planned once per node. taps[d][o * K_d + k] is the
// input index that output o reads through kernel tap k along spatial axis d, or -1 where it
// reads padding or a hole left by the input dilation.
struct ConvPlan {
  int spatial;
  int c_in, c_out, groups, cig, cog;
  Shape out_size, k_size;
  std::vector<std::vector<int>> taps;
  int64_t rows;        // N * prod(out_size): one per output position
  int64_t positions;   // prod(out_size)
  int64_t kernel_taps; // prod(k_size)
  int64_t kc;          // kernel_taps * cig: the columns of one group's im2col matrix
  // Input strides in elements: batch, spatial axes, channel.
  int64_t in_n_stride, in_c_stride;
  Strides in_sp_strides;
};

ConvPlan plan_conv(
    const array& in, const array& wt, const array& out, const std::vector<int>& strides,
    const std::vector<int>& padding_lo, const std::vector<int>& kernel_dilation,
    const std::vector<int>& input_dilation, int groups) {
  ConvPlan p;
  p.spatial = static_cast<int>(in.ndim()) - 2;
  p.c_in = in.shape(-1);
  p.c_out = out.shape(-1);
  p.groups = groups;
  p.cig = p.c_in / groups;
  p.cog = p.c_out / groups;
  p.positions = 1;
  p.kernel_taps = 1;
  for (int d = 0; d < p.spatial; ++d) {
    int in_n = in.shape(1 + d), out_n = out.shape(1 + d), k_n = wt.shape(1 + d);
    p.out_size.push_back(out_n);
    p.k_size.push_back(k_n);
    p.positions *= out_n;
    p.kernel_taps *= k_n;
    std::vector<int> t(static_cast<size_t>(out_n) * k_n);
    for (int o = 0; o < out_n; ++o) {
      for (int k = 0; k < k_n; ++k) {
        int64_t j = int64_t{o} * strides[d] + int64_t{k} * kernel_dilation[d] - padding_lo[d];
        int64_t i = j / input_dilation[d];
        bool hit = j >= 0 && j % input_dilation[d] == 0 && i < in_n;
        t[static_cast<size_t>(o) * k_n + k] = hit ? static_cast<int>(i) : -1;
      }
    }
    p.taps.push_back(std::move(t));
    p.in_sp_strides.push_back(in.strides()[1 + d]);
  }
  p.rows = int64_t{out.shape(0)} * p.positions;
  p.kc = p.kernel_taps * p.cig;
  p.in_n_stride = in.strides()[0];
  p.in_c_stride = in.strides().back();
  return p;
}

// Whether the input is its own im2col matrix: one kernel tap reading every input position
// once in order (a 1x1 convolution without stride, padding or dilation) on dense rows.
bool input_is_im2col(const ConvPlan& p, const array& in) {
  if (p.kernel_taps != 1 || !in.flags().row_contiguous) return false;
  for (int d = 0; d < p.spatial; ++d) {
    if (p.out_size[d] != in.shape(1 + d)) return false;
    for (int o = 0; o < p.out_size[d]; ++o) {
      if (p.taps[d][o] != o) return false;
    }
  }
  return true;
}

// The weight as gemm's B operand: (C_out, kernel_taps * cig) rows in tap-major order, the
// kernel reversed along every spatial axis when flip is set, converted to T.
template <typename T, typename E>
std::vector<T> pack_weight(const ConvPlan& p, const array& wt, bool flip) {
  std::vector<T> packed(static_cast<size_t>(p.c_out) * p.kc);
  const E* w = static_cast<const E*>(wt.raw_data());
  const Strides& ws = wt.strides();
  std::vector<int> k(p.spatial, 0);
  for (int64_t kf = 0; kf < p.kernel_taps; ++kf) {
    int64_t tap_off = 0;
    for (int d = 0; d < p.spatial; ++d) {
      int kk = flip ? p.k_size[d] - 1 - k[d] : k[d];
      tap_off += int64_t{kk} * ws[1 + d];
    }
    for (int co = 0; co < p.c_out; ++co) {
      const E* src = w + co * ws[0] + tap_off;
      T* dst = packed.data() + co * p.kc + kf * p.cig;
      for (int c = 0; c < p.cig; ++c) dst[c] = cast_to<T>(src[c * ws.back()]);
    }
    for (int d = p.spatial - 1; d >= 0; --d) {
      if (++k[d] < p.k_size[d]) break;
      k[d] = 0;
    }
  }
  return packed;
}

// Fills rows [r0, r1) of group g's im2col matrix (row stride p.kc) from the input.
template <typename T, typename E>
void im2col_rows(const ConvPlan& p, const E* in, int g, int64_t r0, int64_t r1, T* col) {
  const int sp = p.spatial;
  // The output position of row r0, as a batch index and per-axis indices.
  int64_t n = r0 / p.positions, rem = r0 % p.positions;
  std::vector<int> o(sp), k(sp);
  for (int d = sp - 1; d >= 0; --d) {
    o[d] = static_cast<int>(rem % p.out_size[d]);
    rem /= p.out_size[d];
  }
  std::vector<const int*> row_taps(sp);
  const E* group_in = in + int64_t{g} * p.cig * p.in_c_stride;
  const bool dense_channels = p.in_c_stride == 1;
  for (int64_t r = r0; r < r1; ++r) {
    for (int d = 0; d < sp; ++d) row_taps[d] = p.taps[d].data() + int64_t{o[d]} * p.k_size[d];
    const E* base = group_in + n * p.in_n_stride;
    T* dst = col + (r - r0) * p.kc;
    std::fill(k.begin(), k.end(), 0);
    for (int64_t kf = 0; kf < p.kernel_taps; ++kf, dst += p.cig) {
      int64_t off = 0;
      bool hit = true;
      for (int d = 0; d < sp; ++d) {
        int i = row_taps[d][k[d]];
        if (i < 0) {
          hit = false;
          break;
        }
        off += int64_t{i} * p.in_sp_strides[d];
      }
      if (!hit) {
        std::fill(dst, dst + p.cig, T(0));
      } else if constexpr (std::is_same_v<T, E>) {
        if (dense_channels) {
          std::memcpy(dst, base + off, sizeof(T) * p.cig);
        } else {
          for (int c = 0; c < p.cig; ++c) dst[c] = base[off + c * p.in_c_stride];
        }
      } else {
        for (int c = 0; c < p.cig; ++c) dst[c] = cast_to<T>(base[off + c * p.in_c_stride]);
      }
      for (int d = sp - 1; d >= 0; --d) {
        if (++k[d] < p.k_size[d]) break;
        k[d] = 0;
      }
    }
    // Next output position (the batch index moves when every axis wraps).
    int d = sp - 1;
    for (; d >= 0; --d) {
      if (++o[d] < p.out_size[d]) break;
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
  int64_t work = (r1 - r0) * p.kc;
  int64_t chunks = std::min<int64_t>({cpu::num_threads(), 4, work / kMinPerChunk});
  if (chunks <= 1) {
    im2col_rows(p, in, g, r0, r1, col);
    return;
  }
  int64_t per = (r1 - r0 + chunks - 1) / chunks;
  cpu::run_tasks(static_cast<size_t>(chunks), [&](size_t t) {
    int64_t a = r0 + static_cast<int64_t>(t) * per, b = std::min(r1, a + per);
    if (a < b) im2col_rows(p, in, g, a, b, col + (a - r0) * p.kc);
  });
}

// C (m x n, ldc) = A (m x k, lda) * B^T with B (n x k) row-major.
template <typename T>
void gemm_nt(int m, int n, int k, const T* a, int lda, const T* b, T* c, int ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, lda, b, k, 0.0f, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, a, lda, b, k, 0.0, c, ldc);
  }
}

// The whole convolution for element type E, computing in T (float for half types).
template <typename E>
void conv_im2col(const ConvPlan& p, const array& in, const array& wt, array& out, bool flip) {
  using T = std::conditional_t<is_half_v<E>, float, E>;
  constexpr bool widen = !std::is_same_v<T, E>;
  E* o = static_cast<E*>(out.raw_data());
  if (p.kc == 0) {
    // Empty sums: every output is zero.
    std::fill(o, o + out.size(), E(0.0f));
    return;
  }
  std::vector<T> w = pack_weight<T, E>(p, wt, flip);
  const E* x = static_cast<const E*>(in.raw_data());
  bool direct = false;
  if constexpr (!widen) direct = input_is_im2col(p, in);
  // Row chunks bound the scratch (im2col and widened output) to 16 MiB (float) per chunk.
  // 2^22 elements measured best on 16 cores (1-2^26 tried): large enough for gemm, small
  // enough that the scratch is not a large fresh allocation per call.
  constexpr int64_t kChunkElems = int64_t{1} << 22;
  int64_t chunk = std::clamp<int64_t>(kChunkElems / std::max<int64_t>(p.kc, p.c_out), 1, p.rows);
  std::vector<T> col(direct ? 0 : static_cast<size_t>(chunk * p.kc));
  std::vector<T> wide(widen ? static_cast<size_t>(chunk * p.c_out) : 0);
  for (int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    int64_t r1 = std::min(p.rows, r0 + chunk);
    int m = static_cast<int>(r1 - r0);
    T* dst;
    if constexpr (widen) {
      dst = wide.data();
    } else {
      dst = o + r0 * p.c_out;
    }
    for (int g = 0; g < p.groups; ++g) {
      const T* a = nullptr;
      int lda = 0;
      if constexpr (!widen) {
        if (direct) {
          a = x + r0 * p.c_in + int64_t{g} * p.cig;
          lda = p.c_in;
        }
      }
      if (!direct) {
        im2col<T, E>(p, x, g, r0, r1, col.data());
        a = col.data();
        lda = static_cast<int>(p.kc);
      }
      gemm_nt<T>(
          m, p.cog, static_cast<int>(p.kc), a, lda, w.data() + int64_t{g} * p.cog * p.kc,
          dst + int64_t{g} * p.cog, p.c_out);
    }
    if constexpr (widen) {
      size_t count = static_cast<size_t>(m) * p.c_out;
      E* od = o + r0 * p.c_out;
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
  auto p = plan_conv(in, wt, out, strides_, padding_lo_, kernel_dilation_, input_dilation_, groups_);
  dispatch_all_types(out.dtype(), [&]<typename E>() {
    if constexpr (is_float_v<E>) {
      conv_im2col<E>(p, in, wt, out, flip_);
    } else {
      throw_invalid_argument("conv_general", "the dtype must be floating; got ", out.dtype(), ".");
    }
  });
}

} // namespace nuvec
