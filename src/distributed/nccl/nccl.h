// nuvec: the NCCL backend's entry points (src/backend/cuda/distributed/nccl_group.cpp in a CUDA
// build that found NCCL, src/distributed/no_nccl/no_nccl.cpp otherwise), and the two argument
// errors its ops and its group share.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "nuvec/distributed/distributed.h"
#include "nuvec/dtype.h"

namespace nuvec::distributed::nccl {

/// Whether the NCCL backend can start: nuvec was built with NCCL and a CUDA GPU is present.
bool is_available();

/// Why is_available() is false, for init's message ("nuvec was built without NCCL ...");
/// empty when it is true.
std::string unavailable_reason();

/// The group of every process of the launch over one NCCL communicator, made on the first
/// call: MPI's world when nuvec was built with MPI and the process was started by mpirun
/// (rank 0's ncclUniqueId broadcast over MPI), else this process alone (a communicator of
/// one rank). Null when the backend is not available. Throws std::runtime_error naming
/// NCCL's error when the communicator cannot be made, when the peers do not answer within
/// NUVEC_DISTRIBUTED_TIMEOUT seconds (the communicator is then aborted), or when this
/// process's GPU is not the one nuvec computes on (see README, "Several processes").
std::shared_ptr<detail::GroupImpl> init();

/// The error of a collective over an NCCL group on a CPU stream.
[[noreturn]] inline void throw_not_on_gpu(const char* op) {
  throw std::invalid_argument(
      std::string("[") + op +
      "] the nccl backend works on GPU arrays; this collective is on a CPU stream (give it "
      "Device::gpu or a GPU stream, or use the mpi backend for CPU arrays).");
}

/// The error of a reduction NCCL has no element type for (int16, uint16).
[[noreturn]] inline void throw_no_reduction(const char* op, Dtype dtype) {
  throw std::invalid_argument(
      std::string("[") + op + "] the nccl backend cannot reduce " + dtype_name(dtype) +
      " (NCCL has no 16-bit integer type); cast it to int32 first.");
}

} // namespace nuvec::distributed::nccl
