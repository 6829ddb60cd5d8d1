// nuvec: eval_gpu of ScaledDotProductAttention and ScaledDotProductAttentionVjp: the
// inputs in the layout the kernels take (last axis contiguous, copied when not), the
// outputs allocated, and the kernel the node's plan names (params.passes: 0 tiled, 1 or 2
// vector; with params.hopper, the tiled route's Hopper kernel). The kernels:
// attention_vector.cu, attention_tiled.cu, attention_hopper.cu, attention_backward.cu.
#include <cstdint>

#include "backend/cuda/copy.h"
#include "backend/cuda/fast/attention.h"
#include "backend/cuda/runtime/runtime.h"
#include "fast/attention.h"

namespace nuvec {

namespace {

// The first n inputs as the kernels read them: q, k and v with a contiguous last axis (other
// strides are read as they are), the mask as it is (any strides), the sinks contiguous.
std::vector<array> kernel_inputs(const std::vector<array>& in, size_t n, const fast::AttentionParams& p) {
  std::vector<array> out(in.begin(), in.begin() + static_cast<long>(n));
  for (int i = 0; i < 3; ++i) {
    const array& a = out[i];
    if (a.shape(-1) != 1 && a.strides().back() != 1) out[i] = cu::as_row_contiguous(a);
  }
  if (p.has_sinks) out[n - 1] = cu::as_row_contiguous(out[n - 1]);
  return out;
}

// Whether a's rows can be read with 16-byte vectors (cp.async): the first element on a
// 16-byte boundary and every stride of an axis longer than 1 a whole number of vectors.
bool vector_aligned(const array& a) {
  const size_t item = size_of(a.dtype());
  if (reinterpret_cast<uintptr_t>(cu::device_ptr(a)) % 16 != 0) return false;
  for (int i = 0; i + 1 < static_cast<int>(a.ndim()); ++i) {
    if (a.shape(i) > 1 && (a.strides()[i] * item) % 16 != 0) return false;
  }
  return (a.shape(-1) * item) % 16 == 0;
}

cu::AttentionBuffers buffers(const std::vector<array>& in, const fast::AttentionParams& p) {
  cu::AttentionBuffers b;
  b.q = cu::device_ptr(in[0]);
  b.k = cu::device_ptr(in[1]);
  b.v = cu::device_ptr(in[2]);
  if (p.has_mask) b.mask = cu::device_ptr(in[3]);
  if (p.has_sinks) b.sinks = cu::device_ptr(in[p.has_mask ? 4 : 3]);
  return b;
}

} // namespace

void ScaledDotProductAttention::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  std::vector<array> in = kernel_inputs(inputs, inputs.size(), params_);
  if (params_.passes == 0) {
    // The tiled kernel reads q, k and v with cp.async 16-byte copies: a view that is not
    // vector-aligned (an odd offset into a cache, say) is copied to a fresh buffer first.
    for (int i = 0; i < 3; ++i) {
      if (!vector_aligned(in[i])) in[i] = cu::contiguous_copy(in[i]);
    }
  }
  const attention::Geometry g = fast::attention_geometry(in, params_);
  cu::AttentionBuffers buf = buffers(in, params_);
  buf.out = cu::alloc_output(outputs[0]);
  buf.lse = cu::alloc_output<float>(outputs[1]);
  if (outputs[0].size() == 0) return;
  if (params_.passes == 0 && params_.hopper) cu::attention_hopper(in[0].dtype(), g, buf);
  else if (params_.passes == 0) cu::attention_tiled(in[0].dtype(), g, buf);
  else cu::attention_vector(in[0].dtype(), g, buf, params_.passes, params_.key_blocks);
}

void ScaledDotProductAttentionVjp::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  // inputs: q, k, v[, mask][, sinks], out, lse, dout.
  const size_t n = inputs.size() - 3;
  std::vector<array> in = kernel_inputs(inputs, n, params_);
  const attention::Geometry g = fast::attention_geometry(in, params_);
  cu::AttentionGradBuffers buf;
  buf.fwd = buffers(in, params_);
  const array out = cu::as_row_contiguous(inputs[n]);
  const array lse = cu::as_row_contiguous(inputs[n + 1]);
  const array dout = cu::as_row_contiguous(inputs[n + 2]);
  buf.out = cu::device_ptr(out);
  buf.fwd.lse = const_cast<float*>(cu::device_ptr<float>(lse));
  buf.dout = cu::device_ptr(dout);
  buf.dq = cu::alloc_output(outputs[0]);
  buf.dk = cu::alloc_output(outputs[1]);
  buf.dv = cu::alloc_output(outputs[2]);
  if (params_.has_sinks) buf.dsinks = cu::alloc_output(outputs[3]);
  // Empty q or k is the kernel's case too (dk, dv or dq are then zeros, not unwritten).
  cu::attention_backward(in[0].dtype(), g, buf);
}

} // namespace nuvec
