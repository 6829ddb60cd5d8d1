// nuvec: the kernels' environment switches (NUVEC_ATTENTION_HOPPER, NUVEC_GATED_DELTA_VJP_GPU,
// ...): one reading rule for all of them, listed in docs/CUDA-BACKEND.md.
#pragma once

#include <cstdlib>
#include <cstring>

namespace nuvec {

/// The switch `name` read now (tests and benchmarks flip switches between calls): "1" turns
/// it on, "0" off, anything else or unset leaves `default_on`.
inline bool env_switch(const char* name, bool default_on) {
  const char* v = std::getenv(name);
  if (v != nullptr && std::strcmp(v, "1") == 0) return true;
  if (v != nullptr && std::strcmp(v, "0") == 0) return false;
  return default_on;
}

} // namespace nuvec
