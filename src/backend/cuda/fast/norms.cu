// nuvec: GPU kernels of the normalisation fused primitives (rules and fallbacks in
// src/fast/norms.cpp; semantics are the CPU kernels', src/backend/cpu/fast/norms.cpp):
// statistics in float (double for float64), rounding where the fallback graph rounds.
//
// One block per row (grid-stride over rows). Aligned rows (16-byte aligned, n a multiple of
// the vector width) up to BLOCK x kVpt vectors are held in registers as packed elements,
// BLOCK the smallest power of two from 32 to 512 that holds the row, in a register budget
// that keeps 1280-1536 threads an SM resident (the loads of many rows in flight is what
// reaches the copy bandwidth). Each element is read once, the statistics reduced across the
// block (device/warp.cuh), and each output written once. Unaligned and longer rows stream
// from global memory once per statistic and once for the output (the re-reads of a row
// mostly hit L2). Inputs whose rows are not dense and row-major are copied to that form
// first.
//
// The backward kernels (RmsNormVjp, LayerNormVjp) read x and g once per row from registers
// the same way (one vector a thread, blocks up to 1024) and write dx once; the parameter
// gradients are deterministic column sums of per-block partials (see "Backward" below).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cuda/copy.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/norms.h"

namespace nuvec {

namespace {

enum class Norm { Rms, AddRms, Layer };

/// Vectors per thread of the register-resident kernels.
constexpr int kVpt = 4;

struct Plus {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};

/// Pointers and sizes of one launch: rows of n elements at row * n; w, b either 1-d of n
/// elements or null (absent); r and h only for AddRms.
template <typename T>
struct NormArgs {
  const T* x;
  const T* r;
  const T* w;
  const T* b;
  T* h;
  T* y;
  int64_t rows;
  int64_t n;
  float eps;
  bool aligned; // every row, w and b 16-byte aligned and n % kVec<T> == 0
};

/// The output element of normalised value v (in A) at feature i: rounded, scaled by w and
/// shifted by b, each step rounded as the fallback does.
template <typename T, typename A>
__device__ __forceinline__ T finish(A v, const NormArgs<T>& p, int64_t i) {
  T y = cu::store_as<T>(v);
  if (p.w) y = cu::store_as<T>(cu::to_acc(y) * cu::to_acc(p.w[i]));
  if (p.b) y = cu::store_as<T>(cu::to_acc(y) + cu::to_acc(p.b[i]));
  return y;
}

/// Blocks per SM the register kernels ask the compiler to fit: 2048 threads (32 registers a
/// thread) for RmsNorm, 1536 (40) for LayerNorm's mean, 1280 (48) for AddRmsNorm's residual.
/// The row stays in registers as packed elements (cu::Packed, read with cu::acc_at).
/// Measured on the H200 (bf16 16384 x 4096 rms_norm, blocks of 128): 64 registers and 1024
/// threads an SM ran at 0.52 of the copy bandwidth, 40 and 1536 at 0.87; a hand-written bf16
/// kernel at 32 and 2048 at 0.94.
template <Norm kind, int BLOCK>
inline constexpr int kRegsBlocks = cu::min_blocks_for(kind == Norm::Rms ? 2048 : kind == Norm::Layer ? 1536 : 1280, BLOCK);

/// Register-resident rows, every row 16-byte aligned and n a multiple of the vector width:
/// thread `lane` holds vectors lane, lane + BLOCK, ... of its row (x, or h = x + r) as packed
/// elements, all loaded before the first reduction. Offsets inside a row are 32-bit.
template <typename T, Norm kind, int BLOCK, int VPT>
__global__ void __launch_bounds__(BLOCK, kRegsBlocks<kind, BLOCK>) norm_regs_kernel(const NormArgs<T> p) {
  using A = cu::device_acc_t<T>;
  constexpr int W = cu::kVec<T>;
  __shared__ A buf[BLOCK / 32];
  const int lane = threadIdx.x;
  const int nv = static_cast<int>(p.n / W); // vectors per row
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t off = row * p.n;
    cu::Packed<T, W> v[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int i = k * BLOCK + lane;
      if (i < nv) v[k] = cu::load_packed<W, cu::Load::ReadOnly>(p.x + off + i * W);
      else memset(&v[k], 0, sizeof(v[k])); // zero bits: +0 in every float type
    }
    if constexpr (kind == Norm::AddRms) {
      // h = x + r, rounded, stored, and normalised in place of x.
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
        const int i = k * BLOCK + lane;
        if (i < nv) {
          const auto rv = cu::load_vec<W, cu::Load::ReadOnly>(p.r + off + i * W);
          cu::Vec<T, W> h;
#pragma unroll
          for (int j = 0; j < W; ++j) h[j] = cu::store_as<T>(cu::acc_at(v[k], j) + cu::to_acc(rv[j]));
          cu::store_vec<W>(p.h + off + i * W, h);
          memcpy(&v[k], &h, sizeof(h));
        }
      }
    }
    A mean = A(0);
    if constexpr (kind == Norm::Layer) {
      A s = A(0);
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
#pragma unroll
        for (int j = 0; j < W; ++j) s += cu::acc_at(v[k], j);
      }
      mean = cu::block_allreduce(s, Plus{}, buf) / A(p.n);
    }
    A ss = A(0);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      // Padding vectors hold zeros: they add nothing to Rms's sum, but x - mean for Layer.
      if (kind != Norm::Layer || k * BLOCK + lane < nv) {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A c = cu::acc_at(v[k], j) - mean;
          ss += c * c;
        }
      }
    }
    const A inv = A(1) / ::sqrt(cu::block_allreduce(ss, Plus{}, buf) / A(p.n) + A(p.eps));
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int i = k * BLOCK + lane;
      if (i < nv) {
        cu::Vec<T, W> out;
#pragma unroll
        for (int j = 0; j < W; ++j) out[j] = cu::store_as<T>((cu::acc_at(v[k], j) - mean) * inv);
        if (p.w) {
          const auto wv = cu::load_vec<W, cu::Load::ReadOnly>(p.w + i * W);
#pragma unroll
          for (int j = 0; j < W; ++j) out[j] = cu::store_as<T>(cu::to_acc(out[j]) * cu::to_acc(wv[j]));
        }
        if (p.b) {
          const auto bv = cu::load_vec<W, cu::Load::ReadOnly>(p.b + i * W);
#pragma unroll
          for (int j = 0; j < W; ++j) out[j] = cu::store_as<T>(cu::to_acc(out[j]) + cu::to_acc(bv[j]));
        }
        cu::store_vec<W>(p.y + off + i * W, out);
      }
    }
  }
}

