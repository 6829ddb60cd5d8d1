// nuvec: the CPU core of the quantized products (QuantizedMatmul, GatherQmm, QQMatmul:
// quantized_matmul.cpp, qqmm.cpp) and the batch gathering it shares with GatherMm
// (gather_mm.cpp). Meaning: src/quantized/quantized.h; the number formats and MLX's packing:
// backend/common/math/quant.h. The weight is decoded a word at a time in vector registers
// into a small float32 buffer (two rows of w when packed along K, four when packed along N),
// which then serves every row of a chunk of x before the next is decoded: the decode costs
// once per 32 rows of x. Sums run in float32 lane partials whose order this code fixes
// (every vector version of cpu/simd.h gives the same bits). The decode shape (at most 8 rows
// against a 4- or 8-bit weight packed along K) skips the buffer: qmv takes the codes from
// registers and factors each group's scale (and bias) out of the sums.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/gemm_problem.h"
#include "backend/common/math/quant.h"
#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/thread_pool.h"
#include "core/errors.h"
#include "nuvec/array.h"
#include "quantized/quant_spec.h"

namespace nuvec::cpu::qdot {

/// One packed matrix (a w[e] of a batch), row-contiguous: `rows` rows of `words` uint32
/// words (codes along the packed axis) with `groups` scales (and biases) per row. Scales are
/// S (the activation dtype, affine) or uint8 codes (fp modes); biases affine only.
struct QMatrix {
  QuantSpec spec;
  const uint32_t* w = nullptr;
  const void* scales = nullptr;
  const void* biases = nullptr;
  int64_t words = 0;
  int64_t groups = 0;
};

/// The rows of x a product reads (float32, K contiguous values each) and the output rows they
/// fill (N contiguous values each), in matching order: every leading row of a QuantizedMatmul,
/// or the rows of the batch entries that share one weight of a GatherQmm.
template <typename T>
struct RowSet {
  std::vector<const float*> x;
  std::vector<T*> out;
  int64_t size() const { return static_cast<int64_t>(x.size()); }
};

/// The float32 value of every code of an fp mode's `bits`-bit codes (16 E2M1 or 256 E4M3).
inline const float* fp_code_table(int bits) {
  static const auto tables = [] {
    std::vector<float> t(16 + 256);
    for (uint32_t c = 0; c < 16; ++c) t[c] = math::fp4_e2m1_value(c);
    for (uint32_t c = 0; c < 256; ++c) t[16 + c] = math::fp8_e4m3_value(c);
    return t;
  }();
  return tables.data() + (bits == 4 ? 0 : 16);
}

// GCC's vector types: the operations below are written on whole vectors, so that every
// version of cpu/simd.h runs them in its widest registers (a 16-float vector is one AVX-512
// register, two AVX2 ones) and sums keep the lane order written here; the auto-vectoriser
// leaves such loops (partial sums kept in arrays, codes shifted out of words) scalar.
using f32x8 = float __attribute__((vector_size(32)));
using u32x8 = uint32_t __attribute__((vector_size(32)));
using f32x16 = float __attribute__((vector_size(64)));

template <typename V>
inline V load(const float* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
template <typename V>
inline void store(float* p, V v) {
  __builtin_memcpy(p, &v, sizeof v);
}

/// The codes j0 .. j0 + 7 of a packed row (j0 a multiple of 8), as integers.
inline u32x8 codes8(const uint32_t* row, int64_t j0, int bits) {
  if (bits == 4) {
    const uint32_t u = row[j0 / 8];
    return (u32x8{u, u, u, u, u, u, u, u} >> u32x8{0, 4, 8, 12, 16, 20, 24, 28}) & 15u;
  }
  if (bits == 8) {
    const uint32_t u0 = row[j0 / 4], u1 = row[j0 / 4 + 1];
    return (u32x8{u0, u0, u0, u0, u1, u1, u1, u1} >> u32x8{0, 8, 16, 24, 0, 8, 16, 24}) & 255u;
  }
  u32x8 q;
  for (int t = 0; t < 8; ++t) q[t] = math::quant_code(row, j0 + t, bits);
  return q;
}

/// Writes the dequantized groups [g0, g1) of packed row `row` to dst (group_size floats per
/// group): scale * q + bias (affine, in float32, as the dequantize graph forms it for
/// float32) or value(code) * scale (fp modes). S is the affine scales' element type.
template <typename S>
inline void decode_groups(const QMatrix& m, int64_t row, int64_t g0, int64_t g1, float* dst) {
  const int gs = m.spec.group_size, bits = m.spec.bits;
  const uint32_t* wr = m.w + row * m.words;
  const float* lut = m.spec.mode == QuantMode::Affine ? nullptr : fp_code_table(bits);
  for (int64_t g = g0; g < g1; ++g, dst += gs) {
    const int64_t at = row * m.groups + g;
    if (m.spec.mode == QuantMode::Affine) {
      const float s = static_cast<float>(static_cast<const S*>(m.scales)[at]);
      const float b = static_cast<float>(static_cast<const S*>(m.biases)[at]);
      for (int e = 0; e < gs; e += 8) {
        store(dst + e, __builtin_convertvector(codes8(wr, g * gs + e, bits), f32x8) * s + b);
      }
    } else {
      const float s = math::fp_scale_value(m.spec.mode, static_cast<const uint8_t*>(m.scales)[at]);
      for (int e = 0; e < gs; e += 8) {
        const u32x8 q = codes8(wr, g * gs + e, bits);
        f32x8 v;
        for (int t = 0; t < 8; ++t) v[t] = lut[q[t]];
        store(dst + e, v * s);
      }
    }
  }
}

/// The float32 value of every scale code (256) of an fp mode: E4M3 for nvfp4 (the code
/// table of the 8-bit values), E8M0 for the mx modes.
inline const float* fp_scale_table(QuantMode mode) {
  if (mode == QuantMode::Nvfp4) return fp_code_table(8);
  static const auto e8m0 = [] {
    std::vector<float> t(256);
    for (uint32_t c = 0; c < 256; ++c) t[c] = math::e8m0_value(c);
    return t;
  }();
  return e8m0.data();
}

/// Partials per row of the dot products: 16 floats fill one AVX-512 register, two AVX2 ones.
inline constexpr int kLanes = 16;

/// res[j][i] = sum_k w[j * K + k] * x[i][k] for NW decoded weight rows and RB rows of x, in
/// kLanes float partials per pair (lane l sums k = l mod 16; the partials then combined
/// pairwise, so every vector version gives the same bits): each load feeds several products.
/// K is a multiple of 16 (of every group size).
template <int NW, int RB>
inline void dot_block(const float* w, const float* const* x, int64_t K, float (*res)[4]) {
  f32x16 acc[NW][RB] = {};
  const float* xr[RB];
  for (int r = 0; r < RB; ++r) xr[r] = x[r];
  for (int64_t k = 0; k < K; k += kLanes) {
    f32x16 wv[NW];
#pragma GCC unroll 2
    for (int j = 0; j < NW; ++j) wv[j] = load<f32x16>(w + j * K + k);
#pragma GCC unroll 4
    for (int r = 0; r < RB; ++r) {
      const f32x16 xv = load<f32x16>(xr[r] + k);
#pragma GCC unroll 2
      for (int j = 0; j < NW; ++j) acc[j][r] += wv[j] * xv;
    }
  }
  for (int j = 0; j < NW; ++j) {
    for (int r = 0; r < RB; ++r) {
      float p[kLanes];
      __builtin_memcpy(p, &acc[j][r], sizeof p);
      for (int h = kLanes / 2; h > 0; h /= 2) {
        for (int l = 0; l < h; ++l) p[l] += p[l + h];
      }
      res[j][r] = p[0];
    }
  }
}

/// For weight rows n .. n + NW - 1 decoded at w: their products with rows [r0, r1) of x,
/// written to out (RB = 4 rows at a time, then the remainder).
template <int NW, typename T>
inline void dot_rows_into(const float* w, int64_t n, int64_t K, const RowSet<T>& rows, int64_t r0, int64_t r1) {
  float res[NW][4];
  int64_t r = r0;
  const auto block = [&]<int RB>() {
    dot_block<NW, RB>(w, &rows.x[r], K, res);
    for (int j = 0; j < NW; ++j) {
      for (int i = 0; i < RB; ++i) rows.out[r + i][n + j] = static_cast<T>(res[j][i]);
    }
  };
  for (; r + 4 <= r1; r += 4) block.template operator()<4>();
  switch (r1 - r) {
    case 3: block.template operator()<3>(); break;
    case 2: block.template operator()<2>(); break;
    case 1: block.template operator()<1>(); break;
    default: break;
  }
}

/// Rows of x per pass over a decoded weight row (transpose) or per accumulator block (not
/// transpose): their float32 values (32 x K) stay in the L2 cache while the weight streams.
inline constexpr int64_t kRowChunk = 32;
/// Floats of a block's accumulators and decoded weight rows when w is packed along N
/// ((rows + 4) x columns, 32 KiB: L1).
inline constexpr int64_t kAccFloats = 8192;

/// Runs f(begin, end) over [0, n) split into at most num_threads() contiguous parts (one
/// part, on the calling thread, when `work` multiply-adds are too few to share).
template <typename F>
inline void split_work(int64_t n, int64_t work, F&& f) {
  const int64_t parts = work < (int64_t{1} << 18) ? 1 : std::min<int64_t>(n, num_threads());
  if (parts <= 1) {
    f(int64_t{0}, n);
    return;
  }
  run_tasks(static_cast<size_t>(parts), [&](size_t p) {
    f(n * static_cast<int64_t>(p) / parts, n * static_cast<int64_t>(p + 1) / parts);
  });
}

/// Rows of x up to which qmm's transposed 4- and 8-bit products run qmv (the decode shape: a
/// token or a few against every row of a weight).
inline constexpr int64_t kQmvRows = 8;

using u32x16 = uint32_t __attribute__((vector_size(64)));
using i32x16 = int32_t __attribute__((vector_size(64))); // lane masks of the selects below

/// The 16 codes k0 .. k0 + 15 (k0 a multiple of 16) of a packed row of 4- or 8-bit codes.
template <int kBits>
__attribute__((always_inline)) inline u32x16 codes16(const uint32_t* row, int64_t k0) {
  // Each word broadcast to the lanes of its codes (a select with a constant mask), each lane
  // shifting out its own code: vector ops only (GCC 12 turned byte shuffles and u8 -> u32
  // conversions of these vector types into scalar code, 4-10x slower).
  if constexpr (kBits == 4) {
    const uint32_t* w = row + k0 / 8;
    const u32x16 a = u32x16{} + w[0], b = u32x16{} + w[1];
    const i32x16 first8 = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return ((first8 ? a : b) >> u32x16{0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28}) & 15u;
  } else {
    static_assert(kBits == 8);
    const uint32_t* w = row + k0 / 4;
    const u32x16 a = u32x16{} + w[0], b = u32x16{} + w[1], c = u32x16{} + w[2], d = u32x16{} + w[3];
    const i32x16 first8 = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    const i32x16 first4 = {-1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0};
    const u32x16 v = first8 ? (first4 ? a : b) : (first4 ? c : d);
    return (v >> u32x16{0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24}) & 255u;
  }
}

/// The E2M1 values of 16 codes, as math::fp4_e2m1_value gives them one by one: 2^(e-1)
/// (1 + m/2) built in the float's bits, subnormals m/2, the sign last (a 16-entry table
/// shuffle would be shorter, but GCC 12 compiles it to scalar code).
__attribute__((always_inline)) inline f32x16 e2m1_values16(u32x16 c) {
  const u32x16 e = (c >> 1) & 3u, m = c & 1u;
  const f32x16 normal = (f32x16)(((e + 126u) << 23) | (m << 22));
  const f32x16 sub = __builtin_convertvector(m, f32x16) * 0.5f;
  const f32x16 mag = (i32x16)(e == 0u) ? sub : normal;
  return (f32x16)((u32x16)mag | ((c & 8u) << 28));
}

/// The E4M3 (fn) values of 16 codes, as math::fp8_e4m3_value gives them one by one: 2^(e-7)
/// (1 + m/8) built in the float's bits, subnormals m 2^-9, 0x7f and 0xff NaN, the sign last.
__attribute__((always_inline)) inline f32x16 e4m3_values16(u32x16 c) {
  const u32x16 e = (c >> 3) & 15u, m = c & 7u;
  const f32x16 normal = (f32x16)(((e + 120u) << 23) | (m << 20));
  const f32x16 sub = __builtin_convertvector(m, f32x16) * 0.001953125f; // 2^-9
  const i32x16 is_sub = (i32x16)(e == 0u), is_nan = (i32x16)((c & 0x7fu) == 0x7fu);
  const f32x16 nan = f32x16{} + __builtin_nanf("");
  const f32x16 mag = is_nan ? nan : (is_sub ? sub : normal);
  return (f32x16)((u32x16)mag | ((c & 0x80u) << 24));
}

/// out[r][n] for RB rows of x and the weight rows [n0, n1) of a 4- or 8-bit matrix packed
/// along K, without decoding the weight into memory: per group g, the group's scale (and
/// bias) factored out of the sum, x · (s q + b) = s (x · q) + b Σx (affine; Σx per row and
/// group computed once per call, xsum: RB x groups, the factorisation MLX's qmv kernels use)
/// or x · (v(q) s) = s (x · v(q)) (fp modes: E2M1 or E4M3 values v built from the codes'
/// bits in the lanes). x · q runs in 16 float lanes from the codes shifted out in registers;
/// float32 sums in a fixed lane order.
template <int RB, int kBits, bool kAffine, typename T, typename S>
inline void qmv_rows(const QMatrix& m, int64_t n0, int64_t n1, int64_t K, const float* const* x, T* const* out,
                     const float* xsum) {
  const int gs = m.spec.group_size;
  const int64_t groups = K / gs;
  const float* lut = kAffine ? nullptr : fp_code_table(kBits);
  const auto values16 = [&](const uint32_t* wr, int64_t k0) {
    const u32x16 c = codes16<kBits>(wr, k0);
    if constexpr (kAffine) {
      return __builtin_convertvector(c, f32x16);
    } else if constexpr (kBits == 4) {
      return e2m1_values16(c);
    } else {
      return e4m3_values16(c);
    }
  };
  // fp modes: the scale codes' values from a table (E4M3 for nvfp4, E8M0 for the mx modes).
  const float* scale_lut = kAffine ? nullptr : fp_scale_table(m.spec.mode);
  const auto scale = [&](const S* sc, int64_t g) {
    if constexpr (kAffine) return static_cast<float>(sc[g]);
    else return scale_lut[sc[g]];
  };
  for (int64_t n = n0; n < n1; ++n) {
    const uint32_t* wr = m.w + n * m.words;
    const S* sc = static_cast<const S*>(m.scales) + n * m.groups;
    const S* bi = kAffine ? static_cast<const S*>(m.biases) + n * m.groups : nullptr;
    f32x16 acc[RB] = {};
    float bias_part[RB] = {};
    for (int64_t g = 0; g < groups; ++g) {
      f32x16 p[RB] = {};
      for (int e = 0; e < gs; e += kLanes) {
        const f32x16 q = values16(wr, g * gs + e);
#pragma GCC unroll 8
        for (int r = 0; r < RB; ++r) p[r] += load<f32x16>(x[r] + g * gs + e) * q;
      }
      const float sg = scale(sc, g);
#pragma GCC unroll 8
      for (int r = 0; r < RB; ++r) acc[r] += sg * p[r];
      if constexpr (kAffine) {
        const float bg = static_cast<float>(bi[g]);
#pragma GCC unroll 8
        for (int r = 0; r < RB; ++r) bias_part[r] += bg * xsum[r * groups + g];
      }
    }
    for (int r = 0; r < RB; ++r) {
      float l[kLanes];
      __builtin_memcpy(l, &acc[r], sizeof l);
      for (int h = kLanes / 2; h > 0; h /= 2) {
        for (int i = 0; i < h; ++i) l[i] += l[i + h];
      }
      float v = l[0] + bias_part[r];
      // The factorisation turns an infinite x into inf·0 = NaN where a code is 0, and its
      // larger intermediates can overflow: a non-finite result is redone as the dequantize
      // graph computes it, x · (s q + b) or x · (v(q) s).
      if (!std::isfinite(v)) [[unlikely]] {
        v = 0.0f;
        for (int64_t k = 0; k < K; ++k) {
          const uint32_t q = math::quant_code(wr, k, kBits);
          float wq;
          if constexpr (kAffine) {
            wq = static_cast<float>(sc[k / gs]) * static_cast<float>(q) + static_cast<float>(bi[k / gs]);
          } else {
            wq = lut[q] * scale(sc, k / gs);
          }
          v += x[r][k] * wq;
        }
      }
      out[r][n] = static_cast<T>(v);
    }
  }
}

/// qmm for at most kQmvRows rows of x against a weight packed along K (transpose) in affine
/// 4 or 8 bits or an fp mode: qmv_rows over N split across the thread pool. Returns false,
/// doing nothing, for other bit widths or layouts (qmm's decoding path runs them).
template <typename T, typename S>
bool qmv(const QMatrix& w, bool transpose, int64_t N, int64_t K, const RowSet<T>& rows) {
  const int64_t R = rows.size();
  const int gs = w.spec.group_size;
  const bool affine = w.spec.mode == QuantMode::Affine;
  if (!transpose || (w.spec.bits != 4 && w.spec.bits != 8) || R > kQmvRows || gs % kLanes != 0 || K % gs != 0) {
    return false;
  }
  const int64_t groups = K / gs;
  std::vector<float> xsum(affine ? static_cast<size_t>(R * groups) : 0);
  for (int64_t r = 0; affine && r < R; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      float t = 0.0f;
      for (int e = 0; e < gs; ++e) t += rows.x[r][g * gs + e];
      xsum[r * groups + g] = t;
    }
  }
  split_work(N, R * N * K, [&](int64_t n0, int64_t n1) {
    vectorized([&] {
      // Every row of x in one pass over the weight (R of 1 to 8 instantiated).
      [&]<int... Rs>(std::integer_sequence<int, Rs...>) {
        // dispatch_qmm gives the fp modes S = uint8_t (scale codes), affine S = T.
        const auto run = [&]<int RB>() {
          constexpr bool fp = std::is_same_v<S, uint8_t>;
          const float* xs = fp ? nullptr : xsum.data();
          if (w.spec.bits == 4) {
            qmv_rows<RB, 4, !fp, T, S>(w, n0, n1, K, rows.x.data(), rows.out.data(), xs);
          } else {
            qmv_rows<RB, 8, !fp, T, S>(w, n0, n1, K, rows.x.data(), rows.out.data(), xs);
          }
        };
        ((R == Rs + 1 ? run.template operator()<Rs + 1>() : void()), ...);
      }(std::make_integer_sequence<int, int(kQmvRows)>{});
    });
  });
  return true;
}

/// Rows of x from which qmm dequantizes w a block at a time into float32 and multiplies it
/// with OpenBLAS's sgemm (cpu/blas.h): at 256 rows against 4096 x 4096 W4 the register-
/// dequantizing dot products below ran at half of sgemm's speed on the pre-dequantized
/// matrix (bench/compare.py, 2-core VM), and a block's decoding costs little beside its
/// product once the rows are many.
inline constexpr int64_t kBlasRows = 64;
/// Values of N a dequantized block covers (rows of w when transposed: 8 MiB at K = 4096).
inline constexpr int64_t kBlasBlock = 512;

/// qmm through sgemm: for each block of N, the block of w decoded in float32 exactly as the
/// dot products decode it (decode_groups, over the thread pool), then out[:, block] = x ·
/// block (BLAS threads). Row-contiguous float x and out (what QuantizedMatmul passes) are
/// used in place; otherwise (gathered rows of a GatherQmm expert group, half types) the rows
/// are staged: x copied into R x K, the product into R x N float32, written back per row.
/// Returns false, doing nothing, when BLAS cannot take the layout.
template <typename T, typename S>
bool qmm_blas(const QMatrix& w, bool transpose, int64_t N, int64_t K, const RowSet<T>& rows) {
  const int64_t R = rows.size();
  if (!blas_fits({true, false, K}) || !blas_fits({true, false, N})) return false;
  bool x_dense = true, out_dense = std::is_same_v<T, float>;
  for (int64_t r = 1; r < R; ++r) {
    x_dense = x_dense && rows.x[r] == rows.x[0] + r * K;
    out_dense = out_dense && rows.out[r] == rows.out[0] + r * N;
  }
  std::vector<float> xs, os;
  const float* x = rows.x[0];
  if (!x_dense) {
    xs.resize(static_cast<size_t>(R * K));
    for (int64_t r = 0; r < R; ++r) std::copy(rows.x[r], rows.x[r] + K, xs.data() + r * K);
    x = xs.data();
  }
  float* out = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (out_dense) out = rows.out[0];
  }
  if (out == nullptr) {
    os.resize(static_cast<size_t>(R * N));
    out = os.data();
  }
  const int gs = w.spec.group_size;
  // Untransposed, a block holds whole groups of a row of w (N is a multiple of the group).
  const int64_t unit = std::max<int64_t>(gs, 32);
  const int64_t nb = transpose ? kBlasBlock : std::max(unit, kBlasBlock / unit * unit);
  std::vector<float> wd(static_cast<size_t>(nb * K));
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t cols = std::min(nb, N - n0);
    if (transpose) {
      split_work(cols, cols * K * 8, [&](int64_t a, int64_t b) {
        vectorized([&] {
          for (int64_t n = a; n < b; ++n) decode_groups<S>(w, n0 + n, 0, K / gs, wd.data() + n * K);
        });
      });
    } else {
      split_work(K, cols * K * 8, [&](int64_t a, int64_t b) {
        vectorized([&] {
          for (int64_t k = a; k < b; ++k) decode_groups<S>(w, k, n0 / gs, (n0 + cols) / gs, wd.data() + k * cols);
        });
      });
    }
    // out[:, n0 : n0 + cols] (R x cols, row stride N) = x (R x K) · block, the block read as
    // K x cols: column-major with stride K (rows of w) or row-major with stride cols.
    const GemmOperand rhs = transpose ? GemmOperand{wd.data(), true, K, 0} : GemmOperand{wd.data(), false, cols, 0};
    blas_gemm(GemmProblem{float32, R, cols, K, 1, {x, false, K, 0}, rhs, {out + n0, nullptr, N, 0}});
  }
  if (out == os.data()) {
    for (int64_t r = 0; r < R; ++r) {
      const float* src = os.data() + r * N;
      T* o = rows.out[r];
      for (int64_t j = 0; j < N; ++j) o[j] = static_cast<T>(src[j]);
    }
  }
  return true;
}

