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
// The backward primitives (RmsNormVjp, LayerNormVjp) run their CPU kernels on host copies
// for now (cu::eval_on_host): correct, not fast.
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

NUVEC_GPU_ON_HOST(RmsNormVjp)
NUVEC_GPU_ON_HOST(LayerNormVjp)

} // namespace nuvec
