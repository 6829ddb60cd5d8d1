// nuvec: GPU kernels of Rope and NormRope (rules and fallbacks in src/fast/rope.cpp and
// src/fast/norm_rope.cpp; the plan in src/backend/common/rope_plan.h and the element rules in
// src/backend/common/math/rope.h are the CPU loop's, so both round where the fallbacks round).
//
// x is read as [B, M, T, D] rows. The rows of one (b, t) share their angles across the M
// middle indices (heads), so a group of threads takes one (b, t) and a chunk of heads: each
// thread computes the angles of its units once and applies them to every head of the chunk.
// A row splits into units of 2W features whose W pairs have consecutive frequency indices
// u·W + k (rope_units): W = kVec<T> (two 16-byte vectors per unit) when the row splits into
// whole vectors, else W = 1 (the scalar path: any row, any alignment). Units are held as
// 32-bit words; half types compute on packed pairs (see "Half types" below).
// - rope_kernel: a group is one lane per unit (at most kThreads; wider rows loop).
// - norm_rope_kernel (NormRope with the norm): a group is G lanes of one warp, G a power of
//   two, each lane holding up to P units of the row; the row's sum of squares is reduced
//   over the G lanes (cu::warp_allreduce), then each unit is normalised, rotated and written
//   (to the output, or to the cache copy's rows).
// The chunk of heads is as large as keeps about two full waves of threads on the device.
// Offsets inside a row are 32-bit; row bases are 64-bit.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/common/math/reduce.h"
#include "backend/common/math/rope.h"
#include "backend/common/rope_plan.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/norm_rope.h"
#include "fast/rope.h"