/// Rows longer than the registers hold: one pass per statistic and one for the output.
template <typename T, Norm kind, int BLOCK>
__global__ void __launch_bounds__(BLOCK) norm_looped_kernel(const NormArgs<T> p) {
  using A = cu::device_acc_t<T>;
  __shared__ A buf[BLOCK / 32];
  const int64_t n = p.n;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    // The row the statistics read: x, or h = x + r written by the first pass.
    const T* src = p.x + row * n;
    if constexpr (kind == Norm::AddRms) {
      for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
        p.h[row * n + i] = cu::store_as<T>(cu::to_acc(src[i]) + cu::to_acc(p.r[row * n + i]));
      }
      __syncthreads(); // this block's writes of h are visible to its own later reads
      src = p.h + row * n;
    }
    A mean = A(0);
    if constexpr (kind == Norm::Layer) {
      A s = A(0);
      for (int64_t i = threadIdx.x; i < n; i += BLOCK) s += cu::to_acc(src[i]);
      mean = cu::block_allreduce(s, Plus{}, buf) / A(n);
    }
    A ss = A(0);
    for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
      const A c = cu::to_acc(src[i]) - mean;
      ss += c * c;
    }
    const A inv = A(1) / ::sqrt(cu::block_allreduce(ss, Plus{}, buf) / A(n) + A(p.eps));
    T* yr = p.y + row * n;
    for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
      yr[i] = finish<T, A>((cu::to_acc(src[i]) - mean) * inv, p, i);
    }
  }
}

