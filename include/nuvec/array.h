// nuvec: the lazy array (MLX's array.h API). An array is a cheap handle to a descriptor:
// shape, strides, dtype, a shared data buffer (views share it) and, until it is evaluated,
// the primitive that computes it with its inputs and siblings.
#pragma once

#include <algorithm>
#include <atomic>
#include <complex>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "nuvec/allocator.h"
#include "nuvec/dtype.h"
#include "nuvec/event.h"
#include "nuvec/stream.h"

namespace nuvec {

class Primitive;

/// Dimensions, int32 as in MLX.
using Shape = std::vector<int32_t>;
/// Strides in elements, int64 as in MLX.
using Strides = std::vector<int64_t>;
/// Frees a buffer handed to an array.
using Deleter = std::function<void(allocator::Buffer)>;

class array {
 public:
  /// A 0-d array holding val, converted to dtype.
  template <typename T>
  explicit array(T val, Dtype dtype = TypeToDtype<T>());

  /// A 0-d complex64 array.
  explicit array(const std::complex<float>& val, Dtype dtype = complex64);

  /// An array of shape `shape` filled from an iterator (row-major), converted to dtype.
  /// Throws std::invalid_argument for a negative dimension.
  template <typename It>
  explicit array(
      It data,
      const Shape& shape,
      Dtype dtype =
          TypeToDtype<typename std::iterator_traits<It>::value_type>());

  /// A 1-d array from a list.
  template <typename T>
  array(std::initializer_list<T> data, Dtype dtype = TypeToDtype<T>());

  /// A 1-d float32 array (so that `array({1.0f, 2.0f})` and `array({1, 2})` both work).
  array(std::initializer_list<float> data);

  /// A 1-d array of ints converted to dtype.
  array(std::initializer_list<int> data, Dtype dtype);

  /// An array of `shape` from a list; throws std::invalid_argument when the list's length
  /// is not the shape's size.
  template <typename T>
  array(
      std::initializer_list<T> data,
      const Shape& shape,
      Dtype dtype = TypeToDtype<T>());

  /// Adopts an allocator buffer (zero copy); `deleter` frees it with the array.
  array(
      allocator::Buffer data,
      Shape shape,
      Dtype dtype,
      Deleter deleter = allocator::free);

  /// Wraps caller-owned memory (zero copy); `deleter(data)` runs when the last view dies.
  array(
      void* data,
      Shape shape,
      Dtype dtype,
      const std::function<void(void*)>& deleter);

  /// An unevaluated array computed by `primitive` from `inputs`.
  array(
      Shape shape,
      Dtype dtype,
      std::shared_ptr<Primitive> primitive,
      std::vector<array> inputs);

  /// The outputs of one multi-output node (each other's siblings).
  static std::vector<array> make_arrays(
      std::vector<Shape> shapes,
      const std::vector<Dtype>& dtypes,
      const std::shared_ptr<Primitive>& primitive,
      const std::vector<array>& inputs);

  array(const array& other) = default;
  array(array&& other) = default;
  array& operator=(const array& other) &;
  array& operator=(array&& other) &;
  array& operator=(const array& other) && = delete;
  array& operator=(array&& other) && = delete;
  ~array();

  /// Bytes per element.
  size_t itemsize() const { return size_of(dtype()); }
  /// Number of elements.
  size_t size() const { return array_desc_->size; }
  /// Bytes of the logical array (size * itemsize).
  size_t nbytes() const { return size() * itemsize(); }
  size_t ndim() const { return array_desc_->shape.size(); }
  const Shape& shape() const { return array_desc_->shape; }
  /// The size of dimension dim (negative counts from the end). Throws std::out_of_range.
  int shape(int dim) const;
  const Strides& strides() const { return array_desc_->strides; }
  /// The stride of dimension dim (negative counts from the end).
  int64_t strides(int dim) const;
  Dtype dtype() const { return array_desc_->dtype; }

  /// Evaluates the array (blocking).
  void eval();

