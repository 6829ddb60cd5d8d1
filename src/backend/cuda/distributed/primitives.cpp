// nuvec: eval_gpu of the collective primitives (src/distributed/primitives.h). Over an NCCL
// group the collective runs on device buffers, enqueued on the node's CUDA stream by the group
// (nccl_group.cpp): the input is made row-contiguous on the device and the output allocated
// before the call, and nothing waits for the device. Over any other group (MPI) the node runs
// on the host through cu::eval_on_host (the stream is synchronised, the data copied), as MLX
// runs CPU backends' collectives.
#include <cstring>

#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "distributed/primitives.h"

namespace nuvec::distributed {

namespace {

bool on_device(const Group& g) {
  return std::strcmp(g.raw_group()->backend(), "nccl") == 0;
}

} // namespace

void AllReduce::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (!on_device(group())) return cu::eval_on_host(*this, inputs, outputs);
  const array in = cu::as_row_contiguous(inputs[0]);
  cu::alloc_output(outputs[0]);
  group().raw_group()->all_reduce(in, outputs[0], op());
}

void AllGather::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (!on_device(group())) return cu::eval_on_host(*this, inputs, outputs);
  const array in = cu::as_row_contiguous(inputs[0]);
  cu::alloc_output(outputs[0]);
  group().raw_group()->all_gather(in, outputs[0]);
}

void ReduceScatter::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (!on_device(group())) return cu::eval_on_host(*this, inputs, outputs);
  const array in = cu::as_row_contiguous(inputs[0]);
  cu::alloc_output(outputs[0]);
  group().raw_group()->sum_scatter(in, outputs[0]);
}

void Send::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (!on_device(group())) return cu::eval_on_host(*this, inputs, outputs);
  const array in = cu::as_row_contiguous(inputs[0]);
  group().raw_group()->send(in, dst());
  outputs[0].copy_shared_buffer(inputs[0]);
}

void Recv::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (!on_device(group())) return cu::eval_on_host(*this, inputs, outputs);
  cu::alloc_output(outputs[0]);
  group().raw_group()->recv(outputs[0], src());
}

} // namespace nuvec::distributed
