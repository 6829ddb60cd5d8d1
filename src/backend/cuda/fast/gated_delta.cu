// nuvec: the GPU kernel of GatedDelta (rules and fallback in src/fast/gated_delta.cpp; the
// row step in src/backend/common/math/gated_delta.h, the CPU kernel's). The recurrent form,
// one pass over T: each state row (b, h, i) is held by a group of L lanes of one warp, 8
// float32 elements a lane (L the power of two >= Dk / 8), read once before the first step and
// written once after the last (or after every step, the steps mode). A step is a single
// reduction over the group (s·k, s·q and k·q together: math::gated_delta_row_step), the
// update is in registers, and the operands of the next chunk of steps are loaded while this
// one computes (k and q into shared memory, v, g and β one a lane). Decode (T = 1) is one
// read and one write of the state. A long sequence runs T dependent steps per row here, so
// its speed is the step's latency: from T = 64 on, the final-state and slots modes go to the
// chunked form (gated_delta_chunked.cu) where it covers the sizes; the steps mode, which
// writes every step's state anyway, stays here.
// Blocks of 256 threads take 256 / L rows of one (b, h), so their k and q loads are shared
// through L1. The slots mode reads row slots[b] of the input pool and writes it in the output
// pool: the input's own buffer when it can be donated, else a copy; a slot outside the pool
// is reported as std::out_of_range naming gated_delta_slots (index_errors.cuh) and its
// sequence skipped.
#include <cstdint>

#include "backend/common/math/gated_delta.h"
#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device/convert.cuh"
#include "backend/cuda/device/mma.cuh"
#include "backend/cuda/device/vector.cuh"
#include "backend/cuda/fast/gated_delta.cuh"
#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "fast/gated_delta.h"

