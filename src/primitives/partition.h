// nuvec: the Partition and ArgPartition primitives (selection along one axis). Rules in
// src/primitives/partition.cpp (seed's sort rules: permutations scatter back), kernels in
// src/backend/cpu/partition.cpp.
#pragma once

#include "primitives/primitives.h"

namespace nuvec {

/// partition along `axis` around the normalised `kth` (0 <= kth < n). Both primitives
/// order each line by (value with NaNs last, original index), so partition and
/// argpartition agree element for element.
class Partition : public Primitive {
 public:
  Partition(Stream stream, int kth, int axis) : Primitive(stream), kth_(kth), axis_(axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<int, int> state() const { return {kth_, axis_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int kth_;
  int axis_;
};

/// argpartition: the uint32 indices of partition's arrangement.
class ArgPartition : public Primitive {
 public:
  ArgPartition(Stream stream, int kth, int axis) : Primitive(stream), kth_(kth), axis_(axis) {}
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::pair<int, int> state() const { return {kth_, axis_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  int kth_;
  int axis_;
};

} // namespace nuvec