  /// The single element, converted to T (evaluates first). Throws std::invalid_argument
  /// when size() != 1.
  template <typename T>
  T item();
  template <typename T>
  T item() const;

  /// Iterates over the first axis, yielding slices (MLX's ArrayIterator).
  struct ArrayIterator {
    using iterator_category = std::random_access_iterator_tag;
    using difference_type = size_t;
    using value_type = const array;
    using reference = value_type;

    explicit ArrayIterator(const array& arr, int idx = 0);
    reference operator*() const;
    ArrayIterator& operator+(difference_type diff) {
      idx += diff;
      return *this;
    }
    ArrayIterator& operator++() {
      idx++;
      return *this;
    }
    friend bool operator==(const ArrayIterator& a, const ArrayIterator& b) {
      return a.arr.id() == b.arr.id() && a.idx == b.idx;
    }
    friend bool operator!=(const ArrayIterator& a, const ArrayIterator& b) {
      return !(a == b);
    }

   private:
    const array& arr;
    int idx;
  };
  ArrayIterator begin() const { return ArrayIterator(*this); }
  ArrayIterator end() const { return ArrayIterator(*this, shape(0)); }

  /// A unique id for the descriptor (its address).
  std::uintptr_t id() const {
    return reinterpret_cast<std::uintptr_t>(array_desc_.get());
  }
  /// The id of the primitive (0 without one).
  std::uintptr_t primitive_id() const {
    return reinterpret_cast<std::uintptr_t>(array_desc_->primitive.get());
  }

  /// Owner of a buffer: frees it through its deleter when the last view goes.
  ///
  /// nuvec's addition for GPUs without unified memory: the bytes can live on the host
  /// (`buffer`), on the GPU (`device`) or both. The backend makes the missing copy on first
  /// use (src/backend/cuda/residency.cpp); arrays are immutable once evaluated, so the two
  /// copies never diverge. `nbytes` is the allocation's extent, which both copies share.
  struct Data {
    allocator::Buffer buffer; // host copy; null while the data lives only on the GPU
    Deleter d;
    std::atomic<void*> device{nullptr}; // GPU copy (backend allocator), or null
    // The backend's token for a device copy still being written asynchronously (set before
    // `device` is published, never changed after): other streams wait on it first.
    std::shared_ptr<void> device_ready;
    size_t nbytes{0};
    std::mutex residency_mtx; // serialises making the missing copy
    Data(allocator::Buffer buffer, Deleter d = allocator::free)
        : buffer(buffer), d(std::move(d)) {}
    Data(const Data&) = delete;
    Data& operator=(const Data&) = delete;
    ~Data();
  };

  struct Flags {
    // Elements fill [data, data + data_size) with no gaps (any order).
    bool contiguous : 1;
    bool row_contiguous : 1;
    bool col_contiguous : 1;
  };

  /// The primitive computing the array (throws std::invalid_argument without one).
  Primitive& primitive() const;
  std::shared_ptr<Primitive>& primitive_ptr() const {
    return array_desc_->primitive;
  }
  bool has_primitive() const { return array_desc_->primitive != nullptr; }
  const std::vector<array>& inputs() const { return array_desc_->inputs; }
  std::vector<array>& inputs() { return array_desc_->inputs; }
  /// The other outputs of this array's node.
  const std::vector<array>& siblings() const { return array_desc_->siblings; }
  std::vector<array>& siblings() { return array_desc_->siblings; }
  void set_siblings(std::vector<array> siblings, uint16_t position) {
    array_desc_->siblings = std::move(siblings);
    array_desc_->position = position;
  }
  /// This array and its siblings in output order.
  std::vector<array> outputs() const;

  /// Drops the primitive, inputs and siblings (after evaluation).
  void detach();

  Flags flags() const { return array_desc_->flags; }
  /// Elements in the buffer region the array uses (size() for dense arrays, fewer for
  /// broadcasts).
  size_t data_size() const { return array_desc_->data_size; }
  allocator::Buffer& buffer() { return array_desc_->data->buffer; }
  const allocator::Buffer& buffer() const { return array_desc_->data->buffer; }
  std::shared_ptr<Data> data_shared_ptr() const { return array_desc_->data; }
  /// Offset of the first element from the buffer start, in elements.
  int64_t offset() const { return array_desc_->offset; }