template <typename T, Norm kind, int BLOCK, int VPT>
void launch_regs(const NormArgs<T>& p) {
  static const int resident = cu::resident_blocks(norm_regs_kernel<T, kind, BLOCK, VPT>, BLOCK);
  norm_regs_kernel<T, kind, BLOCK, VPT><<<cu::grid_blocks(p.rows, resident), BLOCK, 0, cu::stream()>>>(p);
  cu::check_launch("norm_regs_kernel");
}

/// Aligned rows: the smallest block (32 to 512 threads) whose threads hold the row in kVpt
/// vectors each. Unaligned rows (n not a multiple of the vector width, or a pointer off a
/// 16-byte boundary) and longer rows stream.
template <typename T, Norm kind>
void launch_norm(const NormArgs<T>& p) {
  constexpr int64_t W = cu::kVec<T>;
  const int64_t vecs = p.aligned ? p.n / W : std::numeric_limits<int64_t>::max();
  if (vecs <= 32 * kVpt) return launch_regs<T, kind, 32, kVpt>(p);
  if (vecs <= 64 * kVpt) return launch_regs<T, kind, 64, kVpt>(p);
  if (vecs <= 128 * kVpt) return launch_regs<T, kind, 128, kVpt>(p);
  if (vecs <= 256 * kVpt) return launch_regs<T, kind, 256, kVpt>(p);
  if (vecs <= 512 * kVpt) return launch_regs<T, kind, 512, kVpt>(p);
  // (Blocks of 1024 would hold rows up to twice as long; not yet measured on the H200.)
  constexpr int kBlock = 512;
  static const int resident = cu::resident_blocks(norm_looped_kernel<T, kind, kBlock>, kBlock);
  norm_looped_kernel<T, kind, kBlock><<<cu::grid_blocks(p.rows, resident), kBlock, 0, cu::stream()>>>(p);
  cu::check_launch("norm_looped_kernel");
}

/// The device pointer of a 1-d parameter, or null for the 0-d "absent" one.
template <typename T>
const T* param_ptr(const array& a) {
  return a.ndim() == 0 ? nullptr : cu::device_ptr<T>(a);
}

template <Norm kind>
void run_norm(
    const char* op,
    const array& x_in,
    const array* r_in,
    const array& w_in,
    const array* b_in,
    array* h_out,
    array& y_out,
    float eps) {
  const array x = cu::as_row_contiguous(x_in);
  const array r = r_in ? cu::as_row_contiguous(*r_in) : x;
  const array w = cu::as_row_contiguous(w_in);
  const array b = b_in ? cu::as_row_contiguous(*b_in) : w;
  void* yp = cu::alloc_output(y_out);
  void* hp = h_out ? cu::alloc_output(*h_out) : nullptr;
  if (y_out.size() == 0) return;
  cu::dispatch_device_float_types(x.dtype(), op, [&]<typename T>() {
    NormArgs<T> p{};
    p.x = cu::device_ptr<T>(x);
    p.r = r_in ? cu::device_ptr<T>(r) : nullptr;
    p.w = param_ptr<T>(w);
    p.b = b_in ? param_ptr<T>(b) : nullptr;
    p.h = static_cast<T*>(hp);
    p.y = static_cast<T*>(yp);
    p.n = x.shape(-1);
    p.rows = static_cast<int64_t>(x.size()) / p.n;
    p.eps = eps;
    auto ok = [](const void* q) { return q == nullptr || cu::is_aligned(q, 16); };
    p.aligned = p.n % cu::kVec<T> == 0 && ok(p.x) && ok(p.r) && ok(p.w) && ok(p.b) && ok(p.h) && ok(p.y);
    launch_norm<T, kind>(p);
  });
}


// ---------------------------------------------------------------------------------------
// Backward: dx per row, and the parameter gradients as deterministic column sums.
//
// A grid of G = min(rows, resident blocks) blocks (one wave, fixed for a device and build)
// takes rows blockIdx.x, + G, ... in order; each thread owns the same columns of every row it takes, so it accumulates their
// dw (and db) terms in registers (or, for rows longer than the registers hold, in its
// block's row of the partial buffer, which no other thread touches). A second kernel adds
// the G partial rows column by column in block order. Both orders are fixed, so the result
// does not depend on scheduling: repeated runs agree bit for bit.