namespace nuvec {

namespace {

/// Threads per block of both kernels.
constexpr int kThreads = 256;

/// Pointers and geometry of one launch: x's rows and the output's (the plan maps one to the
/// other), the weight (null: none), the frequencies (null: from the base), the offsets
/// (null: the plan's offset); the units of a row, the heads of a group's chunk, and the
/// groups (B·T·chunks; group g takes (b, t) = g mod B·T and chunk g / B·T).
template <typename T>
struct RopeArgs {
  const T* x;
  T* y;
  const T* w;
  const float* freqs;
  const int32_t* offsets;
  RopePlan p;
  int units;
  int chunk;
  int64_t groups;
};

/// A unit's two W-element vectors: features [a, a + W) are its elements 0..W-1 and
/// [b, b + W) its elements W..2W-1 (b >= d: absent, the last unit of an odd number of
/// vectors). Pair k of the unit is (k, W + k) in the halves layout and (2k, 2k + 1) in the
/// traditional one; units past the rotated ones (halves layout) hold features past dims.
struct RopeUnit {
  int a, b;
};

template <int W, bool kTrad>
__device__ __forceinline__ RopeUnit unit_of(int u, const RopePlan& p) {
  if (kTrad) return {2 * u * W, 2 * u * W + W};
  const int rotated = p.half / W;
  if (u < rotated) return {u * W, p.half + u * W};
  const int a = p.dims + (u - rotated) * 2 * W;
  return {a, a + W};
}

/// N elements of T held as 32-bit words (two halves share a register; a Vec of halves may
/// give each element its own register, which the row loops cannot afford). Element j is read
/// and written at a compile-time position after unrolling: a register extract or insert.
template <typename T, int N>
struct Words {
  static constexpr int kBytes = N * int(sizeof(T));
  uint32_t w[(kBytes + 3) / 4];
  __device__ __forceinline__ T get(int j) const {
    T r;
    memcpy(&r, reinterpret_cast<const char*>(w) + j * sizeof(T), sizeof(T));
    return r;
  }
  __device__ __forceinline__ void set(int j, T v) { memcpy(reinterpret_cast<char*>(w) + j * sizeof(T), &v, sizeof(T)); }
};

/// N elements at p (aligned to their size) as one load, or zeros when !present.
template <typename T, int N>
__device__ __forceinline__ Words<T, N> load_words(const T* p, bool present) {
  using Raw = typename cu::RawWord<Words<T, N>::kBytes>::type;
  Words<T, N> r{};
  if (present) {
    const Raw raw = __ldg(reinterpret_cast<const Raw*>(p));
    memcpy(r.w, &raw, sizeof(Raw));
  }
  return r;
}

template <typename T, int N>
__device__ __forceinline__ void store_words(T* p, const Words<T, N>& v) {
  using Raw = typename cu::RawWord<Words<T, N>::kBytes>::type;
  Raw raw;
  memcpy(&raw, v.w, sizeof(Raw));
  *reinterpret_cast<Raw*>(p) = raw;
}

/// The 2W elements of a unit: element j < W is lo's j, element W + j is hi's j.
template <typename T, int W>
struct UnitData {
  Words<T, W> lo, hi;
  __device__ __forceinline__ T get(int j) const { return j < W ? lo.get(j) : hi.get(j - W); }
  __device__ __forceinline__ void set(int j, T v) {
    if (j < W) lo.set(j, v);
    else hi.set(j - W, v);
  }
};

/// The unit's elements in `row` (an absent second vector reads as zeros).
template <typename T, int W>
__device__ __forceinline__ UnitData<T, W> load_unit(const T* row, RopeUnit un, int d) {
  return {load_words<T, W>(row + un.a, true), load_words<T, W>(row + un.b, un.b < d)};
}

template <typename T, int W>
__device__ __forceinline__ void store_unit(T* row, RopeUnit un, int d, const UnitData<T, W>& e) {
  store_words(row + un.a, e.lo);
  if (un.b < d) store_words(row + un.b, e.hi);
}

/// The rounded cos and sin of pair i at `position`. Not inlined: a thread computes its
/// angles once, before its row loop, and exp and sincos (with its slow path for large
/// angles) are long.
template <typename T>
__device__ __noinline__ math::RopeCosSin<T> pair_cos_sin(
    float position, int i, float log_base_over_half, const float* freqs) {
  return math::rope_cos_sin<T>(position, math::rope_inv_freq(i, log_base_over_half, freqs));
}

/// The rounded cos and sin of unit u's W pairs at `position` (pairs past dims/2: zeros,
/// unused).
template <typename T, int W>
struct UnitAngles {
  Words<T, W> c, s;
};

template <typename T, int W>
__device__ __forceinline__ UnitAngles<T, W> unit_angles(int u, float position, const RopeArgs<T>& q) {
  UnitAngles<T, W> a{};
#pragma unroll
  for (int k = 0; k < W; ++k) {
    const int i = u * W + k;
    if (i < q.p.half) {
      const auto cs = pair_cos_sin<T>(position, i, q.p.log_base_over_half, q.freqs);
      a.c.set(k, cs.c);
      a.s.set(k, cs.s);
    }
  }
  return a;
}

// ---- Half types: the unit's arithmetic on packed pairs ---------------------------------
// A word of a half-type unit holds two elements; the kernels compute on it with the two-lane
// instructions (__hmul2_rn, __hadd2, __hfma2, one conversion for two elements), which round
// exactly as math/rope.h's element rules do (the products are __hmul2_rn, which the compiler
// may not contract with the following add into an fma that would skip their rounding): a product of two half-type values is exact in
// float, so rounding it once equals the rule's float product then rounding; a sum of two
// such values is exact in float too, or its smaller term lies below 2^-13 of the larger,
// too far from a tie of the half type for float's rounding to change the result. (Checked
// on 2·10^7 random pairs of each type, products and differences.) The rules' float path
// costs a conversion per rounding: on the H200 it held the bf16 kernels at 40 to 60% of
// the memory bandwidth.

/// Whether T computes on packed pairs, and the pair type.
template <typename T>
inline constexpr bool kPacked = math::Half<T>;
template <typename T>
using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

template <typename T, int N>
__device__ __forceinline__ Pair<T> pair_at(const Words<T, N>& v, int i) {
  Pair<T> r;
  memcpy(&r, &v.w[i], sizeof(r));
  return r;
}
template <typename T, int N>
__device__ __forceinline__ void set_pair(Words<T, N>& v, int i, Pair<T> x) {
  memcpy(&v.w[i], &x, sizeof(x));
}

__device__ __forceinline__ float2 to_float2(__half2 v) { return __half22float2(v); }
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }

/// (a, b) rounded to the half type T (round to nearest even, as cast_to), one conversion.
template <typename T>
__device__ __forceinline__ Pair<T> round_pair(float a, float b) {
  if constexpr (std::is_same_v<T, __half>) return __floats2half2_rn(a, b);
  else return __floats2bfloat162_rn(a, b);
}

/// Pair i of a unit's words: word i of lo, then of hi.
template <typename T, int W>
__device__ __forceinline__ Pair<T> unit_pair(const UnitData<T, W>& e, int i) {
  return i < W / 2 ? pair_at(e.lo, i) : pair_at(e.hi, i - W / 2);
}
template <typename T, int W>
__device__ __forceinline__ void set_unit_pair(UnitData<T, W>& e, int i, Pair<T> x) {
  if (i < W / 2) set_pair(e.lo, i, x);
  else set_pair(e.hi, i - W / 2, x);
}

/// Rotates the pairs of unit u below dims/2 by their angles (math::rope_rotate's rounding).
template <typename T, int W, bool kTrad>
__device__ __forceinline__ void rotate_unit(UnitData<T, W>& e, int u, const UnitAngles<T, W>& a, const RopePlan& p) {
  if constexpr (kPacked<T> && W >= 2 && !kTrad) {
    // Word i of lo holds the first elements of pairs 2i, 2i + 1, word i of hi their second
    // ones, word i of c and s their angles: four products and two sums rotate two pairs.
    // The vector path rotates whole units (dims/2 a multiple of W).
    if (u * W >= p.half) return;
#pragma unroll
    for (int i = 0; i < W / 2; ++i) {
      const Pair<T> x1 = pair_at(e.lo, i), x2 = pair_at(e.hi, i), c = pair_at(a.c, i), s = pair_at(a.s, i);
      if (p.forward) {
        set_pair(e.lo, i, __hsub2(__hmul2_rn(x1, c), __hmul2_rn(x2, s)));
        set_pair(e.hi, i, __hadd2(__hmul2_rn(x1, s), __hmul2_rn(x2, c)));
      } else {
        set_pair(e.lo, i, __hadd2(__hmul2_rn(x2, s), __hmul2_rn(x1, c)));
        set_pair(e.hi, i, __hsub2(__hmul2_rn(x2, c), __hmul2_rn(x1, s)));
      }
    }
  } else if constexpr (kPacked<T> && W >= 2) {
    // Traditional: word k holds pair k (x1, x2). With a = (x1·c, x2·c) and b = (x2·s, x1·s)
    // (the halves of (x1·s, x2·s) swapped), forward is (a.lo − b.lo, a.hi + b.hi) and the
    // inverse (a.lo + b.lo, a.hi − b.hi): one fused multiply-add by (∓1, ±1), exact products.
    const Pair<T> sign = p.forward ? round_pair<T>(-1.0f, 1.0f) : round_pair<T>(1.0f, -1.0f);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if (u * W + k < p.half) {
        const Pair<T> x = unit_pair(e, k);
        const T c = a.c.get(k), s = a.s.get(k);
        const Pair<T> xc = __hmul2_rn(x, Pair<T>(c, c)), xs = __lowhigh2highlow(__hmul2_rn(x, Pair<T>(s, s)));
        set_unit_pair(e, k, __hfma2(xs, sign, xc));
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if (u * W + k < p.half) {
        const int j1 = kTrad ? 2 * k : k, j2 = kTrad ? 2 * k + 1 : W + k;
        T x1 = e.get(j1), x2 = e.get(j2);
        math::rope_rotate(x1, x2, math::RopeCosSin<T>{a.c.get(k), a.s.get(k)}, p.forward);
        e.set(j1, x1);
        e.set(j2, x2);
      }
    }
  }
}

/// The sum of squares of a unit's elements, in A.
template <typename T, int W, typename A = math::compute_t<T>>
__device__ __forceinline__ A unit_sum_sq(const UnitData<T, W>& e) {
  A ss = A(0);
  if constexpr (kPacked<T> && W >= 2) {
#pragma unroll
    for (int i = 0; i < W; ++i) {
      const float2 f = to_float2(unit_pair(e, i));
      ss += f.x * f.x;
      ss += f.y * f.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 2 * W; ++j) ss += cu::to_acc(e.get(j)) * cu::to_acc(e.get(j));
  }
  return ss;
}

/// A unit normalised by inv and scaled by the weight's unit w (when `weighted`):
/// math::rms_normalised's rounding.
template <typename T, int W, typename A = math::compute_t<T>>
__device__ __forceinline__ void normalise_unit(UnitData<T, W>& e, A inv, const UnitData<T, W>& w, bool weighted) {
  if constexpr (kPacked<T> && W >= 2) {
#pragma unroll
    for (int i = 0; i < W; ++i) {
      const float2 f = to_float2(unit_pair(e, i));
      Pair<T> v = round_pair<T>(f.x * inv, f.y * inv);
      if (weighted) v = __hmul2_rn(v, unit_pair(w, i));
      set_unit_pair(e, i, v);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 2 * W; ++j) e.set(j, math::rms_normalised(e.get(j), inv, w.get(j), weighted));
  }
}

/// Group g's (b, t), its first head and the position of its rows.
struct RopeGroup {
  int64_t b, t, m0;
  float position;
};

template <typename T>
__device__ __forceinline__ RopeGroup group_of(int64_t g, const RopeArgs<T>& q) {
  const RopePlan& p = q.p;
  const int64_t bt_count = p.batch * p.t_len;
  const int64_t chunk_index = g / bt_count, bt = g - chunk_index * bt_count;
  RopeGroup r;
  r.b = bt / p.t_len;
  r.t = bt - r.b * p.t_len;
  r.m0 = chunk_index * q.chunk;
  const int32_t offset = q.offsets ? q.offsets[p.per_batch_offset ? r.b : 0] : p.offset;
  r.position = math::rope_position(r.t, offset, p.scale);
  return r;
}

/// Rope (and NormRope without the norm): blocks of (lanes, groups per block) threads; lane
/// x of a group takes units x, x + lanes, ..., each over the chunk's heads, kRows heads at
/// a time (their loads all in flight before the first store).
template <typename T, int W, bool kTrad, int kRows, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) rope_kernel(const RopeArgs<T> q) {
  const RopePlan& p = q.p;
  const int64_t in_step = p.t_len * p.d, out_step = p.out_t_len * p.d;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; g < q.groups;
       g += int64_t(gridDim.x) * blockDim.y) {
    const RopeGroup grp = group_of(g, q);
    const int heads = q.chunk < p.heads - grp.m0 ? q.chunk : static_cast<int>(p.heads - grp.m0);
    for (int u = threadIdx.x; u < q.units; u += blockDim.x) {
      const RopeUnit un = unit_of<W, kTrad>(u, p);
      const auto angles = unit_angles<T, W>(u, grp.position, q);
      const T* xr = q.x + p.in_row(grp.b, grp.m0, grp.t) * p.d;
      T* yr = q.y + p.out_row(grp.b, grp.m0, grp.t) * p.d;
      for (int m = 0; m < heads; m += kRows, xr += kRows * in_step, yr += kRows * out_step) {
        UnitData<T, W> e[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (m + r < heads) e[r] = load_unit<T, W>(xr + r * in_step, un, p.d);
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (m + r < heads) {
            rotate_unit<T, W, kTrad>(e[r], u, angles, p);
            store_unit<T, W>(yr + r * out_step, un, p.d, e[r]);
          }
        }
      }
    }
  }
}

