// nuvec: GPU kernels of the normalisation fused primitives (rules and fallbacks in
// src/fast/norms.cpp; semantics are the CPU kernels', src/backend/cpu/fast/norms.cpp):
// statistics in float (double for float64), rounding where the fallback graph rounds.
//
// One block per row (grid-stride over rows). Rows up to BLOCK * kVpt vectors are held in
// registers: each element is read once, the statistics reduced across the block
// (device/warp.cuh), and each output written once; the block size is the smallest power of
// two from 32 to 1024 that holds the row. Longer rows stream from global memory once per
// statistic and once for the output (the re-reads of a row mostly hit L2). Inputs whose rows
// are not dense and row-major are copied to that form first.
//
// The backward kernels (RmsNormVjp, LayerNormVjp) read x and g once per row from registers
// the same way and write dx once; the parameter gradients are deterministic column sums of
// per-block partials (see "Backward" below).
#include <algorithm>
#include <cstdint>

#include "backend/cuda/copy.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/norms.h"

namespace nuvec {

namespace {

enum class Norm { Rms, AddRms, Layer };

/// Vectors per thread of the register-resident kernel.
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

/// Register-resident rows: thread `lane` holds vectors lane, lane + BLOCK, ... of its row.
template <typename T, Norm kind, int BLOCK>
__global__ void __launch_bounds__(BLOCK) norm_regs_kernel(const NormArgs<T> p) {
  using A = cu::device_acc_t<T>;
  constexpr int W = cu::kVec<T>;
  __shared__ A buf[BLOCK / 32];
  const int lane = threadIdx.x;
  const int64_t n = p.n;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* xr = p.x + row * n;
    A v[kVpt][W];
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t base = (int64_t(k) * BLOCK + lane) * W;
      if (p.aligned && base < n) {
        const auto xv = cu::load_vec<W, cu::Load::ReadOnly>(xr + base);
        if constexpr (kind == Norm::AddRms) {
          const auto rv = cu::load_vec<W, cu::Load::ReadOnly>(p.r + row * n + base);
          cu::Vec<T, W> hv;
#pragma unroll
          for (int j = 0; j < W; ++j) {
            hv[j] = cu::store_as<T>(cu::to_acc(xv[j]) + cu::to_acc(rv[j]));
            v[k][j] = cu::to_acc(hv[j]);
          }
          cu::store_vec<W>(p.h + row * n + base, hv);
        } else {
#pragma unroll
          for (int j = 0; j < W; ++j) v[k][j] = cu::to_acc(xv[j]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const int64_t i = base + j;
          A a = A(0);
          if (!p.aligned && i < n) {
            if constexpr (kind == Norm::AddRms) {
              const T h = cu::store_as<T>(cu::to_acc(xr[i]) + cu::to_acc(p.r[row * n + i]));
              p.h[row * n + i] = h;
              a = cu::to_acc(h);
            } else {
              a = cu::to_acc(xr[i]);
            }
          }
          v[k][j] = a; // padding slots hold 0: they add nothing to the sums
        }
      }
    }
    A mean = A(0);
    if constexpr (kind == Norm::Layer) {
      A s = A(0);
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
#pragma unroll
        for (int j = 0; j < W; ++j) s += v[k][j];
      }
      mean = cu::block_allreduce(s, Plus{}, buf) / A(n);
    }
    A ss = A(0);
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t base = (int64_t(k) * BLOCK + lane) * W;
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (base + j < n) {
          const A c = v[k][j] - mean;
          ss += c * c;
        }
      }
    }
    const A inv = A(1) / ::sqrt(cu::block_allreduce(ss, Plus{}, buf) / A(n) + A(p.eps));
    T* yr = p.y + row * n;
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t base = (int64_t(k) * BLOCK + lane) * W;
      if (p.aligned) {
        if (base < n) {
          cu::Vec<T, W> out;
#pragma unroll
          for (int j = 0; j < W; ++j) out[j] = finish<T, A>((v[k][j] - mean) * inv, p, base + j);
          cu::store_vec<W>(yr + base, out);
        }
      } else {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          if (base + j < n) yr[base + j] = finish<T, A>((v[k][j] - mean) * inv, p, base + j);
        }
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