template <typename T>
struct VjpArgs {
  const T* x;
  const T* w; // null: absent (scale 1)
  const T* g;
  T* dx;
  cu::device_acc_t<T>* pw; // G x n partials of dw (in the accumulator type), or null when w is absent
  cu::device_acc_t<T>* pb; // G x n partials of db (LayerNorm with a bias), or null
  int64_t rows;
  int64_t n;
  float eps;
  bool aligned;
};

template <typename A>
struct Sums3 {
  A a, b, c;
};
struct Plus3 {
  template <typename A>
  __device__ __forceinline__ Sums3<A> operator()(Sums3<A> u, const Sums3<A>& v) const {
    return {u.a + v.a, u.b + v.b, u.c + v.c};
  }
};

/// Blocks per SM of the register backward kernel: 1280 threads (at most 48 registers a
/// thread) for RmsNorm, 1024 (64) for LayerNorm's second set of partials; room for x, g, w,
/// the next row's x and g and the parameter-gradient partials of one vector each.
template <bool kLayer, int BLOCK>
inline constexpr int kVjpBlocks = cu::min_blocks_for(kLayer ? 1024 : 1280, BLOCK);

/// Register-resident backward rows, aligned as for norm_regs_kernel: thread `lane` holds
/// vectors lane, lane + BLOCK, ... of x and g (packed), and w's vectors for every row it
/// takes. kLayer: LayerNorm's formulas, else RmsNorm's.
template <typename T, bool kLayer, int BLOCK, int VPT>
__global__ void __launch_bounds__(BLOCK, kVjpBlocks<kLayer, BLOCK>) norm_vjp_regs_kernel(const VjpArgs<T> p) {
  using A = cu::device_acc_t<T>;
  constexpr int W = cu::kVec<T>;
  __shared__ A buf1[BLOCK / 32];
  __shared__ Sums3<A> buf3[BLOCK / 32];
  const int lane = threadIdx.x;
  const int nv = static_cast<int>(p.n / W);
  // Parameter-gradient partials of the thread's columns (db only for LayerNorm), and w
  // (ones when absent, so w·g is g exactly).
  A dw[VPT][W], db[kLayer ? VPT : 1][kLayer ? W : 1];
  cu::Packed<T, W> wv[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = k * BLOCK + lane;
    if (p.w && i < nv) {
      wv[k] = cu::load_packed<W, cu::Load::ReadOnly>(p.w + i * W);
    } else {
      cu::Vec<T, W> ones;
#pragma unroll
      for (int j = 0; j < W; ++j) ones[j] = T(1.0f);
      memcpy(&wv[k], &ones, sizeof(ones));
    }
#pragma unroll
    for (int j = 0; j < W; ++j) {
      dw[k][j] = A(0);
      if constexpr (kLayer) db[k][j] = A(0);
    }
  }
  // x and g of row `r` into (xs, gs); padding vectors hold zero bits (+0 in every type).
  const auto load_row = [&](int64_t r, cu::Packed<T, W>* xs, cu::Packed<T, W>* gs) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int i = k * BLOCK + lane;
      if (i < nv) {
        xs[k] = cu::load_packed<W, cu::Load::ReadOnly>(p.x + r * p.n + i * W);
        gs[k] = cu::load_packed<W, cu::Load::ReadOnly>(p.g + r * p.n + i * W);
      } else {
        memset(&xs[k], 0, sizeof(xs[k]));
        memset(&gs[k], 0, sizeof(gs[k]));
      }
    }
  };
  // The grid is one wave (every block loops over rows): the next row's loads are issued
  // before this row's reductions, so that loads stay in flight while the block computes.
  cu::Packed<T, W> xn[VPT], gn[VPT];
  if (blockIdx.x < p.rows) load_row(blockIdx.x, xn, gn);
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t off = row * p.n;
    cu::Packed<T, W> xv[VPT], gv[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      xv[k] = xn[k];
      gv[k] = gn[k];
    }
    if (row + gridDim.x < p.rows) load_row(row + gridDim.x, xn, gn);
    // Padding vectors hold x = g = 0: they add nothing to the sums of x, and the sums of
    // c = x - mean skip them.
    A mean = A(0);
    if constexpr (kLayer) {
      A s = A(0);
#pragma unroll
      for (int k = 0; k < VPT; ++k) {
#pragma unroll
        for (int j = 0; j < W; ++j) s += cu::acc_at(xv[k], j);
      }
      mean = cu::block_allreduce(s, Plus{}, buf1) / A(p.n);
    }
    // a: sum of c², b: sum of w·g, c: sum of w·g·c, with c = x - mean (x for RmsNorm).
    Sums3<A> t{A(0), A(0), A(0)};
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      if (k * BLOCK + lane < nv) {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A c = cu::acc_at(xv[k], j) - mean;
          const A wg = cu::acc_at(gv[k], j) * cu::acc_at(wv[k], j);
          t.a += c * c;
          t.b += wg;
          t.c += wg * c;
        }
      }
    }
    t = cu::block_allreduce(t, Plus3{}, buf3);
    const A inv = A(1) / ::sqrt(t.a / A(p.n) + A(p.eps));
    const A mwg = kLayer ? t.b / A(p.n) : A(0);
    const A k3 = t.c / A(p.n) * inv * inv * inv;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int i = k * BLOCK + lane;
      if (i < nv) {
        cu::Vec<T, W> out;
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const A c = cu::acc_at(xv[k], j) - mean;
          const A gj = cu::acc_at(gv[k], j);
          out[j] = cu::store_as<T>((gj * cu::acc_at(wv[k], j) - mwg) * inv - c * k3);
          dw[k][j] += gj * c * inv;
          if constexpr (kLayer) db[k][j] += gj;
        }
        cu::store_vec<W>(p.dx + off + i * W, out);
      }
    }
  }
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = k * BLOCK + lane;
    if (i < nv) {
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (p.pw) p.pw[blockIdx.x * p.n + i * W + j] = dw[k][j];
        if constexpr (kLayer) {
          if (p.pb) p.pb[blockIdx.x * p.n + i * W + j] = db[k][j];
        }
      }
    }
  }
}