/// NormRope with the norm: blocks of (G, kThreads / G) threads, G a power of two <= 32, so
/// a group is G lanes of one warp; lane x holds units x + k·G (k < P), and kRows heads are
/// loaded and reduced together. Every lane of a warp runs the same iterations (groups past
/// the end and heads past the chunk's compute on zeros and store nothing), since the
/// statistic's shuffles need the whole warp.
template <typename T, int W, bool kTrad, int P, int kRows, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) norm_rope_kernel(const RopeArgs<T> q) {
  using A = math::compute_t<T>;
  const RopePlan& p = q.p;
  const int lanes = blockDim.x, lane = threadIdx.x;
  const int64_t in_step = p.t_len * p.d, out_step = p.out_t_len * p.d;
  for (int64_t g0 = int64_t(blockIdx.x) * blockDim.y; g0 < q.groups; g0 += int64_t(gridDim.x) * blockDim.y) {
    const int64_t g = g0 + threadIdx.y;
    const bool group_live = g < q.groups;
    const RopeGroup grp = group_of(group_live ? g : 0, q);
    const int heads = !group_live ? 0 : q.chunk < p.heads - grp.m0 ? q.chunk : static_cast<int>(p.heads - grp.m0);
    RopeUnit un[P];
    UnitAngles<T, W> angles[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int u = lane + k * lanes;
      un[k] = unit_of<W, kTrad>(u, p);
      angles[k] = unit_angles<T, W>(u, grp.position, q);
    }
    const T* xr = q.x + p.in_row(grp.b, grp.m0, grp.t) * p.d;
    T* yr = q.y + p.out_row(grp.b, grp.m0, grp.t) * p.d;
    for (int m = 0; m < q.chunk; m += kRows, xr += kRows * in_step, yr += kRows * out_step) {
      UnitData<T, W> e[kRows][P];
      A ss[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        ss[r] = A(0);
#pragma unroll
        for (int k = 0; k < P; ++k) {
          e[r][k] = UnitData<T, W>{};
          if (m + r < heads && lane + k * lanes < q.units) e[r][k] = load_unit<T, W>(xr + r * in_step, un[k], p.d);
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int k = 0; k < P; ++k) ss[r] += unit_sum_sq(e[r][k]);
        ss[r] = cu::warp_allreduce(ss[r], lanes, math::Combine<ReduceOp::Sum, A>{});
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const A inv = math::rms_inverse(ss[r], p.d, p.eps);
#pragma unroll
        for (int k = 0; k < P; ++k) {
          const int u = lane + k * lanes;
          if (m + r >= heads || u >= q.units) continue;
          UnitData<T, W> wv{};
          if (q.w) wv = load_unit<T, W>(q.w, un[k], p.d);
          normalise_unit(e[r][k], inv, wv, q.w != nullptr);
          rotate_unit<T, W, kTrad>(e[r][k], u, angles[k], p);
          store_unit<T, W>(yr + r * out_step, un[k], p.d, e[r][k]);
        }
      }
    }
  }
}

