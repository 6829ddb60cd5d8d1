// nuvec: the MPI backend's entry points in a build without MPI (CMake found no MPI; Debian's
// libopenmpi-dev and openmpi-bin provide it, scripts/setup.sh installs them).
#include "distributed/mpi/mpi.h"

namespace nuvec::distributed::mpi {

bool is_available() {
  return false;
}

std::shared_ptr<detail::GroupImpl> init() {
  return nullptr;
}

} // namespace nuvec::distributed::mpi
