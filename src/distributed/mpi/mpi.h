// nuvec: the MPI backend's entry points (src/distributed/mpi/mpi_group.cpp when nuvec is built
// with MPI, src/distributed/no_mpi/no_mpi.cpp otherwise), and the two services the NCCL
// backend takes from MPI when started by mpirun: broadcasting its id, the rank on the node.
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

/// Copies `bytes` bytes at `data` on rank `root` of MPI's world to `data` on every process
/// of it (MPI_Ibcast), waiting with the NUVEC_DISTRIBUTED_TIMEOUT deadline: past it the job
/// is aborted, as for the collectives. A collective; needs init() first. Throws
/// std::runtime_error in a build without MPI. (The NCCL backend sends its unique id so.)
void broadcast(void* data, int bytes, int root);

/// This process's rank among the processes of MPI's world on its node:
/// OMPI_COMM_WORLD_LOCAL_RANK where the launcher sets it, else from
/// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (then a collective). Needs init() first; 0 in a
/// build without MPI.
int local_rank();

} // namespace nuvec::distributed::mpi