/// Heads per group: as many as keep about two full waves of `lanes`-thread groups on the
/// device (more heads per group compute fewer angles; fewer keep more threads), at least 1,
/// at most 64, balanced over the chunks.
int heads_per_group(const RopePlan& p, int lanes) {
  const auto& props = cu::device_props();
  const int64_t wave2 = 2LL * props.multiProcessorCount * props.maxThreadsPerMultiProcessor;
  const int64_t threads = p.batch * p.t_len * p.heads * lanes;
  const int64_t chunk = std::clamp<int64_t>(threads / wave2, 1, std::min<int64_t>(p.heads, 64));
  return static_cast<int>(cu::ceil_div(p.heads, cu::ceil_div(p.heads, chunk)));
}

/// Launches `kernel` over the groups in blocks of (lanes, kThreads / lanes) threads (the
/// resident-block count is the kernel's own: one static per instantiation).
template <auto kernel, typename T>
void launch_groups(RopeArgs<T> q, int lanes, const char* name) {
  q.chunk = heads_per_group(q.p, lanes);
  q.groups = q.p.batch * q.p.t_len * cu::ceil_div(q.p.heads, q.chunk);
  const int per_block = std::max(1, kThreads / lanes);
  static const int resident = cu::resident_blocks(kernel, kThreads);
  kernel<<<cu::grid_blocks(cu::ceil_div(q.groups, per_block), resident), dim3(lanes, per_block), 0, cu::stream()>>>(q);
  cu::check_launch(name);
}