  /// Whether an op may write its output into this array's buffer (MLX's is_donatable): no
  /// other handle to this array and no other array (view) on its buffer. In a backend's eval
  /// the node's input list holds the only handle once the caller has dropped theirs, so a
  /// KV cache replaced by its slice_update is updated in place. Tracers are never donated
  /// (their inputs are copied, not moved, into the eval).
  bool is_donatable() const {
    return array_desc_.use_count() == 1 && array_desc_->data && array_desc_->data.use_count() == 1;
  }
  /// Owners of this array's buffer (views and backend holds included); 0 without one. With
  /// a single handle to the array, a backend may donate the buffer when every other owner
  /// is its own hold of work ordered before the write (a GPU stream's held buffers).
  long buffer_owners() const { return array_desc_->data ? array_desc_->data.use_count() : 0; }
  /// Whether this handle is the only one to the array.
  bool is_sole_handle() const { return array_desc_.use_count() == 1; }

  /// Pointer to the first element (evaluates the array if it is unscheduled).
  /// Data living only on a GPU is copied to the host first.
  template <typename T>
  T* data() {
    ensure_evaluated();
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    const_cast<array*>(this)->ensure_evaluated();
    return static_cast<const T*>(raw_data());
  }
  /// The host element pointer without evaluating (for kernels); copies GPU-only data to
  /// the host first.
  void* raw_data() const {
    void* p = array_desc_->data_ptr.load(std::memory_order_acquire);
    return (p || !array_desc_->data) ? p : host_data_slow();
  }

  enum class Status {
    unscheduled, // not yet handed to a stream
    evaluated, // handed to a stream; data ready once its event is signaled
    available // data ready
  };
  /// Waits for the array's data (after eval or async_eval).
  void wait();
  // Atomic: a thread may read it (eval's fast path, wait) while another evaluates the graph.
  Status status() const { return array_desc_->status.load(std::memory_order_acquire); }
  bool is_available() const;
  void set_status(Status s) const { array_desc_->status.store(s, std::memory_order_release); }
  Event& event() const { return array_desc_->event; }
  void attach_event(Event e) const { array_desc_->event = std::move(e); }
  void detach_event() const { array_desc_->event = Event{}; }

  void set_tracer(bool is_tracer) {
    // Written only when it changes: transforms clear the flag over every node they walk,
    // including arrays other threads' graphs share, which must see no write.
    if (array_desc_->is_tracer != is_tracer) array_desc_->is_tracer = is_tracer;
  }
  bool is_tracer() const;

  /// Gives the array a new buffer, row-contiguous.
  void set_data(allocator::Buffer buffer, Deleter d = allocator::free);
  /// Gives the array a buffer with explicit layout.
  void set_data(
      allocator::Buffer buffer,
      size_t data_size,
      Strides strides,
      Flags flags,
      Deleter d = allocator::free);
  /// Makes the array a view of `other`'s buffer with the given layout; offset in elements
  /// relative to other's first element.
  void copy_shared_buffer(
      const array& other,
      const Strides& strides,
      Flags flags,
      size_t data_size,
      int64_t offset = 0);
  /// A view with other's layout.
  void copy_shared_buffer(const array& other);

  /// Gives the array `nbytes` of GPU memory from the backend allocator (no host copy until
  /// the host reads it), row-contiguous or with explicit layout. Freed through
  /// gpu::free_device with the last view.
  void set_device_data(void* device_ptr, size_t nbytes);
  void set_device_data(
      void* device_ptr,
      size_t nbytes,
      size_t data_size,
      Strides strides,
      Flags flags);

  /// Replaces this descriptor's layout and buffer with other's (keeps primitive and inputs).
  void overwrite_descriptor(const array& other) { array_desc_ = other.array_desc_; }

