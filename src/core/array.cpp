// nuvec: the array descriptor: construction, siblings, detaching, layout and data
// (semantics of MLX's array.cpp; destruction is iterative so deep graphs free safely).
#include "nuvec/array.h"

#include "backend/gpu.h"

#include <sstream>

#include "backend/common/dispatch.h"
#include "core/scheduler.h"
#include "nuvec/ops.h"
#include "nuvec/primitives.h"
#include "nuvec/transforms.h"
#include "transforms/trace.h"
#include "nuvec/utils.h"

namespace nuvec {

namespace {

size_t checked_size(const Shape& shape) {
  size_t n = 1;
  for (auto d : shape) {
    if (d < 0) {
      std::ostringstream msg;
      msg << "[array] shape must have non-negative dimensions; got " << shape << ".";
      throw std::invalid_argument(msg.str());
    }
    n *= static_cast<size_t>(d);
  }
  return n;
}

Strides row_major_strides(const Shape& shape) {
  Strides s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    s[i] = s[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  }
  return s;
}

} // namespace

array::ArrayDesc::ArrayDesc(Shape shape_, Dtype dtype_)
    : shape(std::move(shape_)),
      size(checked_size(shape)),
      dtype(dtype_),
      status(Status::available),
      flags{true, true, true} {
  strides = row_major_strides(shape);
}

array::ArrayDesc::ArrayDesc(
    Shape shape_,
    Dtype dtype_,
    std::shared_ptr<Primitive> primitive_,
    std::vector<array> inputs_)
    : shape(std::move(shape_)),
      size(checked_size(shape)),
      dtype(dtype_),
      primitive(std::move(primitive_)),
      status(Status::unscheduled),
      flags{true, true, true},
      inputs(std::move(inputs_)) {
  strides = row_major_strides(shape);
  // A node computed from a tracer is a tracer: eval, item or data inside a transform must
  // leave the traced graph attached, or the gradient through it silently becomes zero
  // (MLX's ArrayDesc::init).
  for (auto& in : inputs) is_tracer |= in.is_tracer();
}

array::ArrayDesc::~ArrayDesc() {
  // Without this loop, freeing the last handle of a chain of n nodes would recurse n deep.
  // Inputs whose descriptor we hold the last reference to are emptied into a local stack
  // before they die, so each destructor below runs with nothing left to free recursively.
  std::vector<array> pending = std::move(inputs);
  while (!pending.empty()) {
    array a = std::move(pending.back());
    pending.pop_back();
    auto& desc = a.array_desc_;
    if (!desc) continue;
    // Sibling descriptors reference each other; break the cycle when only the siblings
    // (and `a`) hold them, queueing everything the node held instead of recursing.
    size_t n = desc->siblings.size() + 1;
    bool last = desc.use_count() == 1;
    if (!last && n > 1 && desc.use_count() == static_cast<long>(n)) {
      bool only_siblings = true;
      for (auto& s : desc->siblings) {
        only_siblings &= s.array_desc_.use_count() == static_cast<long>(n - 1);
      }
      if (only_siblings) {
        for (auto& x : unlink_node(a)) pending.push_back(std::move(x));
        continue;
      }
    }
    if (last) {
      for (auto& in : desc->inputs) pending.push_back(std::move(in));
      desc->inputs.clear();
    }
  }
}

array::array(const std::complex<float>& val, Dtype dtype)
    : array_desc_(std::make_shared<ArrayDesc>(Shape{}, dtype)) {
  complex64_t v(val);
  init_list(&v, 1, complex64);
}

array::array(std::initializer_list<float> data)
    : array_desc_(std::make_shared<ArrayDesc>(
          Shape{static_cast<int32_t>(data.size())},
          float32)) {
  init_range(data.begin(), data.size());
}

array::array(std::initializer_list<int> data, Dtype dtype)
    : array_desc_(std::make_shared<ArrayDesc>(
          Shape{static_cast<int32_t>(data.size())},
          dtype)) {
  init_range(data.begin(), data.size());
}

array::array(allocator::Buffer data, Shape shape, Dtype dtype, Deleter deleter)
    : array_desc_(std::make_shared<ArrayDesc>(std::move(shape), dtype)) {
  set_data(data, std::move(deleter));
}

array::array(
    void* data,
    Shape shape,
    Dtype dtype,
    const std::function<void(void*)>& deleter)
    : array_desc_(std::make_shared<ArrayDesc>(std::move(shape), dtype)) {
  auto d = [deleter](allocator::Buffer b) {
    if (deleter) deleter(b.raw_ptr());
  };
  set_data(allocator::Buffer(data), d);
}

array::array(
    Shape shape,
    Dtype dtype,
    std::shared_ptr<Primitive> primitive,
    std::vector<array> inputs)
    : array_desc_(std::make_shared<ArrayDesc>(
          std::move(shape),
          dtype,
          std::move(primitive),
          std::move(inputs))) {}

std::vector<array> array::make_arrays(
    std::vector<Shape> shapes,
    const std::vector<Dtype>& dtypes,
    const std::shared_ptr<Primitive>& primitive,
    const std::vector<array>& inputs) {
  std::vector<array> outputs;
  outputs.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    outputs.emplace_back(std::move(shapes[i]), dtypes[i], primitive, inputs);
  }
  if (outputs.size() > 1) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::vector<array> siblings;
      for (size_t j = 0; j < outputs.size(); ++j) {
        if (j != i) siblings.push_back(outputs[j]);
      }
      outputs[i].set_siblings(std::move(siblings), static_cast<uint16_t>(i));
    }
  }
  return outputs;
}

