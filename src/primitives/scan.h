// nuvec: the Scan family (cumulative sum, product, max, min, logaddexp along one axis).
// Rules in src/primitives/scan.cpp (from shared/seeds/000_*.txt, MLX's Scan); CPU kernel in
// src/backend/cpu/scan.cpp.
#pragma once

#include "primitives/primitives.h"

namespace nuvec {

/// A cumulative scan along `axis` (non-negative). The input already has the output dtype
/// (the ops cast first). `reverse` scans from the end; exclusive scans (inclusive = false)
/// shift by one and start from the op's identity.
class Scan : public Primitive {
 public:
  Scan(Stream stream, ScanOp op, int axis, bool reverse, bool inclusive)
      : Primitive(stream), op_(op), axis_(axis), reverse_(reverse), inclusive_(inclusive) {}
  ScanOp op() const { return op_; }
  /// The parameters, in constructor order (MLX's state(); read by export).
  std::tuple<ScanOp, int, bool, bool> state() const { return {op_, axis_, reverse_, inclusive_}; }
  NUVEC_PRIMITIVE_RULES()

 private:
  ScanOp op_;
  int axis_;
  bool reverse_;
  bool inclusive_;
};

} // namespace nuvec
