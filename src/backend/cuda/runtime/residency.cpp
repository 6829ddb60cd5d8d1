// nuvec: moving array data between the host and the GPU on demand (docs/CUDA-BACKEND.md).
// Each direction runs at most once per buffer, under the buffer's residency mutex.
#include <cstring>
#include <memory>
#include <stdexcept>

#include "backend/cuda/runtime/allocator.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/common/donation.h"
#include "backend/cuda/runtime/stream.h"
#include "backend/gpu.h"
#include "nuvec/primitives.h"

namespace nuvec {

namespace gpu {

void ensure_host(array::Data& d) {
  std::lock_guard<std::mutex> lk(d.residency_mtx);
  if (d.buffer.ptr()) return;
  void* dev = d.device.load();
  if (!dev) {
    throw std::runtime_error("[array] buffer has neither host nor device data.");
  }
  // On a GPU worker the producer may be this stream's still-running kernel; elsewhere an
  // event already ordered the read after it (see Event::signal).
  if (auto* st = cu::current_state()) {
    cu::check(cudaStreamSynchronize(st->stream()), "cudaStreamSynchronize");
  }
  auto buf = allocator::malloc(d.nbytes);
  if (d.nbytes > 0) {
    cudaError_t err = cudaMemcpy(buf.raw_ptr(), dev, d.nbytes, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) {
      allocator::free(buf);
      cu::check(err, "cudaMemcpy D2H");
    }
  }
  d.buffer = buf;
}

} // namespace gpu

namespace cu {

namespace {

// Uploads up to this size go through pinned staging without stalling the stream: the
// scalars and small arrays graphs create on the host (constants, hyperparameters, labels).
constexpr size_t kStagedUpload = size_t(1) << 20;

// An upload still in flight on `stream`: a node on another stream waits for `done` before
// reading the device copy (array::Data::device_ready).
struct UploadEvent {
  cudaEvent_t done{nullptr};
  cudaStream_t stream{nullptr};
  ~UploadEvent() {
    // Allowed while pending: the event's resources go once it completes. Errors at process
    // exit (the runtime unloading) are moot.
    if (done) cudaEventDestroy(done);
  }
};

// Copies n host bytes to dev on the current stream; returns the event other streams must
// wait for, or null when the copy has completed. A copy from pageable memory waits for the
// stream's earlier work, so small ones are staged through pinned memory and stay
// asynchronous (the staging block is held until the stream has run the copy). Large ones
// are waited for: the caller may free their source as soon as this returns.
std::shared_ptr<UploadEvent> upload(void* dev, const void* host, size_t n) {
  cudaStream_t s = stream();
  if (n > kStagedUpload) {
    check(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync H2D");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    return nullptr;
  }
  void* staged = pinned_malloc(n);
  std::memcpy(staged, host, n);
  cudaError_t err = cudaMemcpyAsync(dev, staged, n, cudaMemcpyHostToDevice, s);
  if (err != cudaSuccess) {
    pinned_free(staged, n);
    check(err, "cudaMemcpyAsync H2D");
  }
  current_state()->hold_pinned(staged, n);
  auto ev = std::make_shared<UploadEvent>();
  check(cudaEventCreateWithFlags(&ev->done, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(ev->done, s), "cudaEventRecord");
  ev->stream = s;
  return ev;
}

} // namespace

void* device_ptr(const array& arr) {
  auto data = arr.data_shared_ptr();
  if (!data) throw std::runtime_error("[cuda] input array has no data.");
  void* dev = data->device.load();
  if (dev) {
    // Published by another stream's upload that may still be in flight: order after it.
    // (device_ready is written before `device` is published and never changed.)
    if (auto* ev = static_cast<UploadEvent*>(data->device_ready.get());
        ev && ev->stream != stream()) {
      check(cudaStreamWaitEvent(stream(), ev->done, 0), "cudaStreamWaitEvent");
    }
  } else {
    std::lock_guard<std::mutex> lk(data->residency_mtx);
    dev = data->device.load();
    if (!dev) {
      dev = device_malloc(data->nbytes);
      if (data->nbytes > 0) {
        try {
          data->device_ready = upload(dev, data->buffer.raw_ptr(), data->nbytes);
        } catch (...) {
          device_free(dev, data->nbytes);
          throw;
        }
      }
      data->device.store(dev);
    }
  }
  return static_cast<char*>(dev) + arr.offset() * int64_t(arr.itemsize());
}

void* alloc_output(array& out) {
  size_t n = out.nbytes();
  void* p = device_malloc(n);
  out.set_device_data(p, n);
  return p;
}

void* alloc_output(array& out, size_t data_size, Strides strides, array::Flags flags) {
  size_t n = data_size * out.itemsize();
  void* p = device_malloc(n);
  out.set_device_data(p, n, data_size, std::move(strides), flags);
  return p;
}

void* donate_or_alloc_output(const array& in, array& out, bool* donated) {
  *donated = false;
  const array::Data* raw = nullptr;
  bool device_only = false;
  {
    auto data = in.data_shared_ptr(); // released before the owners are counted
    raw = data.get();
    device_only = data && !data->buffer.ptr() && data->device.load() && !data->device_ready;
  }
  if (!device_only || out.size() == 0 || !donation_layout_ok(in, out) || !in.is_sole_handle()) {
    return alloc_output(out);
  }
  // Owners besides in's descriptor must all be this stream's holds (views that kernels
  // launched earlier still read): those kernels run before the writes launched next.
  const long others = in.buffer_owners() - 1;
  if (others > 0) {
    StreamState* st = current_state();
    if (!st || st->holds_of(raw) != others) return alloc_output(out);
  }
  out.copy_shared_buffer(in);
  *donated = true;
  return device_ptr(out);
}

void eval_on_host(Primitive& p, const std::vector<array>& inputs, std::vector<array>& outputs) {
  // Inputs made by this stream's kernels must be finished before the host reads them (the
  // host copies are made lazily by raw_data()).
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
  p.eval_cpu(inputs, outputs);
}

} // namespace cu

} // namespace nuvec
