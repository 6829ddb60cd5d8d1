// nuvec: the GPU kernel of GatedDelta (rules and fallback in src/fast/gated_delta.cpp; the
// row step in src/backend/common/math/gated_delta.h, the CPU kernel's). The recurrent form,
// one pass over T: each state row (b, h, i) is held by a group of L lanes of one warp, 8
// float32 elements a lane (L the power of two >= Dk / 8), read once before the first step and
// written once after the last (or after every step, the steps mode). A step is a single
// reduction over the group (s·k, s·q and k·q together: math::gated_delta_row_step), the
// update is in registers, and the next step's k, q, v, g and β are loaded while this one
// computes. Decode (T = 1) is one read and one write of the state; prefill runs T dependent
// steps per row, so its speed is the step's latency (no chunked tensor-core form yet).
// Blocks of 256 threads take 256 / L rows of one (b, h), so their k and q loads are shared
// through L1. The slots mode copies the pool, then reads row slots[b] of the input pool and
// writes it in the copy; a slot outside the pool is reported as std::out_of_range naming
// gated_delta_slots (index_errors.cuh) and its sequence skipped.
#include <cstdint>

#include "backend/common/math/gated_delta.h"
#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/vector.cuh"
#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/gated_delta.h"

namespace nuvec {

namespace {

constexpr int kElems = math::kGatedDeltaLaneElems;
constexpr int kThreads = 256;

/// The dtype of g and beta, read at run time (they are [B, T, Hv]: one load a step).
enum class GateType : int { f32, f16, bf16 };

__device__ __forceinline__ float load_gate(const void* p, int64_t i, GateType t) {
  switch (t) {
    case GateType::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case GateType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

/// The 8 elements at p (16-byte aligned) in float32.
template <typename X>
__device__ __forceinline__ void load8(const X* p, float (&out)[kElems]) {
  constexpr int V = cu::kVec<X>;
#pragma unroll
  for (int c = 0; c < kElems; c += V) {
    const auto v = cu::load_vec<V>(p + c);
#pragma unroll
    for (int j = 0; j < V; ++j) out[c + j] = cu::to_acc(v[j]);
  }
}

template <typename X>
__device__ __forceinline__ void store8(X* p, const float (&in)[kElems]) {
  constexpr int V = cu::kVec<X>;
#pragma unroll
  for (int c = 0; c < kElems; c += V) {
    cu::Vec<X, V> v;
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = cu::store_as<X>(in[c + j]);
    cu::store_vec(p + c, v);
  }
}

template <typename T, typename S>
struct Args {
  const T *q, *k, *v;
  const void *g, *beta;
  GateType gate_type, beta_type;
  const S* state;      // [B or P, Hv, Dv, Dk]
  S* states;           // the output: [B, Hv, Dv, Dk], [B, T, Hv, Dv, Dk] or the pool's copy
  T* y;                // [B, T, Hv, Dv]
  const int32_t* slots; // null unless the slots mode
  cu::IndexError* err;
  int b, t, hk, dk, hv, dv, pool, lanes;
  bool steps;
};

template <typename T, typename S>
__global__ void __launch_bounds__(kThreads) gated_delta_kernel(Args<T, S> a) {
  const int L = a.lanes;
  const int bh = blockIdx.x, b = bh / a.hv, h = bh % a.hv, hk = h / (a.hv / a.hk);
  const int row = blockIdx.y * (kThreads / L) + threadIdx.x / L, lane = threadIdx.x % L;
  // Lanes past Dk (L rounded up to a power of two) and rows past Dv hold zeros and skip
  // memory, but take part in the shuffles.
  const bool on = row < a.dv && lane * kElems < a.dk;
  int64_t from = b;
  if (a.slots != nullptr) {
    const int64_t slot = a.slots[b];
    if (slot < -a.pool || slot >= a.pool) {
      if (threadIdx.x == 0 && blockIdx.y == 0) cu::record_index_error(a.err, slot, a.pool, 0);
      return; // the whole block: every thread has this b
    }
    from = slot < 0 ? slot + a.pool : slot;
  }
  const int64_t head_row = (int64_t(h) * a.dv + row) * a.dk + lane * kElems; // within a state
  const int64_t state_size = int64_t(a.hv) * a.dv * a.dk;
  float s[kElems] = {};
  if (on) load8(a.state + from * state_size + head_row, s);

  // The step's operands, loaded one step ahead.
  float k[kElems] = {}, q[kElems] = {}, v = 0.f, g = 0.f, beta = 0.f;
  auto load_step = [&](int t, float (&kk)[kElems], float (&qq)[kElems], float& vv, float& gg, float& bb) {
    const int64_t bt = int64_t(b) * a.t + t;
    if (lane * kElems < a.dk) {
      const int64_t at = (bt * a.hk + hk) * a.dk + lane * kElems;
      load8(a.k + at, kk);
      load8(a.q + at, qq);
    }
    if (row < a.dv) vv = cu::to_acc(a.v[(bt * a.hv + h) * a.dv + row]);
    gg = load_gate(a.g, bt * a.hv + h, a.gate_type);
    bb = load_gate(a.beta, bt * a.hv + h, a.beta_type);
  };
  if (a.t > 0) load_step(0, k, q, v, g, beta);
  for (int t = 0; t < a.t; ++t) {
    float kn[kElems] = {}, qn[kElems] = {}, vn = 0.f, gn = 0.f, bn = 0.f;
    if (t + 1 < a.t) load_step(t + 1, kn, qn, vn, gn, bn);
    float sk = 0.f, sq = 0.f, kq = 0.f;
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      sk = fmaf(s[e], k[e], sk);
      sq = fmaf(s[e], q[e], sq);
      kq = fmaf(k[e], q[e], kq);
    }
    for (int o = L / 2; o > 0; o >>= 1) {
      sk += __shfl_xor_sync(0xffffffffu, sk, o);
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
      kq += __shfl_xor_sync(0xffffffffu, kq, o);
    }
    const auto step = math::gated_delta_row_step(g, beta, v, sk, sq, kq);
#pragma unroll
    for (int e = 0; e < kElems; ++e) s[e] = math::gated_delta_update(s[e], g, step.delta, k[e]);
    const int64_t bt = int64_t(b) * a.t + t;
    if (lane == 0 && row < a.dv) a.y[(bt * a.hv + h) * a.dv + row] = cu::store_as<T>(step.y);
    if (a.steps && on) store8(a.states + bt * state_size + head_row, s);
#pragma unroll
    for (int e = 0; e < kElems; ++e) {
      k[e] = kn[e];
      q[e] = qn[e];
    }
    v = vn;
    g = gn;
    beta = bn;
  }
  if (!a.steps && on) store8(a.states + from * state_size + head_row, s);
}

GateType gate_type(Dtype dt) {
  if (dt == float16) return GateType::f16;
  if (dt == bfloat16) return GateType::bf16;
  if (dt == float32) return GateType::f32;
  throw std::invalid_argument("[gated_delta] the GPU kernel takes g and beta in float32, float16 or bfloat16.");
}

// Lanes per state row: the power of two holding Dk in 8-element pieces.
int lanes_for(int dk) {
  int lanes = 1;
  while (lanes * kElems < dk) lanes *= 2;
  return lanes;
}

} // namespace

void GatedDelta::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array &q0 = inputs[0];
  const int b = q0.shape(0), t = q0.shape(1), hk = q0.shape(2), dk = q0.shape(3);
  const int hv = inputs[2].shape(2), dv = inputs[2].shape(3);
  if (!gated_delta_gpu_covers(dk, q0.dtype()) || inputs[1].dtype() != q0.dtype() || inputs[2].dtype() != q0.dtype()) {
    throw std::invalid_argument("[gated_delta] the GPU kernel does not cover these keys or dtypes.");
  }
  // Fresh copies are 256-byte aligned; a view at an odd offset is copied so 16-byte vector
  // loads stay aligned.
  auto aligned = [](const array& x) {
    const array c = cu::as_row_contiguous(x);
    return cu::is_aligned(cu::device_ptr(c), 16) ? c : cu::contiguous_copy(x);
  };
  const array q = aligned(inputs[0]), k = aligned(inputs[1]), v = cu::as_row_contiguous(inputs[2]);
  const array g = cu::as_row_contiguous(inputs[3]), beta = cu::as_row_contiguous(inputs[4]);
  const array state = aligned(inputs[5]);
  array& y = outputs[0];
  array& states = outputs[1];
  cu::alloc_output(y);
  const bool slots = mode_ == GatedDeltaMode::slots;
  if (slots) {
    cu::alloc_output(states);
    if (states.size() > 0) {
      cu::copy_elements(
          cu::device_ptr(state), state.dtype(), row_strides(state.shape()), cu::device_ptr(states), states.dtype(),
          row_strides(states.shape()), states.shape());
    }
  } else {
    cu::alloc_output(states);
  }
  if (int64_t(b) * hv == 0 || dv == 0) return;
  const int lanes = lanes_for(dk), rows = kThreads / lanes;
  const dim3 grid(static_cast<unsigned>(int64_t(b) * hv), static_cast<unsigned>((dv + rows - 1) / rows));
  array slot_ids = slots ? cu::as_row_contiguous(inputs[6]) : array(0);
  cu::IndexErrorCheck check("gated_delta_slots", slots);
  cu::dispatch_device_float_types(q.dtype(), "gated_delta", [&]<typename T>() {
    cu::dispatch_device_float_types(state.dtype(), "gated_delta", [&]<typename S>() {
      if constexpr (std::is_same_v<T, double> || std::is_same_v<S, double>) {
        throw std::invalid_argument("[gated_delta] the GPU kernel does not take float64.");
      } else {
        Args<T, S> a{};
        a.q = cu::device_ptr<T>(q);
        a.k = cu::device_ptr<T>(k);
        a.v = cu::device_ptr<T>(v);
        a.g = cu::device_ptr(g);
        a.beta = cu::device_ptr(beta);
        a.gate_type = gate_type(g.dtype());
        a.beta_type = gate_type(beta.dtype());
        a.state = cu::device_ptr<S>(state);
        a.states = static_cast<S*>(cu::device_ptr(states));
        a.y = static_cast<T*>(cu::device_ptr(y));
        a.slots = slots ? cu::device_ptr<int32_t>(slot_ids) : nullptr;
        a.err = check.device();
        a.b = b;
        a.t = t;
        a.hk = hk;
        a.dk = dk;
        a.hv = hv;
        a.dv = dv;
        a.pool = slots ? state.shape(0) : b;
        a.lanes = lanes;
        a.steps = mode_ == GatedDeltaMode::steps;
        gated_delta_kernel<T, S><<<grid, kThreads, 0, cu::stream()>>>(a);
        cu::check_launch("gated_delta_kernel");
      }
    });
  });
  check.finish(cu::device_ptr(y), y.nbytes());
}

} // namespace nuvec