/// out_i = x_i · dequantize(w)ᵀ (transpose: w is N x K packed along K) or x_i · dequantize(w)
/// (w is K x N packed along N) for every row i of `rows`; accumulates in float32, writes T.
/// S: the affine scales' type (unused for the fp modes). Splits N over the thread pool.
template <typename T, typename S>
void qmm(const QMatrix& w, bool transpose, int64_t N, int64_t K, const RowSet<T>& rows) {
  const int64_t R = rows.size();
  if (R == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t r = 0; r < R; ++r) std::fill(rows.out[r], rows.out[r] + N, T(0));
    return;
  }
  if (R >= kBlasRows && qmm_blas<T, S>(w, transpose, N, K, rows)) return;
  if (qmv<T, S>(w, transpose, N, K, rows)) return;
  const int gs = w.spec.group_size;
  if (transpose) {
    // Two weight rows decoded at a time, each dotted with every row of a chunk of x.
    split_work(N, R * N * K, [&](int64_t n0, int64_t n1) {
      std::vector<float> wbuf(static_cast<size_t>(2 * K));
      vectorized([&] {
        for (int64_t r0 = 0; r0 < R; r0 += kRowChunk) {
          const int64_t r1 = std::min(R, r0 + kRowChunk);
          int64_t n = n0;
          for (; n + 2 <= n1; n += 2) {
            decode_groups<S>(w, n, 0, K / gs, wbuf.data());
            decode_groups<S>(w, n + 1, 0, K / gs, wbuf.data() + K);
            dot_rows_into<2>(wbuf.data(), n, K, rows, r0, r1);
          }
          if (n < n1) {
            decode_groups<S>(w, n, 0, K / gs, wbuf.data());
            dot_rows_into<1>(wbuf.data(), n, K, rows, r0, r1);
          }
        }
      });
    });
    return;
  }
  // Packed along N: out[i, :] += x[i, k] * deq(w[k, :]) row by row of w, on blocks of
  // columns as wide as the accumulators of a chunk of rows (and four decoded rows) allow in
  // L1, made of whole words and groups (a multiple of 32 codes and of the group size), at
  // least one block per thread.
  const int64_t unit = std::max<int64_t>(gs, 32);
  const int64_t chunk = std::min(R, kRowChunk);
  const auto round_up = [&](int64_t v) { return (v + unit - 1) / unit * unit; };
  const int64_t cb = std::max(unit, std::min(kAccFloats / (chunk + 4) / unit * unit, round_up((N + num_threads() - 1) / num_threads())));
  const int64_t blocks = (N + cb - 1) / cb;
  split_work(blocks, R * N * K, [&](int64_t b0, int64_t b1) {
    // Four rows of w decoded at a time, so that an accumulator is loaded and stored once
    // per four products. K (w's rows here) is any size: the last step's missing rows are
    // zeros with zero coefficients, and nothing past w or a row of x is read.
    std::vector<float> buf(static_cast<size_t>(4 * cb));
    std::vector<float> acc(static_cast<size_t>(chunk * cb));
    vectorized([&] {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t c0 = b * cb, cols = std::min(N - c0, cb); // cols: a multiple of 16
        for (int64_t r0 = 0; r0 < R; r0 += kRowChunk) {
          const int64_t nr = std::min(R - r0, kRowChunk);
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t k = 0; k < K; k += 4) {
            const int kk = static_cast<int>(std::min<int64_t>(4, K - k));
            for (int j = 0; j < kk; ++j) decode_groups<S>(w, k + j, c0 / gs, (c0 + cols) / gs, buf.data() + j * cb);
            if (kk < 4) std::fill(buf.begin() + kk * cb, buf.end(), 0.0f);
            const float* b0p = buf.data();
            const float* b1p = b0p + cb;
            const float* b2p = b1p + cb;
            const float* b3p = b2p + cb;
            for (int64_t i = 0; i < nr; ++i) {
              const float* xi = rows.x[r0 + i] + k;
              const float a0 = xi[0], a1 = kk > 1 ? xi[1] : 0.0f, a2 = kk > 2 ? xi[2] : 0.0f,
                          a3 = kk > 3 ? xi[3] : 0.0f;
              float* ai = acc.data() + i * cb;
              for (int64_t c = 0; c < cols; c += kLanes) {
                f32x16 v = load<f32x16>(ai + c);
                v += a0 * load<f32x16>(b0p + c);
                v += a1 * load<f32x16>(b1p + c);
                v += a2 * load<f32x16>(b2p + c);
                v += a3 * load<f32x16>(b3p + c);
                store(ai + c, v);
              }
            }
          }
          for (int64_t i = 0; i < nr; ++i) {
            T* o = rows.out[r0 + i] + c0;
            const float* ai = acc.data() + i * cb;
            for (int64_t c = 0; c < cols; ++c) o[c] = static_cast<T>(ai[c]);
          }
        }
      }
    });
  });
}

