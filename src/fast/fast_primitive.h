// nuvec: the base of every fused primitive (shared/seeds/001, MLX's fast::Custom). A fused
// op's meaning is its fallback graph, built from ordinary ops; the primitive carries it as
// a callable object, so that
//   - kernels are tested against it (fallback()(inputs) is the reference),
//   - jvp and vmap are derived from it, and vjp too unless the op writes a dedicated rule
//     (then tested against the fallback's vjp),
//   - an op records the fused node only where a kernel covers the case and otherwise
//     returns the fallback's outputs (record_or_fallback).
// A subclass supplies the kernels (eval_cpu, eval_gpu), name, output shapes and
// equivalence; the rules below are its defaults.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "primitives/primitives.h"

namespace nuvec::fast {

/// The fallback graph of a fused op: its inputs to its outputs, ordinary ops only.
using Fallback = std::function<std::vector<array>(const std::vector<array>&)>;

class FastPrimitive : public Primitive {
 public:
  FastPrimitive(Stream stream, Fallback fallback) : Primitive(stream), fallback_(std::move(fallback)) {}

  /// The op's meaning: its outputs for `inputs` as a graph of ordinary ops.
  const Fallback& fallback() const { return fallback_; }

  /// The tangents of the outputs: jvp of the fallback (tangents given for argnums only;
  /// the other inputs are held constant).
  std::vector<array> jvp(
      const std::vector<array>& primals,
      const std::vector<array>& tangents,
      const std::vector<int>& argnums) override;

  /// The cotangents of the inputs in argnums: vjp of the fallback.
  std::vector<array> vjp(
      const std::vector<array>& primals,
      const std::vector<array>& cotangents,
      const std::vector<int>& argnums,
      const std::vector<array>& outputs) override;

  /// vmap of the fallback (outputs batched on axis 0). Ops that act on trailing axes keep
  /// their kernel instead through vmap_trailing.
  std::pair<std::vector<array>, std::vector<int>> vmap(
      const std::vector<array>& inputs,
      const std::vector<int>& axes) override;

 protected:
  /// vmap for an op whose kernel acts on the last `core_ndim` axes of every input and maps
  /// the leading ones element by element: batch axes that fall inside the core axes move to
  /// the front, unbatched inputs get a size-1 leading axis when some input is batched at 0,
  /// and `rebuild(inputs)` records the op again. Returns the outputs with their batch axes.
  /// Inputs with leading axes must all have the same rank (the op's own broadcasting of
  /// leading axes is not re-aligned here); core-only inputs (a weight of the last axis) may
  /// be unbatched.
  std::pair<std::vector<array>, std::vector<int>> vmap_trailing(
      const std::vector<array>& inputs,
      const std::vector<int>& axes,
      int core_ndim,
      const std::function<std::vector<array>(const std::vector<array>&)>& rebuild);

 private:
  Fallback fallback_;
};

/// The declarations every fused primitive has: its kernels, equivalence, output shapes and
/// name (a subclass adds the rules it writes itself, vjp or vmap, next to it).
#define NUVEC_FAST_PRIMITIVE()                                                           \
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override; \
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) override; \
  bool is_equivalent(const Primitive& other) const override;                             \
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;           \
  const char* name() const override;

/// The vjp a fused primitive writes itself (dedicated backward kernel).
#define NUVEC_FAST_VJP()                                 \
  std::vector<array> vjp(                                \
      const std::vector<array>& primals,                 \
      const std::vector<array>& cotangents,              \
      const std::vector<int>& argnums,                   \
      const std::vector<array>& outputs) override;

/// The vmap a fused primitive writes itself (keeping its kernel).
#define NUVEC_FAST_VMAP()                                         \
  std::pair<std::vector<array>, std::vector<int>> vmap(           \
      const std::vector<array>& inputs, const std::vector<int>& axes) override;

/// Whether `a` is known to be all zeros without evaluating anything: zeros_like's graph (a
/// Full of a broadcast scalar constant whose bytes are all zero), which autodiff passes as
/// the cotangent of an output nothing depends on. A dedicated vjp of a several-output op
/// skips adding such a cotangent (a full pass over memory for nothing).
bool is_known_zeros(const array& a);

/// The outputs of a fused op: one node of `primitive` (with output shapes and dtypes given)
/// when `kernel_covers`, else the primitive's fallback run on the inputs.
std::vector<array> record_or_fallback(
    bool kernel_covers,
    std::shared_ptr<FastPrimitive> primitive,
    const std::vector<Shape>& shapes,
    const std::vector<Dtype>& dtypes,
    const std::vector<array>& inputs);

} // namespace nuvec::fast
