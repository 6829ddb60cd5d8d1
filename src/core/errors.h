// nuvec: the one shape of error messages, `[op] <subject> must <constraint>; got <actual>.`,
// built by streaming the parts (shapes print as (2, 3), dtypes by MLX's names).
#pragma once

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

} // namespace nuvec
