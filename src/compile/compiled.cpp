// nuvec: the Compiled primitive, a fused element-wise section of a compiled graph (MLX
// primitives.h Compiled, compile.cpp). Until kernels are generated for it, it runs its tape
// node by node; its transform rules replay the tape as a graph under the same transform.
#include <cstring>
#include <functional>
#include <sstream>
#include <typeinfo>
#include <unordered_map>

#include "compile/graph.h"
#include "nuvec/graph_utils.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {

// The bits of a scalar constant as hex, so NaN and infinities print as plain tokens.
void print_constant_bits(std::ostream& os, const array& x) {
  uint64_t v = 0;
  std::memcpy(&v, x.data<uint8_t>(), std::min<size_t>(x.itemsize(), sizeof(v)));
  os << std::hex << v << std::dec << ";";
}

Shape broadcast_all(const std::vector<array>& inputs) {
  Shape shape;
  for (auto& in : inputs) shape = broadcast_shapes(shape, in.shape());
  return shape;
}

} // namespace

Compiled::Compiled(
    Stream stream,
    std::vector<array> inputs,
    std::vector<array> outputs,
    std::vector<array> tape,
    std::unordered_set<std::uintptr_t> constant_ids)
    : Primitive(stream),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)),
      tape_(std::move(tape)),
      constant_ids_(std::move(constant_ids)) {
  // The kernel name spells out the work: each tape node's name, dtype, whether it is an
  // output, its primitive and inputs; then each input's kind (constant value, scalar or
  // vector) and the dtypes of the non-constant inputs.
  NodeNamer namer;
  std::ostringstream os;
  std::ostringstream constants;
  std::unordered_set<std::uintptr_t> output_ids;
  for (auto& o : outputs_) output_ids.insert(o.id());
  for (auto& x : inputs_) namer.get_name(x);
  for (auto& a : tape_) {
    os << namer.get_name(a) << a.dtype() << (output_ids.count(a.id()) ? "O" : "I") << a.primitive().name();
    for (auto& in : a.inputs()) os << namer.get_name(in);
  }
  os << "_";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (is_constant(i)) {
      os << "C";
      print_constant_bits(constants, inputs_[i]);
    } else {
      os << (inputs_[i].ndim() == 0 ? "S" : "V");
    }
  }
  os << "_";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!is_constant(i)) os << inputs_[i].dtype();
  }
  os << "_" << std::hash<std::string>{}(constants.str());
  kernel_lib_ = os.str();
}

const char* Compiled::name() const {
  if (name_.empty()) {
    std::string n = "Compiled";
    for (auto& a : tape_) n += a.primitive().name();
    name_ = std::move(n);
  }
  return name_.c_str();
}

std::vector<Shape> Compiled::output_shapes(const std::vector<array>& inputs) {
  return std::vector<Shape>(outputs_.size(), broadcast_all(inputs));
}

// Equal work on equal inputs: the kernel name spells out the wiring (which input each node
// reads, in order), the dtypes, which nodes are outputs and the constants' kinds; the
// constants' bits and each node's parameters are compared as well.
bool Compiled::is_equivalent(const Primitive& other) const {
  if (typeid(other) != typeid(Compiled)) return false;
  const auto& o = static_cast<const Compiled&>(other);
  if (outputs_.size() != o.outputs_.size() || inputs_.size() != o.inputs_.size() ||
      lib_name() != o.lib_name()) {
    return false;
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (is_constant(i) != o.is_constant(i)) return false;
    if (is_constant(i)) {
      // Constants hold data (captured when traced): equal dtype, shape and bits.
      const array& a = inputs_[i];
      const array& b = o.inputs_[i];
      if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.strides() != b.strides() ||
          a.data_size() != b.data_size() ||
          std::memcmp(a.data<uint8_t>(), b.data<uint8_t>(), a.data_size() * a.itemsize()) != 0) {
        return false;
      }
    }
  }
  return std::equal(
      tape_.begin(), tape_.end(), o.tape_.begin(), o.tape_.end(),
      [](const array& a, const array& b) {
        const auto& pa = a.primitive();
        const auto& pb = b.primitive();
        return typeid(pa) == typeid(pb) && pa.is_equivalent(pb);
      });
}

