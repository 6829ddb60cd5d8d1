// nuvec: the deadline of every host wait on other processes (NUVEC_DISTRIBUTED_TIMEOUT), shared
// by the MPI backend's transfers and the NCCL backend's setup.
#pragma once

#include <cstdlib>

namespace nuvec::distributed {

/// NUVEC_DISTRIBUTED_TIMEOUT in seconds, read once (default 600; 0 or negative: no deadline).
inline double timeout_seconds() {
  static const double t = [] {
    const char* v = std::getenv("NUVEC_DISTRIBUTED_TIMEOUT");
    return v != nullptr ? std::atof(v) : 600.0;
  }();
  return t;
}

} // namespace nuvec::distributed