/// Backward rows longer than the registers hold: passes over global memory; each thread's
/// parameter partials live in its block's row of the partial buffers.
template <typename T, bool kLayer, int BLOCK>
__global__ void __launch_bounds__(BLOCK) norm_vjp_looped_kernel(const VjpArgs<T> p) {
  using A = cu::device_acc_t<T>;
  __shared__ A buf1[BLOCK / 32];
  __shared__ Sums3<A> buf3[BLOCK / 32];
  const int64_t n = p.n;
  for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
    if (p.pw) p.pw[blockIdx.x * n + i] = A(0);
    if (p.pb) p.pb[blockIdx.x * n + i] = A(0);
  }
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* xr = p.x + row * n;
    const T* gr = p.g + row * n;
    A mean = A(0);
    if constexpr (kLayer) {
      A s = A(0);
      for (int64_t i = threadIdx.x; i < n; i += BLOCK) s += cu::to_acc(xr[i]);
      mean = cu::block_allreduce(s, Plus{}, buf1) / A(n);
    }
    Sums3<A> t{A(0), A(0), A(0)};
    for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
      const A c = cu::to_acc(xr[i]) - mean;
      const A wg = cu::to_acc(gr[i]) * (p.w ? cu::to_acc(p.w[i]) : A(1));
      t.a += c * c;
      t.b += wg;
      t.c += wg * c;
    }
    t = cu::block_allreduce(t, Plus3{}, buf3);
    const A inv = A(1) / ::sqrt(t.a / A(n) + A(p.eps));
    const A mwg = kLayer ? t.b / A(n) : A(0);
    const A k3 = t.c / A(n) * inv * inv * inv;
    for (int64_t i = threadIdx.x; i < n; i += BLOCK) {
      const A c = cu::to_acc(xr[i]) - mean;
      const A gj = cu::to_acc(gr[i]);
      const A wg = gj * (p.w ? cu::to_acc(p.w[i]) : A(1));
      p.dx[row * n + i] = cu::store_as<T>((wg - mwg) * inv - c * k3);
      if (p.pw) p.pw[blockIdx.x * n + i] += gj * c * inv;
      if (p.pb) p.pb[blockIdx.x * n + i] += gj;
    }
  }
}

