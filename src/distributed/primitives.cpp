// nuvec: rules, shapes and CPU evaluation of the collective primitives (primitives.h). The
// rules are MLX's (mlx/distributed/primitives.cpp) and shared/seeds/000's: every process's
// loss is its own and the other processes' inputs are constants to it, so
//   all_sum:    vjp passes the cotangent through, jvp is all_sum of the tangent;
//   all_max/min: the derivative goes to the processes holding the extreme, split evenly among
//               ties (MLX passes the cotangent through and has no jvp: a derivative that is
//               not the function's; NumPy's answer, the subgradient of max, is taken here);
//   all_gather: vjp is this rank's rows of the cotangent, jvp all_gather of the tangent;
//   sum_scatter: vjp puts the cotangent in this rank's rows (zeros elsewhere), jvp
//               sum_scatter of the tangent;
//   send: the output is the input (vjp and jvp pass through); recv: a constant.
// vmap moves a batch axis off axis 0 for the ops that concatenate or split along it.
#include "distributed/primitives.h"

#include <stdexcept>
#include <string>

#include "backend/cpu/copy.h"
#include "nuvec/distributed/ops.h"
#include "nuvec/ops.h"
#include "primitives/primitives.h"

namespace nuvec::distributed {

namespace {

// A fresh row-contiguous host buffer for out.
void alloc(array& out) {
  out.set_data(allocator::malloc(std::max<size_t>(out.nbytes(), 1)));
}

// The tie-split indicator of the processes holding the reduction's result: (x == y) over
// the number of processes that hold it.
array share_of_extreme(const array& x, const array& y, const Group& g, const Stream& s) {
  const array hit = astype(equal(x, y, s), x.dtype(), s);
  return divide(hit, all_sum(hit, g, s), s);
}

// For ops that concatenate or split along axis 0: the batch axis moved to 1 when it is 0
// (a batch of scalars [B] becomes [1, B]: each example's axis 0 is the new unit axis).
std::pair<array, int> batch_off_axis0(const array& x, int axis, const Stream& s) {
  if (axis != 0) return {x, axis};
  if (x.ndim() == 1) return {expand_dims(x, 0, s), 1}; // per-example scalar: [1, B]
  return {moveaxis(x, 0, 1, s), 1};
}

} // namespace

// ---- AllReduce ------------------------------------------------------------------------

const char* AllReduce::name() const {
  switch (op_) {
    case detail::ReduceOp::sum: return "AllSum";
    case detail::ReduceOp::max: return "AllMax";
    case detail::ReduceOp::min: return "AllMin";
  }
  return "AllReduce";
}

std::vector<Shape> AllReduce::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

void AllReduce::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array in = cpu::as_row_contiguous(inputs[0]);
  alloc(outputs[0]);
  group().raw_group()->all_reduce(in, outputs[0], op_);
}

std::vector<array> AllReduce::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>& outputs) {
  if (op_ == detail::ReduceOp::sum) return {cotangents[0]};
  return {multiply(cotangents[0], share_of_extreme(primals[0], outputs[0], group(), stream()), stream())};
}

std::vector<array> AllReduce::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  if (op_ == detail::ReduceOp::sum) return {all_sum(tangents[0], group(), stream())};
  // The extreme's tangent: y = all_max(x) needs y first, a collective of its own.
  const array y = op_ == detail::ReduceOp::max ? all_max(primals[0], group(), stream())
                                               : all_min(primals[0], group(), stream());
  return {all_sum(multiply(tangents[0], share_of_extreme(primals[0], y, group(), stream()), stream()), group(), stream())};
}

std::pair<std::vector<array>, std::vector<int>> AllReduce::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  const array& x = inputs[0];
  switch (op_) {
    case detail::ReduceOp::sum: return {{all_sum(x, group(), stream())}, {axes[0]}};
    case detail::ReduceOp::max: return {{all_max(x, group(), stream())}, {axes[0]}};
    case detail::ReduceOp::min: return {{all_min(x, group(), stream())}, {axes[0]}};
  }
  throw std::logic_error("[AllReduce] unknown reduction.");
}

bool AllReduce::is_equivalent(const Primitive& other) const {
  auto o = same_type<AllReduce>(other);
  return o && o->op_ == op_ && o->group().raw_group() == group().raw_group();
}

// ---- AllGather ------------------------------------------------------------------------

const char* AllGather::name() const { return "AllGather"; }

std::vector<Shape> AllGather::output_shapes(const std::vector<array>& inputs) {
  Shape s = inputs[0].shape();
  if (s.empty()) return {{group().size()}};
  s[0] *= group().size();
  return {s};
}

void AllGather::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array in = cpu::as_row_contiguous(inputs[0]);
  alloc(outputs[0]);
  group().raw_group()->all_gather(in, outputs[0]);
}