array& array::operator=(const array& other) & {
  if (id() != other.id()) {
    array tmp(other);
    std::swap(array_desc_, tmp.array_desc_);
  }
  return *this;
}

array& array::operator=(array&& other) & {
  // The old descriptor dies through ~array (which breaks sibling cycles), not in place.
  array tmp(std::move(other));
  std::swap(array_desc_, tmp.array_desc_);
  return *this;
}

array::~array() {
  if (!array_desc_) return;
  // A node's outputs reference each other through their sibling lists: when nothing but
  // those lists (and this handle) holds them, detach them so the cycle is freed.
  auto& sibs = array_desc_->siblings;
  if (sibs.empty()) return;
  long n = static_cast<long>(sibs.size()) + 1;
  if (array_desc_.use_count() != n) return;
  for (auto& s : sibs) {
    if (s.array_desc_.use_count() != n - 1) return;
  }
  release_iteratively(unlink_node(*this));
}

int array::shape(int dim) const {
  int n = static_cast<int>(ndim());
  int d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) {
    std::ostringstream msg;
    msg << "[array::shape] axis " << dim << " is out of bounds for an array with " << n
        << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  return array_desc_->shape[d];
}

int64_t array::strides(int dim) const {
  int n = static_cast<int>(ndim());
  int d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) {
    std::ostringstream msg;
    msg << "[array::strides] axis " << dim << " is out of bounds for an array with " << n
        << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  return array_desc_->strides[d];
}

void array::eval() {
  if (status() == Status::unscheduled) {
    nuvec::eval({*this});
  } else {
    wait();
  }
}

void array::ensure_evaluated() {
  // Kernels run on stream workers: their inputs are ready (stream order, or an event wait
  // enqueued before the node) and their outputs are being written, possibly before the
  // scheduler has even marked them evaluated. Evaluating or waiting there would deadlock.
  if (scheduler::on_worker_thread()) return;
  if (status() == Status::unscheduled) {
    eval();
  } else if (status() == Status::evaluated) {
    wait();
  }
}

Primitive& array::primitive() const {
  if (!array_desc_->primitive) {
    throw std::invalid_argument("[array::primitive] the array has no primitive.");
  }
  return *array_desc_->primitive;
}

std::vector<array> array::outputs() const {
  auto idx = array_desc_->position;
  std::vector<array> outputs;
  outputs.reserve(siblings().size() + 1);
  outputs.insert(outputs.end(), siblings().begin(), siblings().begin() + idx);
  outputs.push_back(*this);
  outputs.insert(outputs.end(), siblings().begin() + idx, siblings().end());
  return outputs;
}

void array::detach() {
  release_iteratively(unlink_node(*this));
}

void array::release_iteratively(std::vector<array> handles) {
  if (!handles.empty()) {
    // A holder's destructor frees long input chains with its loop, not by recursion.
    ArrayDesc holder(Shape{}, bool_);
    holder.inputs = std::move(handles);
  }
}

std::vector<array> array::unlink_node(array& a) {
  // Every list is emptied before any handle in it is released: releasing a handle can
  // re-enter ~array for another output of the node, which must find empty lists rather
  // than vectors being cleared around it.
  std::vector<array> siblings = std::move(a.array_desc_->siblings);
  a.array_desc_->siblings.clear();
  std::vector<array> released; // sibling lists and inputs of every output, released last
  released.reserve(siblings.size() * (siblings.size() + 1));
  auto unlink = [&](ArrayDesc& d) {
    for (auto& x : d.siblings) released.push_back(std::move(x));
    d.siblings.clear();
    for (auto& x : d.inputs) released.push_back(std::move(x));
    d.inputs.clear();
    d.primitive = nullptr;
    d.position = 0;
  };
  unlink(*a.array_desc_);
  for (auto& s : siblings) unlink(*s.array_desc_);
  for (auto& s : siblings) released.push_back(std::move(s));
  return released;
}

// The event is read and dropped under the graph lock: another thread may be waiting on
// the same array, or evaluating a graph that reads it.
void array::wait() {
  if (status() == Status::available) return;
  Event e;
  {
    std::lock_guard<std::mutex> lk(detail::graph_mutex());
    e = event();
  }
  if (e.valid()) e.wait();
  {
    std::lock_guard<std::mutex> lk(detail::graph_mutex());
    detach_event();
    set_status(Status::available);
  }
}