template <typename T, Norm kind, int BLOCK>
void launch_regs(const NormArgs<T>& p) {
  static const int resident = cu::resident_blocks(norm_regs_kernel<T, kind, BLOCK>, BLOCK);
  norm_regs_kernel<T, kind, BLOCK><<<cu::grid_blocks(p.rows, resident), BLOCK, 0, cu::stream()>>>(p);
  cu::check_launch("norm_regs_kernel");
}

template <typename T, Norm kind>
void launch_norm(const NormArgs<T>& p) {
  constexpr int64_t W = cu::kVec<T>;
  const int64_t vecs = (p.n + W - 1) / W;
  if (vecs <= 32 * kVpt) return launch_regs<T, kind, 32>(p);
  if (vecs <= 64 * kVpt) return launch_regs<T, kind, 64>(p);
  if (vecs <= 128 * kVpt) return launch_regs<T, kind, 128>(p);
  if (vecs <= 256 * kVpt) return launch_regs<T, kind, 256>(p);
  if (vecs <= 512 * kVpt) return launch_regs<T, kind, 512>(p);
  if (vecs <= 1024 * kVpt && sizeof(T) < 8) return launch_regs<T, kind, 1024>(p);
  constexpr int kBlock = 512;
  static const int resident = cu::resident_blocks(norm_looped_kernel<T, kind, kBlock>, kBlock);
  norm_looped_kernel<T, kind, kBlock><<<cu::grid_blocks(p.rows, resident), kBlock, 0, cu::stream()>>>(p);
  cu::check_launch("norm_looped_kernel");
}

/// a row-major and dense on the device (a copy when it is not).
array dense(const array& a) {
  return a.flags().row_contiguous ? a : cu::contiguous_copy(a);
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
  const array x = dense(x_in);
  const array r = r_in ? dense(*r_in) : x;
  const array w = dense(w_in);
  const array b = b_in ? dense(*b_in) : w;
  void* yp = cu::alloc_output(y_out);
  void* hp = h_out ? cu::alloc_output(*h_out) : nullptr;
  if (y_out.size() == 0) return;
  cu::dispatch_device_types(x.dtype(), [&]<typename T>() {
    if constexpr (cu::is_float_device_v<T>) {
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
    } else {
      throw std::invalid_argument(std::string("[") + op + "] the kernel takes real floating inputs.");
    }
  });
}


// ---------------------------------------------------------------------------------------
// Backward: dx per row, and the parameter gradients as deterministic column sums.
//
// A fixed grid of G = min(rows, kGradBlocks) blocks takes rows blockIdx.x, + G, ... in
// order; each thread owns the same columns of every row it takes, so it accumulates their
// dw (and db) terms in registers (or, for rows longer than the registers hold, in its
// block's row of the partial buffer, which no other thread touches). A second kernel adds
// the G partial rows column by column in block order. Both orders are fixed, so the result
// does not depend on the device or on scheduling.

/// Blocks of the backward kernels (and partial rows of the parameter gradients).
constexpr int64_t kGradBlocks = 1024;