std::vector<array> AllGather::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  const array& x = primals[0];
  const array& g = cotangents[0];
  const int n = x.ndim() == 0 ? 1 : x.shape(0);
  Shape start(g.ndim(), 0), stop = g.shape();
  start[0] = group().rank() * n;
  stop[0] = start[0] + n;
  array rows = slice(g, start, stop, stream());
  return {x.ndim() == 0 ? reshape(rows, {}, stream()) : rows};
}

std::vector<array> AllGather::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {all_gather(tangents[0], group(), stream())};
}

std::pair<std::vector<array>, std::vector<int>> AllGather::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (axes[0] < 0) return {{all_gather(inputs[0], group(), stream())}, {-1}};
  auto [x, axis] = batch_off_axis0(inputs[0], axes[0], stream());
  return {{all_gather(x, group(), stream())}, {axis}};
}

bool AllGather::is_equivalent(const Primitive& other) const {
  auto o = same_type<AllGather>(other);
  return o && o->group().raw_group() == group().raw_group();
}

// ---- ReduceScatter --------------------------------------------------------------------

const char* ReduceScatter::name() const { return "ReduceScatter"; }

std::vector<Shape> ReduceScatter::output_shapes(const std::vector<array>& inputs) {
  Shape s = inputs[0].shape();
  s[0] /= group().size();
  return {s};
}

void ReduceScatter::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array in = cpu::as_row_contiguous(inputs[0]);
  alloc(outputs[0]);
  group().raw_group()->sum_scatter(in, outputs[0]);
}

std::vector<array> ReduceScatter::vjp(
    const std::vector<array>&,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  const array& g = cotangents[0];
  const int m = g.shape(0), r = group().rank(), p = group().size();
  std::vector<std::pair<int, int>> widths(g.ndim(), {0, 0});
  widths[0] = {r * m, (p - 1 - r) * m};
  return {pad(g, widths, array(0, g.dtype()), "constant", stream())};
}

std::vector<array> ReduceScatter::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {sum_scatter(tangents[0], group(), stream())};
}

std::pair<std::vector<array>, std::vector<int>> ReduceScatter::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  if (axes[0] < 0) return {{sum_scatter(inputs[0], group(), stream())}, {-1}};
  auto [x, axis] = batch_off_axis0(inputs[0], axes[0], stream());
  return {{sum_scatter(x, group(), stream())}, {axis}};
}

bool ReduceScatter::is_equivalent(const Primitive& other) const {
  auto o = same_type<ReduceScatter>(other);
  return o && o->group().raw_group() == group().raw_group();
}

// ---- Send -----------------------------------------------------------------------------

const char* Send::name() const { return "Send"; }

std::vector<Shape> Send::output_shapes(const std::vector<array>& inputs) {
  return {inputs[0].shape()};
}

void Send::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array in = cpu::as_row_contiguous(inputs[0]);
  group().raw_group()->send(in, dst_);
  outputs[0].copy_shared_buffer(inputs[0]);
}

std::vector<array> Send::vjp(
    const std::vector<array>&,
    const std::vector<array>& cotangents,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {cotangents[0]};
}

std::vector<array> Send::jvp(
    const std::vector<array>&,
    const std::vector<array>& tangents,
    const std::vector<int>&) {
  return {tangents[0]};
}

std::pair<std::vector<array>, std::vector<int>> Send::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return {{send(inputs[0], dst_, group(), stream())}, {axes[0]}};
}

bool Send::is_equivalent(const Primitive& other) const {
  auto o = same_type<Send>(other);
  return o && o->dst_ == dst_ && o->group().raw_group() == group().raw_group();
}

// ---- Recv -----------------------------------------------------------------------------

const char* Recv::name() const { return "Recv"; }

std::vector<Shape> Recv::output_shapes(const std::vector<array>&) {
  throw std::invalid_argument("[Recv] the output shape is the op's argument, not a function of inputs.");
}

void Recv::eval_cpu(const std::vector<array>&, std::vector<array>& outputs) {
  alloc(outputs[0]);
  group().raw_group()->recv(outputs[0], src_);
}

std::vector<array> Recv::vjp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&,
    const std::vector<array>&) {
  return {};
}

std::vector<array> Recv::jvp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&) {
  throw std::invalid_argument("[Recv] recv has no inputs to take a tangent of.");
}

std::pair<std::vector<array>, std::vector<int>> Recv::vmap(
    const std::vector<array>&,
    const std::vector<int>&) {
  throw std::invalid_argument("[Recv] recv has no inputs to batch.");
}

bool Recv::is_equivalent(const Primitive& other) const {
  auto o = same_type<Recv>(other);
  return o && o->src_ == src_ && o->group().raw_group() == group().raw_group();
}

} // namespace nuvec::distributed
