// nuvec: the GraphReplay primitive (include/nuvec/compile.h): a compiled function's tape as one
// node of a GPU stream. Evaluation is the backend's (gpu::run_tape: node by node, then as a
// captured CUDA graph); the transform rules replay the tape as a graph, as Compiled's do.
#include "nuvec/compile.h"

#include <stdexcept>

#include "backend/gpu.h"
#include "compile/graph.h"

namespace nuvec {

const char* GraphReplay::name() const {
  return "GraphReplay";
}

std::vector<Shape> GraphReplay::output_shapes(const std::vector<array>&) {
  std::vector<Shape> shapes;
  for (auto& o : tape_->outputs) shapes.push_back(o.shape());
  return shapes;
}

bool GraphReplay::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const GraphReplay*>(&other);
  return o && o->tape_ == tape_;
}

void GraphReplay::eval_cpu(const std::vector<array>&, std::vector<array>&) {
  // compile makes GraphReplay nodes only for traces on a GPU stream.
  throw std::logic_error("[compile] GraphReplay runs on GPU streams only.");
}

void GraphReplay::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  gpu::run_tape(*tape_, inputs, outputs);
}

std::vector<array> GraphReplay::replay(const std::vector<array>& inputs) const {
  return detail::compile_replace(tape_->tape, tape_->inputs, tape_->outputs, inputs, /* shapeless */ false);
}

std::vector<array> GraphReplay::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  return detail::replayed_vjp([this](const std::vector<array>& xs) { return replay(xs); }, primals, cotangents, argnums);
}

std::vector<array> GraphReplay::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return detail::replayed_jvp(
      [this](const std::vector<array>& xs) { return replay(xs); }, primals, tangents, argnums, stream());
}

std::pair<std::vector<array>, std::vector<int>> GraphReplay::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return detail::replayed_vmap(
      [this](const std::vector<array>& xs) { return replay(xs); }, inputs, axes, tape_->outputs.size());
}

} // namespace nuvec
