// nuvec: index range errors of the GPU gather/scatter kernels, raised as the CPU kernels raise
// them (src/backend/cpu/index_range.h): std::out_of_range "[op] indices must lie in [-n, n)
// along axis a (of size n); got i.", rethrown by the host's next eval, with the node's output
// zeroed (as src/backend/cpu/eval.cpp and src/backend/cuda/runtime/eval.cpp zero a failed node's).
// A kernel records the first bad index it meets in a device record (and skips it: no memory
// outside the arrays is touched); a one-block kernel after the node's kernels zeroes the
// output when one was recorded and copies the record to pinned host memory, which the
// stream's worker reads once the device has run that far (StreamState::after_device: at the
// next completed release event or synchronisation) and hands to record_kernel_error. An eval
// waiting on the node synchronises the stream first, so the error is recorded before it
// rethrows. (A host function on the stream, cudaLaunchHostFunc, did the same but stalled the
// stream ~40 us per checked node on the H200: most of a decode step's gathered products.)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/kernel_errors.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/runtime/stream.h"
#include "core/errors.h"

namespace nuvec::cu {

/// The first index outside [-n, n) that a kernel met (flag 0: none yet).
struct IndexError {
  int flag;
  int axis;
  int64_t value;
  int64_t n;
};

/// Records `value` (outside [-n, n) along axis) into *err unless one is recorded already
/// (err null: not checked).
__device__ __forceinline__ void record_index_error(IndexError* err, int64_t value, int64_t n, int axis) {
  if (err != nullptr && atomicCAS(&err->flag, 0, 1) == 0) {
    err->value = value;
    err->n = n;
    err->axis = axis;
  }
}

/// Whether a gathered product's batch entry reads rows inside x (entry xi of x_count) and W
/// (wi of w_count); if not, `reporter` records the first index past its operand (the node's
/// output is zeroed afterwards) and the caller skips the entry.
__device__ __forceinline__ bool gathered_entry_ok(
    IndexError* err, int64_t xi, int64_t x_count, int64_t wi, int64_t w_count, bool reporter) {
  if (xi < x_count && wi < w_count) return true;
  if (reporter) {
    if (xi >= x_count) record_index_error(err, xi, x_count, 0);
    else record_index_error(err, wi, w_count, 0);
  }
  return false;
}

/// Records that index `value` is repeated where the op needs distinct ones (flag 2: reported
/// as std::invalid_argument) unless an error is recorded already.
__device__ __forceinline__ void record_repeat_error(IndexError* err, int64_t value) {
  if (err != nullptr && atomicCAS(&err->flag, 0, 2) == 0) {
    err->value = value;
    err->n = 0;
    err->axis = 0;
  }
}

namespace detail {

/// Zeroes out's bytes when *err holds an error and copies the record to the pinned slot.
template <typename Unused = void>
__global__ void finish_index_check_kernel(
    const IndexError* err,
    unsigned char* out,
    size_t bytes,
    IndexError* slot) {
  if (err->flag == 0) return;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += size_t(blockDim.x) * gridDim.x) {
    out[i] = 0;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *slot = *err;
}

/// Pinned, device-mapped records for the host functions to read, reused once read. Never
/// destroyed: host functions may still run while the process exits.
struct ErrorSlots {
  struct Slot {
    IndexError* host;
    IndexError* device;
  };
  std::mutex mtx;
  std::vector<Slot> free;

  Slot acquire() {
    {
      std::lock_guard<std::mutex> lk(mtx);
      if (!free.empty()) return take();
    }
    // Allocate outside the lock: a pinned allocation may wait for work already queued,
    // including host functions that release slots under the lock.
    constexpr size_t kChunk = 256;
    void* chunk = nullptr;
    NUVEC_CUDA_CHECK(cudaHostAlloc(
        &chunk, kChunk * sizeof(IndexError), cudaHostAllocMapped | cudaHostAllocPortable));
    void* dchunk = nullptr;
    NUVEC_CUDA_CHECK(cudaHostGetDevicePointer(&dchunk, chunk, 0));
    std::lock_guard<std::mutex> lk(mtx);
    for (size_t i = 0; i < kChunk; ++i) {
      free.push_back({static_cast<IndexError*>(chunk) + i, static_cast<IndexError*>(dchunk) + i});
    }
    return take();
  }

