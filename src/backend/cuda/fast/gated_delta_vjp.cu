// nuvec: the CUDA kernel of GatedDeltaVjp, the backward of the gated delta rule (its meaning
// and the CPU kernel: src/fast/gated_delta.h, src/backend/cpu/fast/gated_delta.cpp; the row
// rule both run: src/backend/common/math/gated_delta.h). GatedDelta's vjp records it on a GPU
// stream unless NUVEC_GATED_DELTA_VJP_GPU=0 (checked against the CPU kernel on the H200:
// tests/fast_gated_delta_test.cpp, GpuBackwardMatchesCpu).
//
// One block of 8 warps per (b, value head), the recurrence run backwards as on the CPU:
//  1. the forward pass once, each warp taking rows i ≡ warp (mod 8) of the [Dv, Dk] state in
//     registers (lane l holds columns l + 32e), keeping the state every kGatedDeltaVjpChunk
//     steps in a global scratch (checkpoints);
//  2. the chunks from the last: the chunk's states recomputed from its checkpoint into a
//     second scratch, then its steps walked backwards. The cotangent D of the state lives in
//     shared memory (each row owned by one warp); per step and row the three dot products
//     (p·k, d·k, d·p) are warp reductions, the row's scalars come from
//     math::gated_delta_row_grad, and the column sums dq = Sᵀ dy and dk = Dᵀ δ − g Pᵀ du are
//     reduced over the warps in shared memory and added to float32 accumulators with atomics
//     (the Hv / Hk value heads of a key head add into the same rows: dq and dk are not
//     bit-reproducible; dv, dg, dβ and the initial state's cotangent are).
// Everything runs in float32 (inputs of other dtypes copied to float32 first); the gradients
// are converted to the inputs' dtypes at the end. Covered: Dk <= 256 and the cotangent in shared memory
// (Dv · Dk · 4 bytes plus the reductions within the device's limit); otherwise, and for
// float64, the node runs on the host.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "backend/common/math/gated_delta.h"
#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device/warp.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/gated_delta.h"

namespace nuvec {

namespace {

constexpr int kVjpWarps = 8;
constexpr int kVjpThreads = kVjpWarps * 32;
constexpr int kChunk = kGatedDeltaVjpChunk;

struct VjpArgs {
  // float32, row-contiguous: q, k [B, T, Hk, Dk]; v, dy [B, T, Hv, Dv]; g, beta [B, T, Hv];
  // state, dstate [B, Hv, Dv, Dk].
  const float *q, *k, *v, *g, *beta, *state, *dy, *dstate;
  float *dq, *dk;                 // [B, T, Hk, Dk], zeroed, added to atomically
  float *dv, *dg, *dbeta, *ds0;   // written once each
  float *ckpt, *chunk;            // per (b, h): [chunks, Dv, Dk] and [chunk_states, Dv, Dk]
  int nb, nt, nhk, nhv, ndk, ndv, chunks; // B, T, Hk, Hv, Dk, Dv, checkpoints
  int chunk_states;               // min(T, kChunk) + 1
};

/// x summed over the warp, every lane getting the sum (device/warp.cuh's butterfly).
__device__ __forceinline__ float warp_sum(float x) {
  return cu::warp_allreduce(x, cu::kWarpSize, [](float a, float b) { return a + b; });
}

/// E = ceil(Dk / 32) columns a lane (1, 2, 4 or 8).
template <int E>
__global__ void __launch_bounds__(kVjpThreads) gated_delta_vjp_kernel(const VjpArgs a) {
  extern __shared__ float sm[];
  const int64_t bh = blockIdx.x, b = bh / a.nhv, h = bh % a.nhv, hk = h / (a.nhv / a.nhk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int Dk = a.ndk, Dv = a.ndv, T = a.nt;
  const int64_t head = int64_t(Dv) * Dk;
  float* D = sm;                  // the cotangent of the state, [Dv, Dk]
  float* red_q = sm + head;       // [warps, Dk] partial column sums of dq
  float* red_k = red_q + kVjpWarps * Dk;
  float* red_s = red_k + kVjpWarps * Dk; // [2, warps]: dβ and dg partials
  float* ckpt = a.ckpt + bh * a.chunks * head;
  float* chunk = a.chunk + bh * a.chunk_states * head;
  auto col = [&](int e) { return lane + 32 * e; };
  auto kq_row = [&](const float* base, int t) { return base + ((b * T + t) * a.nhk + hk) * Dk; };
  auto at = [&](int t) { return (b * T + t) * a.nhv + h; };
  // Loads columns of a Dk-row (zeros past Dk).
  auto load_row = [&](const float* row, float (&x)[E]) {
#pragma unroll
    for (int e = 0; e < E; ++e) x[e] = col(e) < Dk ? row[col(e)] : 0.0f;
  };
  auto store_row = [&](float* row, const float (&x)[E]) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (col(e) < Dk) row[col(e)] = x[e];
    }
  };
  // One forward step of row i: s ← g s + δ k, δ = β (v_i − g s·k).
  auto step = [&](float (&s)[E], int t, int i) {
    float k[E];
    load_row(kq_row(a.k, t), k);
    float sk = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) sk += s[e] * k[e];
    sk = warp_sum(sk);
    const float g = a.g[at(t)];
    const float delta = math::gated_delta_row_step(g, a.beta[at(t)], a.v[at(t) * Dv + i], sk, 0.0f, 0.0f).delta;
#pragma unroll
    for (int e = 0; e < E; ++e) s[e] = math::gated_delta_update(s[e], g, delta, k[e]);
  };