/// Rope's kernel: heads per iteration and the blocks per SM it is built for (64 registers:
/// a half-type unit's loop over two heads takes 62). Measured on the H200 on bf16
/// [1, 32, 16384, 128] before the half types computed on packed pairs: 0.091 ms for two heads
/// in 64 registers, 0.093 for one head in 64, 0.097 for two heads in 85, 0.108 for four in 128.
constexpr int kRopeRows = 2, kRopeMinBlocks = 4;

template <typename T, int W, bool kTrad>
void launch_rope(RopeArgs<T> q) {
  q.units = rope_units(q.p.d, q.p.dims, kTrad, W);
  const int lanes = std::min(q.units, kThreads);
  launch_groups<rope_kernel<T, W, kTrad, kRopeRows, kRopeMinBlocks>>(q, lanes, "rope_kernel");
}

/// The norm's kernel with the fewest units per lane (P) that fit a row's units in a warp;
/// one unit a lane takes two heads at a time in 64 registers (4 blocks of 256 per SM, as
/// Rope's), more take one head in more registers (P units of 2W elements and their angles).
template <typename T, bool kTrad>
void launch_norm_rope(RopeArgs<T> q) {
  constexpr int W = cu::kVec<T>;
  q.units = rope_units(q.p.d, q.p.dims, kTrad, W);
  auto go = [&]<int P, int kRows, int kMinBlocks>() {
    static_assert(P <= kNormRopeUnitsPerLane);
    const int lanes = cu::pow2_at_least(cu::ceil_div(q.units, P), cu::kWarpSize);
    launch_groups<norm_rope_kernel<T, W, kTrad, P, kRows, kMinBlocks>>(q, lanes, "norm_rope_kernel");
  };
  if (q.units <= cu::kWarpSize) go.template operator()<1, 2, 4>();
  else if (q.units <= 2 * cu::kWarpSize) go.template operator()<2, 1, 2>();
  else go.template operator()<4, 1, 1>();
}