template <typename T>
struct VjpArgs {
  const T* x;
  const T* w; // null: absent (scale 1)
  const T* g;
  T* dx;
  float* pw; // G x n partials of dw, or null when w is absent
  float* pb; // G x n partials of db (LayerNorm with a bias), or null
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

/// Register-resident backward rows (thread `lane` holds vectors lane, lane + BLOCK, ...).
/// kLayer: LayerNorm's formulas, else RmsNorm's.
template <typename T, bool kLayer, int BLOCK>
__global__ void __launch_bounds__(BLOCK) norm_vjp_regs_kernel(const VjpArgs<T> p) {
  using A = cu::device_acc_t<T>;
  constexpr int W = cu::kVec<T>;
  __shared__ A buf1[BLOCK / 32];
  __shared__ Sums3<A> buf3[BLOCK / 32];
  const int lane = threadIdx.x;
  const int64_t n = p.n;
  A dw[kVpt][W], db[kVpt][W];
#pragma unroll
  for (int k = 0; k < kVpt; ++k) {
#pragma unroll
    for (int j = 0; j < W; ++j) dw[k][j] = db[k][j] = A(0);
  }
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    cu::Vec<T, W> xv[kVpt], gv[kVpt];
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t base = (int64_t(k) * BLOCK + lane) * W;
      if (p.aligned) {
        if (base < n) {
          xv[k] = cu::load_vec<W, cu::Load::ReadOnly>(p.x + row * n + base);
          gv[k] = cu::load_vec<W, cu::Load::ReadOnly>(p.g + row * n + base);
        } else {
#pragma unroll
          for (int j = 0; j < W; ++j) xv[k][j] = gv[k][j] = T(0.0f);
        }
      } else {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const bool in = base + j < n;
          xv[k][j] = in ? p.x[row * n + base + j] : T(0.0f);
          gv[k][j] = in ? p.g[row * n + base + j] : T(0.0f);
        }
      }
    }
    // Padding slots hold x = g = 0: they add nothing to any sum below.
    A mean = A(0);
    if constexpr (kLayer) {
      A s = A(0);
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
#pragma unroll
        for (int j = 0; j < W; ++j) s += cu::to_acc(xv[k][j]);
      }
      mean = cu::block_allreduce(s, Plus{}, buf1) / A(n);
    }
    // a: sum of c², b: sum of w·g, c: sum of w·g·c, with c = x - mean (x for RmsNorm).
    Sums3<A> t{A(0), A(0), A(0)};
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t base = (int64_t(k) * BLOCK + lane) * W;
#pragma unroll
      for (int j = 0; j < W; ++j) {
        if (base + j < n) {
          const A c = cu::to_acc(xv[k][j]) - mean;
          const A wg = cu::to_acc(gv[k][j]) * (p.w ? cu::to_acc(p.w[base + j]) : A(1));
          t.a += c * c;
          t.b += wg;
          t.c += wg * c;
        }
      }
    }
    t = cu::block_allreduce(t, Plus3{}, buf3);
    const A inv = A(1) / ::sqrt(t.a / A(n) + A(p.eps));
    const A mwg = kLayer ? t.b / A(n) : A(0);
    const A k3 = t.c / A(n) * inv * inv * inv;
    T* dxr = p.dx + row * n;
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t base = (int64_t(k) * BLOCK + lane) * W;
      cu::Vec<T, W> out;
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const A c = cu::to_acc(xv[k][j]) - mean;
        const A gj = cu::to_acc(gv[k][j]);
        const A wg = gj * (p.w && base + j < n ? cu::to_acc(p.w[base + j]) : A(1));
        out[j] = cu::store_as<T>((wg - mwg) * inv - c * k3);
        if (base + j < n) {
          dw[k][j] += gj * c * inv;
          db[k][j] += gj;
        }
      }
      if (p.aligned) {
        if (base < n) cu::store_vec<W>(dxr + base, out);
      } else {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          if (base + j < n) dxr[base + j] = out[j];
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kVpt; ++k) {
    const int64_t base = (int64_t(k) * BLOCK + lane) * W;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      if (base + j < n) {
        if (p.pw) p.pw[blockIdx.x * n + base + j] = float(dw[k][j]);
        if (p.pb) p.pb[blockIdx.x * n + base + j] = float(db[k][j]);
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
    if (p.pw) p.pw[blockIdx.x * n + i] = 0.0f;
    if (p.pb) p.pb[blockIdx.x * n + i] = 0.0f;
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
      if (p.pw) p.pw[blockIdx.x * n + i] += float(gj * c * inv);
      if (p.pb) p.pb[blockIdx.x * n + i] += float(gj);
    }
  }
}

/// out[j] = sum over the G partial rows of partial[b * n + j], in block order (deterministic).
template <typename T>
__global__ void column_sum_kernel(const float* partial, T* out, int64_t blocks, int64_t n) {
  NUVEC_CUDA_KERNEL_LOOP(j, n) {
    float s = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) s += partial[b * n + j];
    out[j] = cu::store_as<T>(s);
  }
}