/// x as float32 rows: the input's own memory when it is row-contiguous float32, else a
/// row-contiguous float32 copy (kept alive here).
struct FloatRows {
  array data;
  const float* p;
  explicit FloatRows(const array& x)
      : data(x.dtype() == float32 && x.flags().row_contiguous ? x : contiguous_copy(x, float32)),
        p(static_cast<const float*>(data.raw_data())) {}
};

/// The packed matrices of a (possibly batched) quantized weight {w, scales[, biases]}, each
/// made row-contiguous: matrix(e) is w[e] (e = 0 for a 2-D weight).
struct QWeights {
  QuantSpec spec;
  array w, scales;
  std::optional<array> biases;
  int64_t rows, words, groups, count;

  QWeights(const QuantSpec& s, const array& w_in, const array& scales_in, const array* biases_in)
      : spec(s),
        w(as_row_contiguous(w_in)),
        scales(as_row_contiguous(scales_in)),
        rows(w_in.shape(-2)),
        words(w_in.shape(-1)),
        groups(scales_in.shape(-1)),
        count(leading_count(w_in)) {
    if (biases_in) biases = as_row_contiguous(*biases_in);
  }

  // The number of matrices: the product of the axes before the last two (a weight with no
  // rows or no words still has its experts: dividing the size by the matrix's gave 1).
  static int64_t leading_count(const array& w_in) {
    int64_t n = 1;
    for (int i = 0; i + 2 < static_cast<int>(w_in.ndim()); ++i) n *= w_in.shape(i);
    return n;
  }