/// Calls f.template operator()<kTrad>() for the plan's layout.
template <typename F>
void with_layout(bool traditional, F&& f) {
  if (traditional) f.template operator()<true>();
  else f.template operator()<false>();
}

/// The rows of the plan from x (row-contiguous) into y (the output's device buffer): the
/// norm's kernel (the op records NormRope with the norm only where it fits), else Rope's
/// kernel on 16-byte vectors where the rows and pointers allow, else on elements.
void launch_rope_rows(const RopePlan& p, const array& x, void* y, const array* w, const array* freqs,
                      const int32_t* offsets) {
  cu::dispatch_device_float_types(x.dtype(), p.normalise ? "norm_rope" : "rope", [&]<typename T>() {
    constexpr int W = cu::kVec<T>;
    RopeArgs<T> q{};
    q.x = cu::device_ptr<T>(x);
    q.y = static_cast<T*>(y);
    q.w = w ? cu::device_ptr<T>(*w) : nullptr;
    q.freqs = freqs ? cu::device_ptr<float>(*freqs) : nullptr;
    q.offsets = offsets;
    q.p = p;
    const bool vectors = rope_vectors_fit(p.d, p.dims, p.traditional, W) && cu::is_aligned(q.x, 16) &&
        cu::is_aligned(q.y, 16) && (!q.w || cu::is_aligned(q.w, 16));
    with_layout(p.traditional, [&]<bool kTrad>() {
      if (p.normalise) launch_norm_rope<T, kTrad>(q);
      else if (vectors) launch_rope<T, W, kTrad>(q);
      else launch_rope<T, 1, kTrad>(q);
    });
  });
}

/// `a` itself when its first element is 16-byte aligned, else an aligned copy.
array aligned(const array& a) {
  return cu::is_aligned(cu::device_ptr(a), 16) ? a : cu::contiguous_copy(a);
}

} // namespace

void Rope::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cu::as_row_contiguous(inputs[0]), off = cu::as_row_contiguous(inputs[1]);
  const array freqs = inputs.size() > 2 ? cu::as_row_contiguous(inputs[2]) : off;
  void* dst = cu::alloc_output(outputs[0]);
  if (x.size() == 0) return;
  RopePlan p = plan(x.shape());
  p.per_batch_offset = off.size() > 1;
  launch_rope_rows(p, x, dst, nullptr, inputs.size() > 2 ? &freqs : nullptr, cu::device_ptr<int32_t>(off));
}

void NormRope::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& x0 = inputs[0];
  const bool has_freqs = inputs.size() > size_t(2 + cache_ + offsets_);
  if (x0.size() == 0 ||
      (normalise_ && !norm_rope_kernel_covers(x0.shape(3), dims_, traditional_, x0.itemsize()))) {
    cu::eval_on_host(*this, inputs, outputs); // the op records no such node
    return;
  }
  // The norm's kernel reads 16-byte vectors of x and w.
  const array x = aligned(cu::as_row_contiguous(x0));
  const array w = aligned(cu::as_row_contiguous(inputs[1]));
  const array freqs = has_freqs ? cu::as_row_contiguous(inputs[2]) : w;
  const array& cache = inputs.back();
  array& out = outputs[0];
  // A cache nothing else sees (the one this node replaces) is written in place.
  bool donated = false;
  void* dst = cache_ ? cu::donate_or_alloc_output(cache, out, &donated) : cu::alloc_output(out);
  RopePlan p = plan(x.shape(), cache_ ? cache.shape(2) : 0);
  if (cache_ && !donated) copy_kept_cache(cache, cu::device_ptr(cache), dst, offset_, x.shape(2), cu::copy_elements);
  const array off = offsets_ ? cu::as_row_contiguous(inputs.back()) : w;
  if (offsets_) p.per_batch_offset = off.size() > 1;
  launch_rope_rows(p, x, dst, w.ndim() == 1 ? &w : nullptr, has_freqs ? &freqs : nullptr,
                   offsets_ ? cu::device_ptr<int32_t>(off) : nullptr);
}

} // namespace nuvec
