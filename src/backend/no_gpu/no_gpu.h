// nuvec: the eval_gpu stub of CPU-only builds, one line per primitive family. GPU streams
// cannot be created without a GPU, so reaching a stub means a bug; it names the primitive.
#pragma once

#include <stdexcept>
#include <string>

#include "primitives/primitives.h"

namespace nuvec {

[[noreturn]] inline void no_gpu(const char* name) {
  throw std::runtime_error(std::string("[") + name + "] this build has no GPU backend.");
}

#define NUVEC_NO_GPU(Family)                                                        \
  void Family::eval_gpu(const std::vector<array>&, std::vector<array>&) {          \
    no_gpu(name());                                                                 \
  }

} // namespace nuvec
