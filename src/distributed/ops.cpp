// nuvec: the collective ops (MLX's distributed/ops.cpp): each checks its arguments and
// records one node of src/distributed/primitives.h over the group (init()'s by default). A
// group of one process needs no communication: the reductions and the gather are the
// identity there (MLX's shortcut), sum_scatter too, and send/recv have no peer. An NCCL group
// takes GPU streams only, and reduces no 16-bit integers; both are checked before the
// shortcut, so a program that runs on one GPU runs on several.
#include "nuvec/distributed/ops.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "distributed/nccl/nccl.h"
#include "distributed/primitives.h"
#include "nuvec/ops.h"

namespace nuvec::distributed {

namespace {

Group resolve(const std::optional<Group>& group) {
  return group.value_or(init());
}

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// The dtypes the backends move: every real dtype, complex64 for the sum and the gathers.
void check_dtype(const array& x, const char* op, bool ordered) {
  if (ordered && x.dtype() == complex64) {
    throw std::invalid_argument(std::string("[") + op + "] complex64 has no order to take the extreme of.");
  }
}

// What the group's backend cannot do: NCCL moves GPU buffers only, and has no 16-bit integers.
void check_backend(const Group& g, Dtype dtype, StreamOrDevice s, const char* op, bool reduces) {
  if (std::string_view(g.raw_group()->backend()) != "nccl") return;
  if (to_stream(s).device == Device::cpu) nccl::throw_not_on_gpu(op);
  if (reduces && (dtype == int16 || dtype == uint16)) nccl::throw_no_reduction(op, dtype);
}

void check_peer(const Group& g, int peer, const char* op, const char* what) {
  if (g.size() == 1) {
    throw std::invalid_argument(std::string("[") + op + "] a group of one process has no peer to exchange with.");
  }
  if (peer < 0 || peer >= g.size()) {
    throw std::invalid_argument(
        std::string("[") + op + "] " + what + " rank " + std::to_string(peer) + " is outside the group of " +
        std::to_string(g.size()) + " processes.");
  }
  if (peer == g.rank()) {
    throw std::invalid_argument(
        std::string("[") + op + "] " + what + " rank " + std::to_string(peer) + " is this process itself.");
  }
}

array reduce(const array& x, std::optional<Group> group, StreamOrDevice s, detail::ReduceOp op, const char* name) {
  check_dtype(x, name, op != detail::ReduceOp::sum);
  const Group g = resolve(group);
  check_backend(g, x.dtype(), s, name, true);
  if (g.size() == 1) return x;
  return array(x.shape(), x.dtype(), std::make_shared<AllReduce>(to_stream(s), g, op), {x});
}

} // namespace

array all_sum(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce(x, std::move(group), s, detail::ReduceOp::sum, "all_sum");
}

array all_max(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce(x, std::move(group), s, detail::ReduceOp::max, "all_max");
}

array all_min(const array& x, std::optional<Group> group, StreamOrDevice s) {
  return reduce(x, std::move(group), s, detail::ReduceOp::min, "all_min");
}

array all_gather(const array& x, std::optional<Group> group, StreamOrDevice s) {
  const Group g = resolve(group);
  check_backend(g, x.dtype(), s, "all_gather", false);
  if (g.size() == 1) return x;
  auto p = std::make_shared<AllGather>(to_stream(s), g);
  Shape shape = p->output_shapes({x})[0];
  return array(std::move(shape), x.dtype(), std::move(p), {x});
}

array sum_scatter(const array& x, std::optional<Group> group, StreamOrDevice s) {
  const Group g = resolve(group);
  if (x.ndim() == 0 || x.shape(0) % g.size() != 0) {
    throw std::invalid_argument(
        "[sum_scatter] the first axis of x " + shape_str(x.shape()) + " must split evenly over the group of " +
        std::to_string(g.size()) + " processes.");
  }
  check_backend(g, x.dtype(), s, "sum_scatter", true);
  if (g.size() == 1) return x;
  auto p = std::make_shared<ReduceScatter>(to_stream(s), g);
  Shape shape = p->output_shapes({x})[0];
  return array(std::move(shape), x.dtype(), std::move(p), {x});
}

array send(const array& x, int dst, std::optional<Group> group, StreamOrDevice s) {
  const Group g = resolve(group);
  check_backend(g, x.dtype(), s, "send", false);
  check_peer(g, dst, "send", "destination");
  return array(x.shape(), x.dtype(), std::make_shared<Send>(to_stream(s), g, dst), {x});
}

array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group, StreamOrDevice s) {
  const Group g = resolve(group);
  check_backend(g, dtype, s, "recv", false);
  check_peer(g, src, "recv", "source");
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("[recv] negative dimension in shape " + shape_str(shape) + ".");
  }
  return array(std::move(shape), dtype, std::make_shared<Recv>(to_stream(s), g, src), {});
}

array recv_like(const array& x, int src, std::optional<Group> group, StreamOrDevice s) {
  return recv(x.shape(), x.dtype(), src, std::move(group), s);
}

} // namespace nuvec::distributed
