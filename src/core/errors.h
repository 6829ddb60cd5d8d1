// nuvec: the one shape of error messages, `[op] <subject> must <constraint>; got <actual>.`,
// built by streaming the parts (shapes print as (2, 3), dtypes by MLX's names).
#pragma once

#include <climits>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "nuvec/utils.h"

namespace nuvec {

/// Concatenates the streamed parts into "[op] part1part2...".
template <typename... Parts>
std::string error_message(const char* op, const Parts&... parts) {
  std::ostringstream msg;
  msg << "[" << op << "] ";
  (msg << ... << parts);
  return msg.str();
}

/// Throws std::invalid_argument (shapes, dtypes, values) with the message above.
template <typename... Parts>
[[noreturn]] void throw_invalid_argument(const char* op, const Parts&... parts) {
  throw std::invalid_argument(error_message(op, parts...));
}

/// Throws std::out_of_range (axes, indices) with the message above.
template <typename... Parts>
[[noreturn]] void throw_out_of_range(const char* op, const Parts&... parts) {
  throw std::out_of_range(error_message(op, parts...));
}

/// Throws std::overflow_error (shape arithmetic past int32) with the message above.
template <typename... Parts>
[[noreturn]] void throw_overflow(const char* op, const Parts&... parts) {
  throw std::overflow_error(error_message(op, parts...));
}

/// v as an int32 shape quantity, or std::overflow_error naming op and what v is: shapes
/// are int32 (MLX), and wrapping would silently change the result.
inline int32_t checked_int32(int64_t v, const char* op, const char* what) {
  if (v > INT32_MAX || v < INT32_MIN) {
    throw_overflow(op, what, " must fit in int32; got ", v, ".");
  }
  return static_cast<int32_t>(v);
}

} // namespace nuvec
