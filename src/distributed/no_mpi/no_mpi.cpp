// nuvec: the MPI backend's entry points in a build without MPI (CMake found no MPI; Debian's
// libopenmpi-dev and openmpi-bin provide it, scripts/setup.sh installs them).
#include "distributed/mpi/mpi.h"

#include <stdexcept>

namespace nuvec::distributed::mpi {

bool is_available() {
  return false;
}

std::shared_ptr<detail::GroupImpl> init() {
  return nullptr;
}

void broadcast(void*, int, int) {
  throw std::runtime_error("[distributed] nuvec was built without MPI: nothing to broadcast over.");
}

int local_rank() {
  return 0;
}

} // namespace nuvec::distributed::mpi