/// Columns and row groups of one column_sum_kernel block.
constexpr int kSumCols = 32, kSumGroups = 8;

/// out[j] = sum over the G partial rows of partial[b * n + j], deterministic: a block takes
/// kSumCols columns; its kSumGroups warps sum the rows b = group, group + kSumGroups, ... in
/// order (coalesced across the warp's columns), then one warp adds the groups' sums in group
/// order. (One thread per column summing all G rows ran at a sixth of this on the H200.)
template <typename T>
__global__ void __launch_bounds__(kSumCols * kSumGroups)
    column_sum_kernel(const cu::device_acc_t<T>* partial, T* out, int64_t blocks, int64_t n) {
  using A = cu::device_acc_t<T>;
  __shared__ A sums[kSumGroups][kSumCols + 1];
  const int c = threadIdx.x % kSumCols, group = threadIdx.x / kSumCols;
  const int64_t j = int64_t(blockIdx.x) * kSumCols + c;
  A s = 0;
  if (j < n) {
    for (int64_t b = group; b < blocks; b += kSumGroups) s += partial[b * n + j];
  }
  sums[group][c] = s;
  __syncthreads();
  if (group == 0 && j < n) {
    A r = sums[0][c];
    for (int g = 1; g < kSumGroups; ++g) r += sums[g][c];
    out[j] = cu::store_as<T>(r);
  }
}

/// Launches the backward kernel (the register one with BLOCK threads of VPT vectors, or the
/// streaming one) on min(rows, its resident blocks) blocks (one full wave: every block loops
/// over the same number of rows, give or take one; the count is fixed per kernel for a device
/// and build, so the partial sums always combine the same way), first allocating the partial
/// buffers p marks as wanted (non-null) for that grid. Returns the grid.
template <typename T, bool kLayer, int BLOCK, int VPT, bool kLooped>
int64_t launch_one_wave(VjpArgs<T>& p) {
  const auto kernel = [] {
    if constexpr (kLooped) return &norm_vjp_looped_kernel<T, kLayer, BLOCK>;
    else return &norm_vjp_regs_kernel<T, kLayer, BLOCK, VPT>;
  }();
  static const int resident = cu::resident_blocks(kernel, BLOCK); // one per kernel
  const int64_t grid = std::min<int64_t>(p.rows, resident);
  using A = cu::device_acc_t<T>;
  const size_t bytes = sizeof(A) * size_t(p.n) * size_t(grid);
  if (p.pw) p.pw = static_cast<A*>(cu::scratch(bytes));
  if (p.pb) p.pb = static_cast<A*>(cu::scratch(bytes));
  kernel<<<static_cast<unsigned>(grid), BLOCK, 0, cu::stream()>>>(p);
  cu::check_launch("norm_vjp_kernel");
  return grid;
}

/// Aligned rows up to 1024 vectors: one vector per thread in the smallest block that holds
/// the row (measured on the H200 for bf16 rows of 4096: blocks of 512 threads of one vector
/// beat 128 threads of four, which need twice the registers for the partials); other rows
/// stream.
template <typename T, bool kLayer>
int64_t launch_vjp(VjpArgs<T>& p) {
  constexpr int64_t W = cu::kVec<T>;
  const int64_t vecs = p.aligned ? p.n / W : std::numeric_limits<int64_t>::max();
  if (vecs <= 32) return launch_one_wave<T, kLayer, 32, 1, false>(p);
  if (vecs <= 64) return launch_one_wave<T, kLayer, 64, 1, false>(p);
  if (vecs <= 128) return launch_one_wave<T, kLayer, 128, 1, false>(p);
  if (vecs <= 256) return launch_one_wave<T, kLayer, 256, 1, false>(p);
  if (vecs <= 512) return launch_one_wave<T, kLayer, 512, 1, false>(p);
  if (vecs <= 1024) return launch_one_wave<T, kLayer, 1024, 1, false>(p);
  return launch_one_wave<T, kLayer, 512, 1, true>(p);
}