  // 1. The forward pass: checkpoints.
  for (int i = warp; i < Dv; i += kVjpWarps) {
    float s[E];
    load_row(a.state + bh * head + int64_t(i) * Dk, s);
    for (int t = 0; t < T; ++t) {
      if (t % kChunk == 0) store_row(ckpt + (t / kChunk) * head + int64_t(i) * Dk, s);
      step(s, t, i);
    }
  }
  for (int64_t x = threadIdx.x; x < head; x += kVjpThreads) D[x] = a.dstate[bh * head + x];
  __syncthreads(); // the checkpoints (global, this block's) and D

  // 2. The chunks from the last.
  for (int c = a.chunks - 1; c >= 0; --c) {
    const int t0 = c * kChunk, t1 = t0 + kChunk < T ? t0 + kChunk : T;
    for (int i = warp; i < Dv; i += kVjpWarps) {
      float s[E];
      load_row(ckpt + c * head + int64_t(i) * Dk, s);
      store_row(chunk + int64_t(i) * Dk, s);
      for (int t = t0; t < t1; ++t) {
        step(s, t, i);
        store_row(chunk + (t - t0 + 1) * head + int64_t(i) * Dk, s);
      }
    }
    __syncthreads(); // (not needed for correctness: each row's states are its warp's own)
    for (int t = t1 - 1; t >= t0; --t) {
      float kk[E], qq[E], aq[E], ak[E];
      load_row(kq_row(a.k, t), kk);
      load_row(kq_row(a.q, t), qq);
#pragma unroll
      for (int e = 0; e < E; ++e) aq[e] = ak[e] = 0.0f;
      const float g = a.g[at(t)], beta = a.beta[at(t)];
      float dbeta = 0.0f, dg = 0.0f;
      const float* P = chunk + (t - t0) * head; // the state before step t
      const float* S = P + head;                // after it
      for (int i = warp; i < Dv; i += kVjpWarps) {
        float p[E], sn[E], d[E];
        load_row(P + int64_t(i) * Dk, p);
        load_row(S + int64_t(i) * Dk, sn);
        load_row(D + int64_t(i) * Dk, d);
        const float dyi = a.dy[at(t) * Dv + i];
        float kp = 0.0f, dk_ = 0.0f, dp = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) {
          d[e] += dyi * qq[e]; // y_t = S q: D += dy qᵀ, dq += Sᵀ dy
          aq[e] += dyi * sn[e];
          kp += p[e] * kk[e];
          dk_ += d[e] * kk[e];
          dp += d[e] * p[e];
        }
        kp = warp_sum(kp);
        dk_ = warp_sum(dk_);
        dp = warp_sum(dp);
        const auto rg = math::gated_delta_row_grad(g, beta, a.v[at(t) * Dv + i], kp, dk_, dp);
#pragma unroll
        for (int e = 0; e < E; ++e) {
          ak[e] += rg.delta * d[e] - rg.g_du * p[e];
          d[e] = math::gated_delta_row_back(d[e], g, rg.du, kk[e]);
        }
        store_row(D + int64_t(i) * Dk, d);
        if (lane == 0) a.dv[at(t) * Dv + i] = rg.du;
        dbeta += rg.dbeta;
        dg += rg.dg;
      }
      store_row(red_q + warp * Dk, aq);
      store_row(red_k + warp * Dk, ak);
      if (lane == 0) {
        red_s[warp] = dbeta;
        red_s[kVjpWarps + warp] = dg;
      }
      __syncthreads();
      for (int j = threadIdx.x; j < Dk; j += kVjpThreads) {
        float sq = 0.0f, sk = 0.0f;
        for (int w = 0; w < kVjpWarps; ++w) {
          sq += red_q[w * Dk + j];
          sk += red_k[w * Dk + j];
        }
        atomicAdd(a.dq + ((b * T + t) * a.nhk + hk) * Dk + j, sq);
        atomicAdd(a.dk + ((b * T + t) * a.nhk + hk) * Dk + j, sk);
      }
      if (threadIdx.x == 0) {
        float sb = 0.0f, sg = 0.0f;
        for (int w = 0; w < kVjpWarps; ++w) {
          sb += red_s[w];
          sg += red_s[kVjpWarps + w];
        }
        a.dbeta[at(t)] = sb;
        a.dg[at(t)] = sg;
      }
      __syncthreads(); // the reductions are read before the next step overwrites them
    }
  }
  for (int64_t x = threadIdx.x; x < head; x += kVjpThreads) a.ds0[bh * head + x] = D[x];
}

