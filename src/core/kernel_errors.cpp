// nuvec: the kernel-error channel (kernel_errors.h).
#include "core/kernel_errors.h"

#include <cstring>
#include <mutex>

#include "nuvec/allocator.h"

namespace nuvec {

namespace {
std::mutex error_mtx;
std::exception_ptr first_error;
} // namespace

void zero_failed_outputs(std::vector<array>& outputs) {
  for (auto& o : outputs) {
    try {
      // One zero broadcast over the shape (stride 0, as broadcast_to lays it out): a failed
      // node must not need a full-size buffer, since running out of memory is a common way
      // to fail. A new buffer also leaves inputs the kernel may have shared untouched.
      auto buf = allocator::malloc(o.itemsize());
      std::memset(buf.raw_ptr(), 0, o.itemsize());
      const bool dense = o.size() <= 1;
      o.set_data(buf, 1, Strides(o.ndim(), 0), array::Flags{dense, dense, dense});
    } catch (...) {
      // Not even one element: the error is already recorded; the output stays unreadable.
    }
  }
}

void record_kernel_error(std::exception_ptr e) {
  std::lock_guard<std::mutex> lk(error_mtx);
  if (!first_error) first_error = std::move(e);
}

void rethrow_kernel_error() {
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lk(error_mtx);
    std::swap(err, first_error);
  }
  if (err) std::rethrow_exception(err);
}

} // namespace nuvec