template <bool kLayer>
void run_norm_vjp(
    const char* op,
    const array& x_in,
    const array& w_in,
    const array* b_in,
    const array& g_in,
    std::vector<array>& outputs,
    float eps) {
  const array x = cu::as_row_contiguous(x_in), g = cu::as_row_contiguous(g_in), w = cu::as_row_contiguous(w_in);
  void* dxp = cu::alloc_output(outputs[0]);
  void* dwp = cu::alloc_output(outputs[1]);
  void* dbp = kLayer ? cu::alloc_output(outputs[2]) : nullptr;
  if (x.size() == 0) {
    // No rows (or empty rows): dx is empty, the parameter gradients are sums of nothing.
    NUVEC_CUDA_CHECK(cudaMemsetAsync(dwp, 0, outputs[1].nbytes(), cu::stream()));
    if (kLayer) NUVEC_CUDA_CHECK(cudaMemsetAsync(dbp, 0, outputs[2].nbytes(), cu::stream()));
    return;
  }
  cu::dispatch_device_float_types(x.dtype(), op, [&]<typename T>() {
    VjpArgs<T> p{};
    p.x = cu::device_ptr<T>(x);
    p.g = cu::device_ptr<T>(g);
    p.w = param_ptr<T>(w);
    p.dx = static_cast<T*>(dxp);
    p.n = x.shape(-1);
    p.rows = static_cast<int64_t>(x.size()) / p.n;
    p.eps = eps;
    const bool want_w = w.ndim() == 1, want_b = kLayer && b_in->ndim() == 1;
    // Non-null marks a wanted partial buffer; launch_vjp allocates it for its grid.
    using A = cu::device_acc_t<T>;
    static A marker;
    p.pw = want_w ? &marker : nullptr;
    p.pb = want_b ? &marker : nullptr;
    auto ok = [](const void* q) { return q == nullptr || cu::is_aligned(q, 16); };
    p.aligned = p.n % cu::kVec<T> == 0 && ok(p.x) && ok(p.g) && ok(p.w) && ok(p.dx);
    const int64_t blocks = launch_vjp<T, kLayer>(p);
    const auto cgrid = static_cast<unsigned>(cu::ceil_div(p.n, kSumCols));
    // Absent parameters get the 0-d zero gradient.
    if (want_w) {
      column_sum_kernel<T><<<cgrid, kSumCols * kSumGroups, 0, cu::stream()>>>(p.pw, static_cast<T*>(dwp), blocks, p.n);
    } else {
      NUVEC_CUDA_CHECK(cudaMemsetAsync(dwp, 0, outputs[1].nbytes(), cu::stream()));
    }
    if (kLayer) {
      if (want_b) {
        column_sum_kernel<T><<<cgrid, kSumCols * kSumGroups, 0, cu::stream()>>>(p.pb, static_cast<T*>(dbp), blocks, p.n);
      } else {
        NUVEC_CUDA_CHECK(cudaMemsetAsync(dbp, 0, outputs[2].nbytes(), cu::stream()));
      }
    }
    cu::check_launch("column_sum_kernel");
  });
}

} // namespace

void RmsNorm::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_norm<Norm::Rms>("rms_norm", inputs[0], nullptr, inputs[1], nullptr, nullptr, outputs[0], eps_);
}

void AddRmsNorm::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_norm<Norm::AddRms>(
      "add_rms_norm", inputs[0], &inputs[1], inputs[2], nullptr, &outputs[0], outputs[1], eps_);
}

void LayerNorm::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_norm<Norm::Layer>("layer_norm", inputs[0], nullptr, inputs[1], &inputs[2], nullptr, outputs[0], eps_);
}

void RmsNormVjp::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_norm_vjp<false>("rms_norm", inputs[0], inputs[1], nullptr, inputs[2], outputs, eps_);
}

void LayerNormVjp::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  run_norm_vjp<true>("layer_norm", inputs[0], inputs[1], &inputs[2], inputs[3], outputs, eps_);
}

} // namespace nuvec