  // Pops a free slot, cleared (mtx held).
  Slot take() {
    Slot s = free.back();
    free.pop_back();
    std::memset(s.host, 0, sizeof(IndexError));
    return s;
  }

  void release(Slot s) {
    std::lock_guard<std::mutex> lk(mtx);
    free.push_back(s);
  }
};

inline ErrorSlots& error_slots() {
  static ErrorSlots* slots = new ErrorSlots;
  return *slots;
}

/// Records the slot's error (if any) as std::out_of_range naming op, and frees the slot (or,
/// with keep, clears it for the next replay of a captured CUDA graph that writes it again).
/// Runs on the stream's worker once the device has run the finish kernel.
inline void report_index_error(ErrorSlots::Slot slot, const char* op, bool keep = false) {
  try {
    IndexError e;
    std::memcpy(&e, const_cast<const IndexError*>(slot.host), sizeof(e));
    if (keep) {
      // A later replay may already be writing the slot: take the flag atomically rather than
      // clearing the record after reading it (which could wipe that replay's error).
      e.flag = __atomic_exchange_n(&slot.host->flag, 0, __ATOMIC_ACQ_REL);
    }
    if (e.flag == 2) {
      record_kernel_error(std::make_exception_ptr(std::invalid_argument(error_message(
          op, "indices must be distinct; row ", e.value, " is named twice."))));
    } else if (e.flag != 0) {
      record_kernel_error(std::make_exception_ptr(std::out_of_range(error_message(
          op, "indices must lie in [", -e.n, ", ", e.n, ") along axis ", e.axis,
          " (of size ", e.n, "); got ", e.value, "."))));
    }
    if (!keep) error_slots().release(slot);
  } catch (...) {
    // Nothing may escape a release; the error (or, out of memory, the slot) is lost rather
    // than the worker.
  }
}

} // namespace detail

/// The index range check of one node: construct before the node's kernels (they record into
/// device()), call finish(out) after them. Disabled (device() null, finish a no-op) when
/// `enabled` is false, i.e. when no index can be out of range.
class IndexErrorCheck {
 public:
  /// op: the public op named by the error (a string literal: read after the device has run).
  IndexErrorCheck(const char* op, bool enabled) : op_(op) {
    if (!enabled) return;
    dev_ = static_cast<IndexError*>(scratch(sizeof(IndexError)));
    NUVEC_CUDA_CHECK(cudaMemsetAsync(dev_, 0, sizeof(IndexError), stream()));
  }

  IndexError* device() const { return dev_; }

  /// Zeroes out's `bytes` bytes (the node's output) on the device when an error was recorded
  /// and reports it at the host's next eval.
  void finish(void* out, size_t bytes) {
    if (dev_ == nullptr) return;
    auto slot = detail::error_slots().acquire();
    try {
      detail::finish_index_check_kernel<<<32, 256, 0, stream()>>>(
          dev_, static_cast<unsigned char*>(out), bytes, slot.device);
      check_launch("finish_index_check_kernel");
      StreamState* st = current_state();
      if (st->capturing()) {
        // Replays of a captured graph run the finish kernel again into the same slot.
        st->after_each_replay(
            [slot, op = op_] { detail::report_index_error(slot, op, /* keep */ true); },
            [slot] { detail::error_slots().release(slot); });
      } else {
        st->after_device([slot, op = op_] { detail::report_index_error(slot, op); });
      }
    } catch (...) {
      detail::error_slots().release(slot);
      throw;
    }
  }

 private:
  const char* op_;
  IndexError* dev_ = nullptr;
};

/// Whether an index of dtype can lie outside [-n, n): not for unsigned types whose largest
/// value is below n (uint8 indices into an axis of 256 or more, uint16 into 65536 or more).
inline bool index_may_be_out_of_range(Dtype dtype, int64_t n) {
  if (dtype == uint8) return n <= 255;
  if (dtype == uint16) return n <= 65535;
  return true;
}

} // namespace nuvec::cu
