// nuvec: the Softmax primitive, softmax along the last axis in one node (MLX builds the
// same primitive when softmax reduces the last axis). Rules in src/primitives/softmax.cpp;
// kernels in src/backend/cpu/softmax.cpp and src/backend/cuda/softmax.cu.
#pragma once

#include "primitives/primitives.h"

namespace nuvec {

/// exp(x - max(x)) / sum(exp(x - max(x))) along the last axis. The input already has the
/// output dtype, a real floating type (the op casts first). Half inputs always accumulate in
/// float32 and float64 in float64, whatever `precise` says: nuvec's softmax normalises half
/// inputs in float32 (see the softmax op); `precise` is kept so that two nodes built with
/// different flags are not merged, as in MLX.
class Softmax : public Primitive {
 public:
  Softmax(Stream stream, bool precise) : Primitive(stream), precise_(precise) {}
  /// The flag the op was called with (no effect on the result; see the class comment).
  bool precise() const { return precise_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  bool state() const { return precise_; }
  NUVEC_PRIMITIVE_RULES()

 private:
  bool precise_;
};

} // namespace nuvec