  QMatrix matrix(int64_t e) const {
    const int64_t wsz = rows * words, ssz = rows * groups;
    const size_t sbytes = scales.itemsize();
    QMatrix m;
    m.spec = spec;
    m.w = static_cast<const uint32_t*>(w.raw_data()) + e * wsz;
    m.scales = static_cast<const char*>(scales.raw_data()) + e * ssz * sbytes;
    m.biases = biases ? static_cast<const char*>(biases->raw_data()) + e * ssz * sbytes : nullptr;
    m.words = words;
    m.groups = groups;
    return m;
  }
};

/// Calls f.template operator()<T, S>() with T the output's element type and S the affine
/// scales' (T; uint8_t for the fp modes, whose scales are codes). T: float32, float16,
/// bfloat16 (float64 too: the kernel reads it through float32). Throws std::invalid_argument
/// naming op for other dtypes.
template <typename F>
void dispatch_qmm(Dtype out, const QuantSpec& spec, const char* op, F&& f) {
  dispatch_float_types(out, op, [&]<typename T>() {
    if (spec.mode == QuantMode::Affine) {
      f.template operator()<T, T>();
    } else {
      f.template operator()<T, uint8_t>();
    }
  });
}

/// The batch entries of a gathered product grouped by weight matrix: lhs[b] and rhs[b]
/// (checked against x's and w's batch extents), and the entries in runs of equal rhs
/// (order[runs[i]] .. order[runs[i + 1] - 1]), so that each w[e] is decoded once per run.
struct GatherPlan {
  std::vector<uint32_t> lhs, rhs;
  std::vector<int64_t> order;
  std::vector<int64_t> runs; // run starts in order, then order.size()
};

