// nuvec: the Primitive interface every graph node implements (MLX's Primitive). Every rule
// is pure virtual: a primitive that misses one does not compile. The families (Unary,
// Binary, Reduce, ...) are declared in src/primitives/ and their rules live one file each.
#pragma once

#include <ostream>
#include <utility>
#include <vector>

#include "nuvec/array.h"
#include "nuvec/device.h"
#include "nuvec/stream.h"

namespace nuvec {

class Primitive {
 public:
  explicit Primitive(Stream stream) : stream_(stream) {}
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;
  virtual ~Primitive() = default;

  /// The stream the node runs on and its device.
  const Stream& stream() const { return stream_; }
  const Device& device() const { return stream_.device; }

  /// Computes `outputs` (allocated here) from evaluated `inputs` on the CPU.
  virtual void eval_cpu(
      const std::vector<array>& inputs,
      std::vector<array>& outputs) = 0;
  /// The same on the GPU (the CUDA backend, or a stub that throws in CPU-only builds).
  virtual void eval_gpu(
      const std::vector<array>& inputs,
      std::vector<array>& outputs) = 0;

  /// Forward mode: one tangent per output, given the tangents of primals[argnums[i]].
  virtual std::vector<array> jvp(
      const std::vector<array>& primals,
      const std::vector<array>& tangents,
      const std::vector<int>& argnums) = 0;

  /// Reverse mode: one cotangent per entry of argnums, given one cotangent per output.
  /// Complex rules multiply by the conjugate derivative (MLX's convention).
  virtual std::vector<array> vjp(
      const std::vector<array>& primals,
      const std::vector<array>& cotangents,
      const std::vector<int>& argnums,
      const std::vector<array>& outputs) = 0;

  /// Batching: inputs with their batch axis (-1 for an unbatched input); returns the
  /// outputs and their batch axes.
  virtual std::pair<std::vector<array>, std::vector<int>> vmap(
      const std::vector<array>& inputs,
      const std::vector<int>& axes) = 0;

  /// Whether `other` computes the same function (same type and parameters).
  virtual bool is_equivalent(const Primitive& other) const = 0;

  /// The output shapes for these inputs (used by compile and shapeless tracing).
  virtual std::vector<Shape> output_shapes(const std::vector<array>& inputs) = 0;

  /// The primitive's name, MLX's where one exists ("Add", "Exp", "Sum", ...).
  virtual const char* name() const = 0;

  /// Prints the name and parameters.
  virtual void print(std::ostream& os) { os << name(); }

 private:
  Stream stream_;
};

} // namespace nuvec
