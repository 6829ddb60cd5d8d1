// nuvec: the error of the math layer's op visits (unary.h, binary.h), out of line so that
// the host-and-device headers include no <stdexcept>.
#include <stdexcept>
#include <string>

#include "backend/common/math/unary.h"

namespace nuvec::math {

void throw_unknown_op(const char* family) {
  throw std::logic_error(std::string("[visit] unknown ") + family + " value.");
}

} // namespace nuvec::math