/// The plan of batch indices lhs, rhs (uint32 (B)); throws std::out_of_range naming op for
/// lhs[b] >= x_count or rhs[b] >= w_count (before any work). Entries are grouped stably by
/// rhs whether or not the node was told they are sorted. x_name, w_name: the operands as the
/// op calls them in its messages (gather_mm's a and b).
inline GatherPlan plan_gather(
    const array& lhs, const array& rhs, int64_t x_count, int64_t w_count, const char* op, const char* x_name = "x",
    const char* w_name = "w") {
  GatherPlan p;
  const auto read = [](const array& a) {
    const array c = a.dtype() == uint32 && a.flags().row_contiguous ? a : contiguous_copy(a, uint32);
    const auto* d = static_cast<const uint32_t*>(c.raw_data());
    return std::vector<uint32_t>(d, d + c.size());
  };
  p.lhs = read(lhs);
  p.rhs = read(rhs);
  const auto check = [&](const std::vector<uint32_t>& idx, int64_t n, const char* which, const char* axis) {
    for (size_t b = 0; b < idx.size(); ++b) {
      if (static_cast<int64_t>(idx[b]) >= n) [[unlikely]] {
        // The op hands the kernels uint32 indices (MLX's type): a negative index of 32 bits or
        // fewer arrives wrapped, a 64-bit one outside uint32 as its largest value.
        const bool wrapped = idx[b] >= (uint32_t(1) << 31);
        throw_out_of_range(
            op, which, " indices must lie in [0, ", n, ") (the first axis of ", axis, "); got ",
            std::to_string(idx[b]) +
                (wrapped ? " (indices are read as uint32: a negative i of 32 bits or fewer wraps to 2^32 + i, a "
                           "64-bit index outside [0, 2^32) reads as 2^32 - 1)"
                         : ""),
            " at batch entry ", b, ".");
      }
    }
  };
  check(p.lhs, x_count, "lhs", x_name);
  check(p.rhs, w_count, "rhs", w_name);
  const int64_t B = static_cast<int64_t>(p.rhs.size());
  p.order.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) p.order[b] = b;
  if (!std::is_sorted(p.rhs.begin(), p.rhs.end())) {
    std::stable_sort(p.order.begin(), p.order.end(), [&](int64_t a, int64_t b) { return p.rhs[a] < p.rhs[b]; });
  }
  for (int64_t i = 0; i < B; ++i) {
    if (i == 0 || p.rhs[p.order[i]] != p.rhs[p.order[i - 1]]) p.runs.push_back(i);
  }
  p.runs.push_back(B);
  return p;
}

/// Allocates out's buffer; returns false (nothing to compute) when it is empty.
inline bool allocate_output(array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  return out.size() != 0;
}

} // namespace nuvec::cpu::qdot