bool array::is_available() const {
  if (status() == Status::available) return true;
  if (status() != Status::evaluated) return false;
  std::lock_guard<std::mutex> lk(detail::graph_mutex());
  if (!event().valid() || event().is_signaled()) {
    set_status(Status::available);
    return true;
  }
  return false;
}

bool array::is_tracer() const {
  return (array_desc_->is_tracer && detail::in_tracing()) || detail::retain_graph();
}

array::Data::~Data() {
  if (d && buffer.ptr()) d(buffer);
  if (void* p = device.load()) gpu::free_device(p, nbytes);
}

void* array::host_data_slow() const {
  gpu::ensure_host(*array_desc_->data);
  void* p = static_cast<char*>(array_desc_->data->buffer.raw_ptr()) +
      array_desc_->offset * int64_t(itemsize());
  array_desc_->data_ptr.store(p, std::memory_order_release);
  return p;
}

void array::set_device_data(void* device_ptr, size_t nbytes) {
  set_data(allocator::Buffer(nullptr));
  array_desc_->data->device = device_ptr;
  array_desc_->data->nbytes = nbytes;
}

void array::set_device_data(
    void* device_ptr,
    size_t nbytes,
    size_t data_size,
    Strides strides,
    Flags flags) {
  set_data(allocator::Buffer(nullptr), data_size, std::move(strides), flags);
  array_desc_->data->device = device_ptr;
  array_desc_->data->nbytes = nbytes;
}

void array::set_data(allocator::Buffer buffer, Deleter d) {
  array_desc_->data = std::make_shared<Data>(buffer, std::move(d));
  array_desc_->data->nbytes = size() * itemsize();
  array_desc_->data_ptr = buffer.raw_ptr();
  array_desc_->data_size = size();
  array_desc_->offset = 0;
  array_desc_->flags = {true, true, true};
  array_desc_->strides = row_major_strides(shape());
  // A column-major flag only holds for at most one non-unit dimension.
  size_t non_unit = 0;
  for (auto d_ : shape()) non_unit += d_ != 1;
  array_desc_->flags.col_contiguous = non_unit <= 1;
}

void array::set_data(
    allocator::Buffer buffer,
    size_t data_size,
    Strides strides,
    Flags flags,
    Deleter d) {
  array_desc_->data = std::make_shared<Data>(buffer, std::move(d));
  array_desc_->data->nbytes = data_size * itemsize();
  array_desc_->data_ptr = buffer.raw_ptr();
  array_desc_->data_size = data_size;
  array_desc_->offset = 0;
  array_desc_->strides = std::move(strides);
  array_desc_->flags = flags;
}

void array::copy_shared_buffer(
    const array& other,
    const Strides& strides,
    Flags flags,
    size_t data_size,
    int64_t offset) {
  array_desc_->data = other.array_desc_->data;
  array_desc_->strides = strides;
  array_desc_->flags = flags;
  array_desc_->data_size = data_size;
  array_desc_->offset = other.array_desc_->offset + offset;
  // Null while the data lives only on a GPU: raw_data() resolves it from the offset.
  void* base = other.array_desc_->data_ptr.load(std::memory_order_acquire);
  array_desc_->data_ptr = base ? static_cast<char*>(base) + offset * int64_t(itemsize()) : nullptr;
}

void array::copy_shared_buffer(const array& other) {
  copy_shared_buffer(other, other.strides(), other.flags(), other.data_size());
}

void array::init_from_host(const void* src, Dtype from, size_t n) {
  auto buf = allocator::malloc(std::max<size_t>(n, 1) * itemsize());
  set_data(buf);
  copy_host_elements(src, from, buf.raw_ptr(), dtype(), n);
}

void array::convert_scalar(const void* src, Dtype from, void* dst, Dtype to) {
  copy_host_elements(src, from, dst, to, 1);
}

void copy_host_elements(const void* src, Dtype from, void* dst, Dtype to, size_t n) {
  dispatch_all_types(from, [&]<typename In>() {
    dispatch_all_types(to, [&]<typename Out>() {
      auto in = static_cast<const In*>(src);
      auto out = static_cast<Out*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = cast_to<Out>(in[i]);
    });
  });
}

array::ArrayIterator::ArrayIterator(const array& arr, int idx) : arr(arr), idx(idx) {
  if (arr.ndim() == 0) {
    throw std::invalid_argument("[ArrayIterator] Cannot iterate over 0-d array.");
  }
}

array::ArrayIterator::reference array::ArrayIterator::operator*() const {
  Shape start(arr.ndim(), 0);
  Shape stop = arr.shape();
  start[0] = idx;
  stop[0] = idx + 1;
  return squeeze(slice(arr, start, stop), 0);
}

} // namespace nuvec