template <typename T, bool kLayer, int BLOCK>
void launch_vjp_regs(const VjpArgs<T>& p, unsigned grid) {
  norm_vjp_regs_kernel<T, kLayer, BLOCK><<<grid, BLOCK, 0, cu::stream()>>>(p);
  cu::check_launch("norm_vjp_regs_kernel");
}

template <typename T, bool kLayer>
void launch_vjp(const VjpArgs<T>& p, unsigned grid) {
  constexpr int64_t W = cu::kVec<T>;
  const int64_t vecs = (p.n + W - 1) / W;
  // Up to 256 threads: each holds x, g and two partial accumulators per element.
  if (vecs <= 32 * kVpt) return launch_vjp_regs<T, kLayer, 32>(p, grid);
  if (vecs <= 64 * kVpt) return launch_vjp_regs<T, kLayer, 64>(p, grid);
  if (vecs <= 128 * kVpt) return launch_vjp_regs<T, kLayer, 128>(p, grid);
  if (vecs <= 256 * kVpt) return launch_vjp_regs<T, kLayer, 256>(p, grid);
  norm_vjp_looped_kernel<T, kLayer, 512><<<grid, 512, 0, cu::stream()>>>(p);
  cu::check_launch("norm_vjp_looped_kernel");
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
  const array x = dense(x_in), g = dense(g_in), w = dense(w_in);
  void* dxp = cu::alloc_output(outputs[0]);
  void* dwp = cu::alloc_output(outputs[1]);
  void* dbp = kLayer ? cu::alloc_output(outputs[2]) : nullptr;
  cu::dispatch_device_types(x.dtype(), [&]<typename T>() {
    if constexpr (cu::is_float_device_v<T>) {
      VjpArgs<T> p{};
      p.x = cu::device_ptr<T>(x);
      p.g = cu::device_ptr<T>(g);
      p.w = param_ptr<T>(w);
      p.dx = static_cast<T*>(dxp);
      p.n = x.shape(-1);
      p.rows = static_cast<int64_t>(x.size()) / p.n;
      p.eps = eps;
      const int64_t blocks = std::min<int64_t>(p.rows, kGradBlocks);
      const bool want_w = w.ndim() == 1, want_b = kLayer && b_in->ndim() == 1;
      const size_t part = sizeof(float) * size_t(blocks * p.n);
      p.pw = want_w ? static_cast<float*>(cu::scratch(part)) : nullptr;
      p.pb = want_b ? static_cast<float*>(cu::scratch(part)) : nullptr;
      auto ok = [](const void* q) { return q == nullptr || cu::is_aligned(q, 16); };
      p.aligned = p.n % cu::kVec<T> == 0 && ok(p.x) && ok(p.g) && ok(p.w) && ok(p.dx);
      launch_vjp<T, kLayer>(p, static_cast<unsigned>(blocks));
      const unsigned cgrid = cu::grid_for(size_t(p.n), 256);
      // Absent parameters get the 0-d zero gradient.
      if (want_w) {
        column_sum_kernel<T><<<cgrid, 256, 0, cu::stream()>>>(p.pw, static_cast<T*>(dwp), blocks, p.n);
      } else {
        NUVEC_CUDA_CHECK(cudaMemsetAsync(dwp, 0, outputs[1].nbytes(), cu::stream()));
      }
      if (kLayer) {
        if (want_b) {
          column_sum_kernel<T><<<cgrid, 256, 0, cu::stream()>>>(p.pb, static_cast<T*>(dbp), blocks, p.n);
        } else {
          NUVEC_CUDA_CHECK(cudaMemsetAsync(dbp, 0, outputs[2].nbytes(), cu::stream()));
        }
      }
      cu::check_launch("column_sum_kernel");
    } else {
      throw std::invalid_argument(std::string("[") + op + "] the kernel takes real floating inputs.");
    }
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
