// nuvec: the NCCL backend's entry points in a build without it (no CUDA backend, NCCL not found
// under NCCL_ROOT or the CUDA toolkit, or -DNUVEC_USE_NCCL=OFF).
#include "distributed/nccl/nccl.h"

namespace nuvec::distributed::nccl {

bool is_available() {
  return false;
}

std::string unavailable_reason() {
  return "nuvec was built without NCCL: a CUDA build finds it under -DNCCL_ROOT=... or in the "
         "CUDA toolkit, unless -DNUVEC_USE_NCCL=OFF";
}

std::shared_ptr<detail::GroupImpl> init() {
  return nullptr;
}

} // namespace nuvec::distributed::nccl
