// nuvec export: the (de)serialization table of the primitive families, one row per family
// (primitive_table.cpp). A row names the family in the file, writes and reads its state()
// and says how a shapeless import may change its input shapes. MLX's PrimitiveFactory
// (mlx/export.cpp) is the model; nuvec keys rows by family, since one family covers many ops.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "export/codec.h"
#include "nuvec/primitives.h"

namespace nuvec::export_detail {

/// What a shapeless import checks before it recomputes a node's output shapes from new
/// input shapes (Primitive::output_shapes). Parameters that pin shapes (Reshape's shape,
/// Slice's bounds, ...) make a family `Pinned`: its inputs must keep their traced shapes.
enum class ShapeRule {
  Pinned,      // every input keeps its traced shape
  Any,         // output shapes follow the inputs whatever they are (Depends, CustomTransforms)
  SameRank,    // each input keeps its traced rank (axis parameters stay meaningful)
  Squeeze,     // SameRank, and the squeezed axes stay of size 1
  Elementwise, // SameRank, and the inputs that are not 0-d share one shape
  Product,     // matmul: (..., M, K) @ (..., K, N) with equal batch shapes
  Concatenate, // SameRank, and equal sizes off the concatenation axis
};

struct PrimitiveCodec {
  const char* family;
  ShapeRule shape_rule;
  void (*save)(Encoder&, const Primitive&);
  std::shared_ptr<Primitive> (*load)(Decoder&, Stream);
};

/// The row of p's family. Throws std::invalid_argument "[export_function] ..." naming the
/// primitive when no row covers it.
const PrimitiveCodec& codec_for(const Primitive& p);

/// The row named `family` in a file. Throws std::runtime_error for an unknown name.
const PrimitiveCodec& codec_named(const std::string& family, const std::string& file);

/// Checks the shapeless rule of a node: `traced` are the input shapes seen at export,
/// `inputs` the ones of this call. Throws std::invalid_argument naming the primitive.
void check_shapeless_inputs(
    ShapeRule rule,
    const Primitive& p,
    const std::vector<Shape>& traced,
    const std::vector<array>& inputs);

} // namespace nuvec::export_detail
