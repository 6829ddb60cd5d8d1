// nuvec: the MPI backend's entry points (src/distributed/mpi/mpi_group.cpp when nuvec is built
// with MPI, src/distributed/no_mpi/no_mpi.cpp otherwise).
#pragma once

#include <memory>

#include "nuvec/distributed/distributed.h"

namespace nuvec::distributed::mpi {

/// Whether the MPI backend can start: nuvec was built with MPI and this process was started
/// by mpirun (Open MPI's, or another launcher that sets PMI/PMIx variables).
bool is_available();

/// MPI's world as a group (MPI_Init_thread on the first call, MPI_Finalize at exit), or null
/// when the backend is not available.
std::shared_ptr<detail::GroupImpl> init();

} // namespace nuvec::distributed::mpi
