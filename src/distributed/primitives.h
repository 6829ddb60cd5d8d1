// nuvec: the collective primitives (MLX's distributed/primitives.h): AllReduce (sum, max,
// min), AllGather, ReduceScatter (sum_scatter), Send and Recv. Each holds its Group and runs
// on the CPU through the group's backend (src/distributed/mpi/ for MPI); on the GPU on device
// buffers over an NCCL group, through host copies (cu::eval_on_host) over the others
// (src/backend/cuda/distributed/primitives.cpp). Rules in primitives.cpp,
// MLX's and shared/seeds/000's: each process's loss is its own, so a reduction passes the
// cotangent through (the convention under which a tensor-parallel layer's gradients equal the
// single-process model's), a gather's input gets the cotangent's rows of this rank.
#pragma once

#include "nuvec/distributed/distributed.h"
#include "nuvec/primitive_families.h"

namespace nuvec::distributed {

/// A primitive over a group of processes.
class DistPrimitive : public Primitive {
 public:
  DistPrimitive(Stream stream, Group group) : Primitive(stream), group_(std::move(group)) {}
  const Group& group() const { return group_; }

 private:
  Group group_;
};

/// all_sum, all_max, all_min: the element-wise reduction over the group (x's shape and dtype).
class AllReduce : public DistPrimitive {
 public:
  AllReduce(Stream stream, Group group, detail::ReduceOp op) : DistPrimitive(stream, std::move(group)), op_(op) {}
  detail::ReduceOp op() const { return op_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  detail::ReduceOp op_;
};

/// all_gather: every process's x concatenated along axis 0 (a scalar becomes [size]).
class AllGather : public DistPrimitive {
 public:
  using DistPrimitive::DistPrimitive;
  NUVEC_PRIMITIVE_RULES()
};

/// sum_scatter: this rank's rows of the sum over the group ([n / size, ...]).
class ReduceScatter : public DistPrimitive {
 public:
  using DistPrimitive::DistPrimitive;
  NUVEC_PRIMITIVE_RULES()
};

/// send: sends x to rank dst; the output is x itself (so the send can be a dependency).
class Send : public DistPrimitive {
 public:
  Send(Stream stream, Group group, int dst) : DistPrimitive(stream, std::move(group)), dst_(dst) {}
  int dst() const { return dst_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int dst_;
};

/// recv: an array of the given shape and dtype from rank src (no inputs).
class Recv : public DistPrimitive {
 public:
  Recv(Stream stream, Group group, int src) : DistPrimitive(stream, std::move(group)), src_(src) {}
  int src() const { return src_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int src_;
};

} // namespace nuvec::distributed