namespace nuvec {

namespace {

constexpr int kElems = math::kGatedDeltaLaneElems;
constexpr int kThreads = 256;

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
  S* states;           // the output: [B, Hv, Dv, Dk], [B, T, Hv, Dv, Dk] or the updated pool
  T* y;                // [B, T, Hv, Dv]
  const int32_t* slots; // null unless the slots mode
  cu::IndexError* err;
  int b, t, hk, dk, hv, dv, pool, lanes;
  bool steps;
};

/// Steps a block stages at once: C steps of k and q in shared memory (cp.async, two
/// buffers: the next chunk loads while this one computes), and v, g, β of step c of the chunk
/// held by lane c of each row's group, handed out by a shuffle. Without the staging every step
/// waited for its own loads (13 ms for T 8192 at 16 heads on the H200: a global load's
/// latency per step).
constexpr int kMaxChunk = 16;

template <typename T, typename S>
__global__ void __launch_bounds__(kThreads) gated_delta_kernel(Args<T, S> a) {
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  const int L = a.lanes, C = L < kMaxChunk ? L : kMaxChunk;
  const int bh = blockIdx.x, b = bh / a.hv, h = bh % a.hv, hk = h / (a.hv / a.hk);
  const int row = blockIdx.y * (kThreads / L) + threadIdx.x / L, lane = threadIdx.x % L;
  // Lanes past Dk (L rounded up to a power of two) and rows past Dv hold zeros and skip
  // memory, but take part in the shuffles and barriers.
  const bool on = row < a.dv && lane * kElems < a.dk;
  int64_t from = b;
  if (a.slots != nullptr) {
    from = slot_row(a.slots, gridDim.x / a.hv, b, a.pool, a.err, threadIdx.x == 0 && blockIdx.y == 0);
    if (from < 0) return; // the whole block: every thread has this b
  }
  const int64_t head_row = (int64_t(h) * a.dv + row) * a.dk + lane * kElems; // within a state
  const int64_t state_size = int64_t(a.hv) * a.dv * a.dk;
  float s[kElems] = {};
  if (on) load8(a.state + from * state_size + head_row, s);

  // Shared memory: [2 buffers][k, q][C steps][Dk] of T.
  T* staged = reinterpret_cast<T*>(staged_bytes);
  const int step_elems = a.dk, buffer_elems = 2 * C * a.dk;
  const int units_per_step = a.dk * int(sizeof(T)) / 16, units = 2 * C * units_per_step;
  auto stage = [&](int chunk) {
    T* dst = staged + (chunk & 1) * buffer_elems;
    for (int u = threadIdx.x; u < units; u += kThreads) {
      const int which = u / (C * units_per_step), rest = u % (C * units_per_step);
      const int step = rest / units_per_step, piece = rest % units_per_step;
      const int t = chunk * C + step;
      const T* src = which == 0 ? a.k : a.q;
      const bool valid = t < a.t;
      const int64_t at = ((int64_t(b) * a.t + (valid ? t : 0)) * a.hk + hk) * a.dk;
      cu::cp_async_16(dst + (which * C + step) * step_elems + piece * (16 / int(sizeof(T))),
                      src + at + piece * (16 / int(sizeof(T))), valid);
    }
    cu::cp_async_commit();
  };
  // Lane c of a row's group holds v, g and β of the chunk's step c.
  auto scalars = [&](int chunk, float& vv, float& gg, float& bb) {
    const int t = chunk * C + lane;
    vv = gg = bb = 0.f;
    if (lane < C && t < a.t) {
      const int64_t bt = int64_t(b) * a.t + t;
      if (row < a.dv) vv = cu::to_acc(a.v[(bt * a.hv + h) * a.dv + row]);
      gg = load_gate(a.g, bt * a.hv + h, a.gate_type);
      bb = load_gate(a.beta, bt * a.hv + h, a.beta_type);
    }
  };
  const int chunks = (a.t + C - 1) / C;
  float v_c = 0.f, g_c = 0.f, b_c = 0.f;
  if (chunks > 0) {
    stage(0);
    scalars(0, v_c, g_c, b_c);
  }
  for (int chunk = 0; chunk < chunks; ++chunk) {
    // Every thread is done with the buffer the next chunk overwrites (chunk − 1's).
    __syncthreads();
    float v_n = 0.f, g_n = 0.f, b_n = 0.f;
    if (chunk + 1 < chunks) {
      stage(chunk + 1);
      scalars(chunk + 1, v_n, g_n, b_n);
      cu::cp_async_wait<1>();
    } else {
      cu::cp_async_wait<0>();
    }
    __syncthreads(); // every thread's copies of this chunk are visible
    const T* buf = staged + (chunk & 1) * buffer_elems;
    const int steps = a.t - chunk * C < C ? a.t - chunk * C : C;
    for (int c = 0; c < steps; ++c) {
      float k[kElems] = {}, q[kElems] = {};
      if (lane * kElems < a.dk) {
        load8(buf + c * step_elems + lane * kElems, k);
        load8(buf + (C + c) * step_elems + lane * kElems, q);
      }
      const float v = __shfl_sync(0xffffffffu, v_c, c, L);
      const float g = __shfl_sync(0xffffffffu, g_c, c, L);
      const float beta = __shfl_sync(0xffffffffu, b_c, c, L);
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
      const int64_t bt = int64_t(b) * a.t + chunk * C + c;
      if (lane == 0 && row < a.dv) a.y[(bt * a.hv + h) * a.dv + row] = cu::store_as<T>(step.y);
      if (a.steps && on) store8(a.states + bt * state_size + head_row, s);
    }
    v_c = v_n;
    g_c = g_n;
    b_c = b_n;
  }
  if (!a.steps && on) store8(a.states + from * state_size + head_row, s);
}

/// Shared memory of a block: two chunks of k and q.
size_t staging_bytes(int dk, int lanes, size_t item) {
  const int chunk = lanes < kMaxChunk ? lanes : kMaxChunk;
  return 2 * 2 * size_t(chunk) * dk * item;
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
  const bool slots = mode_ == GatedDeltaMode::slots;
  array& states = outputs[1];
  // The slots mode updates the pool in place when nothing else refers to it (the serving
  // engine replaces its pool with the result each step): each block reads its rows of a
  // sequence's state before it writes them, and no two blocks share rows. Asked before any
  // handle to the pool is copied here.
  bool donated = false;
  if (slots) cu::donate_or_alloc_output(inputs[5], states, &donated);
  const array q = aligned(inputs[0]), k = aligned(inputs[1]), v = cu::as_row_contiguous(inputs[2]);
  const array g = cu::as_row_contiguous(inputs[3]), beta = cu::as_row_contiguous(inputs[4]);
  const array state = aligned(inputs[5]);
  array& y = outputs[0];
  cu::alloc_output(y);
  if (slots) {
    if (!donated && states.size() > 0) {
      cu::copy_elements(
          cu::device_ptr(state), state.dtype(), row_strides(state.shape()), cu::device_ptr(states), states.dtype(),
          row_strides(states.shape()), states.shape());
    }
  } else {
    cu::alloc_output(states);
  }
  if (int64_t(b) * hv == 0 || dv == 0) return;
  array slot_ids = slots ? cu::as_row_contiguous(inputs[6]) : array(0);
  cu::IndexErrorCheck check("gated_delta_slots", slots);
  if (mode_ != GatedDeltaMode::steps && t >= kGatedDeltaChunkedMinT && gated_delta_chunked_covers(dk, dv)) {
    gated_delta_chunked(
        q, k, v, g, beta, state, slots ? cu::device_ptr<int32_t>(slot_ids) : nullptr, check.device(), y, states);
    check.finish(cu::device_ptr(y), y.nbytes());
    return;
  }
  const int lanes = lanes_for(dk), rows = kThreads / lanes;
  const dim3 grid(static_cast<unsigned>(int64_t(b) * hv), static_cast<unsigned>((dv + rows - 1) / rows));
  dispatch_gated_delta_types(q.dtype(), state.dtype(), [&]<typename T, typename S>() {
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
    // Two chunks of float32 keys of 256 take 64 KB: past the default 48 KB.
    static const bool opted_in = [] {
      NUVEC_CUDA_CHECK(cudaFuncSetAttribute(
          gated_delta_kernel<T, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
          static_cast<int>(staging_bytes(math::kGatedDeltaMaxDk, 32, sizeof(T)))));
      return true;
    }();
    (void)opted_in;
    gated_delta_kernel<T, S><<<grid, kThreads, staging_bytes(dk, lanes, sizeof(T)), cu::stream()>>>(a);
    cu::check_launch("gated_delta_kernel");
  });
  check.finish(cu::device_ptr(y), y.nbytes());
}

} // namespace nuvec
