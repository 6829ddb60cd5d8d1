// nuvec: what the two GPU forms of GatedDelta share: the recurrent kernel
// (gated_delta.cu: decode, short T, the steps mode, Dk up to 256) and the chunked one
// (gated_delta_chunked.cu: prefill, T >= kGatedDeltaChunkedMinT). The decays and betas are
// read in their own dtype (they are [B, T, Hv], a load a step), so their type is a run-time
// value rather than a template parameter.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>

#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "nuvec/array.h"

namespace nuvec {

/// The dtype of g and beta.
enum class GateType : int { f32, f16, bf16 };

__device__ __forceinline__ float load_gate(const void* p, int64_t i, GateType t) {
  switch (t) {
    case GateType::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case GateType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

inline GateType gate_type(Dtype dt) {
  if (dt == float16) return GateType::f16;
  if (dt == bfloat16) return GateType::bf16;
  if (dt == float32) return GateType::f32;
  throw std::invalid_argument("[gated_delta] the GPU kernel takes g and beta in float32, float16 or bfloat16.");
}

/// The shortest sequence the chunked kernel takes: one chunk of 64 steps. Below it the
/// recurrent kernel's T dependent steps cost less than the chunked form's three launches.
constexpr int kGatedDeltaChunkedMinT = 64;

/// Whether the chunked kernel covers these sizes: Dk a multiple of 8 up to 128 (a chunk's
/// keys, queries and WY products of 64 rows fit the shared memory of one block), Dv a
/// multiple of 16 (a block owns 16 rows of the state).
inline bool gated_delta_chunked_covers(int dk, int dv) {
  return dk % 8 == 0 && dk <= 128 && dv % 16 == 0;
}

/// The chunked form (gated_delta_chunked.cu) on inputs the caller made row-contiguous and
/// 16-byte aligned: q, k, v of one dtype, g and beta of float32/float16/bfloat16, `state`
/// [B or P, Hv, Dv, Dk] of float32/float16/bfloat16 read at row slots[b] (b when slots is
/// null), `states` written at the same row; y [B, T, Hv, Dv] in q's dtype. A slot outside
/// the pool is recorded in `err` and its sequence skipped.
void gated_delta_chunked(
    const array& q,
    const array& k,
    const array& v,
    const array& g,
    const array& beta,
    const array& state,
    const int32_t* slots,
    cu::IndexError* err,
    array& y,
    array& states);

/// Runs f.template operator()<T, S>() for the inputs' element type T and the state's S
/// (float, __half or __nv_bfloat16): the dispatch both kernels share. Throws
/// std::invalid_argument for float64, which the GPU kernels do not take (the fallback does).
template <class F>
void dispatch_gated_delta_types(Dtype input, Dtype state, F&& f) {
  cu::dispatch_device_float_types(input, "gated_delta", [&]<typename T>() {
    cu::dispatch_device_float_types(state, "gated_delta", [&]<typename S>() {
      if constexpr (std::is_same_v<T, double> || std::is_same_v<S, double>) {
        throw std::invalid_argument("[gated_delta] the GPU kernel does not take float64.");
      } else {
        f.template operator()<T, S>();
      }
    });
  });
}

/// The slots mode's pool row for sequence b of the n in `slots` (negative slots count from
/// the end), or -1 when the block must skip the sequence: a slot outside the pool (recorded
/// as out of range) or a row another sequence names too (recorded as a repeat: the two would
/// race on it). `leader`: the one thread of the sequence's blocks that records. Every thread
/// of the block calls it (the repeat scan is shared, one barrier).
__device__ __forceinline__ int64_t slot_row(
    const int32_t* slots, int n, int b, int64_t pool, cu::IndexError* err, bool leader) {
  const int64_t slot = slots[b];
  if (slot < -pool || slot >= pool) {
    if (leader) cu::record_index_error(err, slot, pool, 0);
    return -1; // the whole block: every thread has this b
  }
  const int64_t row = slot < 0 ? slot + pool : slot;
  bool named = false;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t r = slots[i] < 0 ? int64_t(slots[i]) + pool : int64_t(slots[i]);
    named = named || (i != b && r == row);
  }
  if (__syncthreads_or(named)) {
    if (leader) cu::record_repeat_error(err, row);
    return -1;
  }
  return row;
}

} // namespace nuvec