size_t vjp_smem_bytes(int dk, int dv) {
  return (size_t(dv) * dk + 2 * size_t(kVjpWarps) * dk + 2 * kVjpWarps) * sizeof(float);
}

template <int E>
void launch_vjp(const VjpArgs& a, size_t smem) {
  auto kernel = gated_delta_vjp_kernel<E>;
  NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<static_cast<unsigned>(int64_t(a.nb) * a.nhv), kVjpThreads, smem, cu::stream()>>>(a);
  cu::check_launch("gated_delta_vjp_kernel");
}

} // namespace

void GatedDeltaVjp::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& q0 = inputs[0];
  const int64_t B = q0.shape(0), T = q0.shape(1), Hk = q0.shape(2), Dk = q0.shape(3);
  const int64_t Hv = inputs[2].shape(2), Dv = inputs[2].shape(3);
  bool wide = false;
  for (const array& x : inputs) wide = wide || x.dtype() == float64;
  const size_t smem = vjp_smem_bytes(static_cast<int>(Dk), static_cast<int>(Dv));
  const bool covered = !wide && Dk >= 1 && Dk <= 256 && Dv >= 1 && B * Hv > 0 && B * Hv < (int64_t(1) << 31) &&
      T < (int64_t(1) << 30) && smem <= size_t(cu::device_props().sharedMemPerBlockOptin);
  if (!covered) return cu::eval_on_host(*this, inputs, outputs);
  std::vector<array> in;
  for (const array& x : inputs) in.push_back(x.dtype() == float32 ? cu::as_row_contiguous(x) : cu::contiguous_copy(x, float32));
  const int64_t head = Dv * Dk, chunks = (T + kChunk - 1) / kChunk;
  const int64_t sizes[6] = {B * T * Hk * Dk, B * T * Hk * Dk, B * T * Hv * Dv, B * T * Hv, B * T * Hv, B * Hv * head};
  float* grads[6];
  for (int i = 0; i < 6; ++i) grads[i] = static_cast<float*>(cu::scratch(size_t(std::max<int64_t>(sizes[i], 1)) * 4));
  NUVEC_CUDA_CHECK(cudaMemsetAsync(grads[0], 0, size_t(sizes[0]) * 4, cu::stream()));
  NUVEC_CUDA_CHECK(cudaMemsetAsync(grads[1], 0, size_t(sizes[1]) * 4, cu::stream()));
  VjpArgs a;
  a.q = cu::device_ptr<float>(in[0]);
  a.k = cu::device_ptr<float>(in[1]);
  a.v = cu::device_ptr<float>(in[2]);
  a.g = cu::device_ptr<float>(in[3]);
  a.beta = cu::device_ptr<float>(in[4]);
  a.state = cu::device_ptr<float>(in[5]);
  a.dy = cu::device_ptr<float>(in[6]);
  a.dstate = cu::device_ptr<float>(in[7]);
  a.dq = grads[0];
  a.dk = grads[1];
  a.dv = grads[2];
  a.dg = grads[3];
  a.dbeta = grads[4];
  a.ds0 = grads[5];
  a.ckpt = static_cast<float*>(cu::scratch(size_t(std::max<int64_t>(B * Hv * chunks * head, 1)) * 4));
  // A chunk's states: at most kChunk + 1 (T + 1 for a short sequence).
  const int64_t chunk_states = std::min<int64_t>(T, kChunk) + 1;
  a.chunk = static_cast<float*>(cu::scratch(size_t(B * Hv * chunk_states * head) * 4));
  a.nb = static_cast<int>(B);
  a.nt = static_cast<int>(T);
  a.nhk = static_cast<int>(Hk);
  a.nhv = static_cast<int>(Hv);
  a.ndk = static_cast<int>(Dk);
  a.ndv = static_cast<int>(Dv);
  a.chunks = static_cast<int>(chunks);
  a.chunk_states = static_cast<int>(chunk_states);
  if (Dk <= 32) launch_vjp<1>(a, smem);
  else if (Dk <= 64) launch_vjp<2>(a, smem);
  else if (Dk <= 128) launch_vjp<4>(a, smem);
  else launch_vjp<8>(a, smem);
  for (int i = 0; i < 6; ++i) {
    array& out = outputs[i];
    void* dst = cu::alloc_output(out);
    if (out.size() == 0) continue;
    const Strides strides = row_strides(out.shape());
    cu::copy_elements(grads[i], float32, strides, dst, out.dtype(), strides, out.shape());
  }
}

} // namespace nuvec