// Every node runs at the output shape: inputs are broadcast to it first (views), so
// element-wise kernels see equal shapes and Broadcast nodes are identities.
void Compiled::eval_tape(const std::vector<array>& inputs, std::vector<array>& outputs, bool gpu) {
  const Shape& shape = outputs[0].shape();
  auto run = [gpu](Primitive& p, const std::vector<array>& ins, std::vector<array>& outs) {
    gpu ? p.eval_gpu(ins, outs) : p.eval_cpu(ins, outs);
  };
  Broadcast to_shape(stream(), shape);
  std::unordered_map<std::uintptr_t, array> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array in = inputs[i];
    if (in.shape() != shape) {
      std::vector<array> view{array(shape, in.dtype(), nullptr, {})};
      run(to_shape, {in}, view);
      in = view[0];
    }
    values.insert({inputs_[i].id(), in});
  }
  std::unordered_map<std::uintptr_t, size_t> output_index;
  for (size_t j = 0; j < outputs_.size(); ++j) output_index.insert({outputs_[j].id(), j});
  for (auto& node : tape_) {
    std::vector<array> ins;
    ins.reserve(node.inputs().size());
    for (auto& in : node.inputs()) ins.push_back(values.at(in.id()));
    auto j = output_index.find(node.id());
    std::vector<array> outs{
        j != output_index.end() ? outputs[j->second] : array(shape, node.dtype(), nullptr, {})};
    run(node.primitive(), ins, outs);
    values.insert({node.id(), outs[0]});
  }
}

void Compiled::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_tape(inputs, outputs, /* gpu */ false);
}

void Compiled::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_tape(inputs, outputs, /* gpu */ true);
}

std::vector<array> Compiled::replay(const std::vector<array>& inputs) const {
  const Shape shape = broadcast_all(inputs);
  std::unordered_map<std::uintptr_t, array> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    values.insert({inputs_[i].id(), broadcast_to(inputs[i], shape, stream())});
  }
  for (auto& node : tape_) {
    std::vector<array> ins;
    for (auto& in : node.inputs()) ins.push_back(values.at(in.id()));
    if (detail::is_broadcast(node.primitive())) {
      values.insert({node.id(), ins[0]});
    } else {
      values.insert({node.id(), array(shape, node.dtype(), node.primitive_ptr(), std::move(ins))});
    }
  }
  std::vector<array> outs;
  for (auto& o : outputs_) outs.push_back(values.at(o.id()));
  return outs;
}

namespace detail {

std::vector<array> replayed_vjp(
    const ReplayFn& replay,
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums) {
  auto grads = nuvec::vjp(replay, primals, cotangents).second;
  std::vector<array> out;
  for (int a : argnums) out.push_back(grads[a]);
  return out;
}

std::vector<array> replayed_jvp(
    const ReplayFn& replay,
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums,
    Stream s) {
  std::vector<array> all;
  for (auto& p : primals) all.push_back(zeros_like(p, s));
  for (size_t k = 0; k < argnums.size(); ++k) all[argnums[k]] = tangents[k];
  return nuvec::jvp(replay, primals, all).second;
}

std::pair<std::vector<array>, std::vector<int>> replayed_vmap(
    const ReplayFn& replay,
    const std::vector<array>& inputs,
    const std::vector<int>& axes,
    size_t n_outputs) {
  std::vector<int> out_axes(n_outputs, 0);
  return {nuvec::vmap(replay, axes, out_axes)(inputs), out_axes};
}

} // namespace detail

std::vector<array> Compiled::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  return detail::replayed_vjp([this](const std::vector<array>& xs) { return replay(xs); }, primals, cotangents, argnums);
}

std::vector<array> Compiled::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return detail::replayed_jvp(
      [this](const std::vector<array>& xs) { return replay(xs); }, primals, tangents, argnums, stream());
}

std::pair<std::vector<array>, std::vector<int>> Compiled::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return detail::replayed_vmap(
      [this](const std::vector<array>& xs) { return replay(xs); }, inputs, axes, outputs_.size());
}

} // namespace nuvec