  /// Copies n elements of dtype `from` at src into this (unevaluated-free) array's new buffer,
  /// converting to dtype(). Used by the host-data constructors.
  void init_from_host(const void* src, Dtype from, size_t n);

 private:
  void ensure_evaluated();
  void* host_data_slow() const;
  // Drops the node (primitive, inputs, sibling links) from a and all its siblings; returns
  // the handles it held, for the caller to release without recursion.
  static std::vector<array> unlink_node(array& a);
  static void release_iteratively(std::vector<array> handles);
  template <typename T>
  void init_list(const T* data, size_t n, Dtype from_dtype);
  template <typename It>
  void init_range(It first, size_t n);
  static void convert_scalar(const void* src, Dtype from, void* dst, Dtype to);

  struct ArrayDesc {
    Shape shape;
    Strides strides;
    size_t size;
    Dtype dtype;
    std::shared_ptr<Primitive> primitive;
    std::atomic<Status> status;
    Event event;
    Flags flags;
    std::vector<array> inputs;
    std::vector<array> siblings;
    uint32_t position{0};
    bool is_tracer{false};
    std::shared_ptr<Data> data;
    // Host address of the first element; resolved lazily (from any thread that reads the
    // array) when the data lives only on a GPU, hence atomic.
    std::atomic<void*> data_ptr{nullptr};
    size_t data_size{0};
    int64_t offset{0};

    explicit ArrayDesc(Shape shape, Dtype dtype);
    ArrayDesc(
        Shape shape,
        Dtype dtype,
        std::shared_ptr<Primitive> primitive,
        std::vector<array> inputs);
    // Frees input chains iteratively, so that deep graphs do not overflow the stack.
    ~ArrayDesc();
  };

  // Wrapped so that an empty handle never exists outside moved-from states.
  std::shared_ptr<ArrayDesc> array_desc_;
};

/// Element conversion helper: the dtype-dispatched copy behind array's host constructors.
void copy_host_elements(const void* src, Dtype from, void* dst, Dtype to, size_t n);

template <typename T>
array::array(T val, Dtype dtype)
    : array_desc_(std::make_shared<ArrayDesc>(Shape{}, dtype)) {
  init_list(&val, 1, detail::host_dtype<T>());
}

template <typename It>
array::array(It data, const Shape& shape, Dtype dtype)
    : array_desc_(std::make_shared<ArrayDesc>(shape, dtype)) {
  init_range(data, size());
}

template <typename T>
array::array(std::initializer_list<T> data, Dtype dtype)
    : array_desc_(std::make_shared<ArrayDesc>(
          Shape{static_cast<int32_t>(data.size())},
          dtype)) {
  init_range(data.begin(), data.size());
}

template <typename T>
array::array(std::initializer_list<T> data, const Shape& shape, Dtype dtype)
    : array_desc_(std::make_shared<ArrayDesc>(shape, dtype)) {
  if (data.size() != size()) {
    throw std::invalid_argument(
        "[array] Data size and provided shape mismatch in array construction.");
  }
  init_range(data.begin(), data.size());
}

template <typename T>
void array::init_list(const T* data, size_t n, Dtype from_dtype) {
  init_from_host(static_cast<const void*>(data), from_dtype, n);
}

template <typename It>
void array::init_range(It first, size_t n) {
  using T = std::remove_cv_t<typename std::iterator_traits<It>::value_type>;
  // A plain buffer, not std::vector, since std::vector<bool> has no data().
  std::unique_ptr<T[]> buf(new T[n]);
  std::copy_n(first, n, buf.get());
  init_list(buf.get(), n, detail::host_dtype<T>());
}

template <typename T>
T array::item() {
  if (size() != 1) {
    throw std::invalid_argument("[item] Only one element arrays can be converted to scalars.");
  }
  eval();
  T out;
  convert_scalar(raw_data(), dtype(), &out, detail::host_dtype<T>());
  return out;
}

template <typename T>
T array::item() const {
  return const_cast<array*>(this)->item<T>();
}

} // namespace nuvec
