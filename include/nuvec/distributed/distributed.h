// nuvec: process groups for collective communication (MLX's distributed/distributed.h).
// Backends: "mpi" (Open MPI, for CPU arrays; GPU arrays go through host copies) when the
// process was started by mpirun and nuvec was built with MPI; "nccl" (NCCL, for GPU arrays,
// one GPU per process, asked for by name as in MLX) in a CUDA build that found NCCL;
// otherwise every process is its own group of size 1, so code written for MLX's
// distributed API runs unchanged on one machine (MLX does the same when no backend is
// configured). Implemented in src/distributed/ (groups, ops, primitives),
// src/distributed/mpi/ (the MPI backend) and src/backend/cuda/distributed/ (the NCCL backend
// and the primitives' eval_gpu).
#pragma once

#include <memory>
#include <string>

#include "nuvec/array.h"

namespace nuvec::distributed {

namespace detail {

/// How all_reduce combines the processes' elements.
enum class ReduceOp { sum, max, min };

/// A backend's view of a group: its ranks, how to split it, and the collectives over it.
/// The collectives take evaluated arrays: `in` row-contiguous, `out` with its buffer
/// allocated row-contiguous by the caller; every process of the group must call the same
/// collectives in the same order (the primitives run on one stream, whose worker runs them
/// in graph order). Host backends ("single", "mpi") take host arrays, are called by
/// eval_cpu (or eval_gpu through host copies), and check that the processes agree on dtypes
/// and shapes, throwing std::invalid_argument naming the op when they do not. The "nccl"
/// backend takes device arrays, is called by eval_gpu on the worker of the node's GPU stream
/// and enqueues the collective on that stream's CUDA stream without waiting (NCCL checks no
/// agreement: mismatched calls hang or give wrong values); called from a CPU stream it throws
/// std::invalid_argument.
class GroupImpl {
 public:
  virtual ~GroupImpl() = default;
  virtual int rank() = 0;
  virtual int size() = 0;
  virtual std::shared_ptr<GroupImpl> split(int color, int key) = 0;
  /// The backend's name: "single", "mpi" or "nccl".
  virtual const char* backend() const = 0;
  /// out = the element-wise op over every process's `in` (same shape and dtype).
  virtual void all_reduce(const array& in, array& out, ReduceOp op) = 0;
  /// out = every process's `in` concatenated along axis 0 in rank order.
  virtual void all_gather(const array& in, array& out) = 0;
  /// out = rows [r n / size, (r + 1) n / size) of the sum of every process's `in`.
  virtual void sum_scatter(const array& in, array& out) = 0;
  /// Sends `in` to rank dst of the group; recv fills `out` from rank src (whose send must
  /// have out's shape and dtype).
  virtual void send(const array& in, int dst) = 0;
  virtual void recv(array& out, int src) = 0;
};

} // namespace detail

/// Whether a communication backend can be initialised. "any" is always available (the
/// single-process group at least); "mpi" when nuvec was built with MPI and this process was
/// started by mpirun; "nccl" when nuvec was built with NCCL (a CUDA build) and a GPU is
/// present (alone, or started by mpirun in a build with MPI); "ring" and "jaccl" are reported
/// unavailable until nuvec ships them. Throws std::invalid_argument for an unknown backend
/// name.
bool is_available();
bool is_available(const std::string& backend);

/// A group of processes; rank() in [0, size()).
struct Group {
  explicit Group(std::shared_ptr<detail::GroupImpl> group) : group_(std::move(group)) {}
  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }
  /// The processes of this group with the same color, ordered by key (rank when key < 0).
  /// Every process of the group must call it (a collective, as MPI_Comm_split).
  Group split(int color, int key = -1) const;
  const std::shared_ptr<detail::GroupImpl>& raw_group() const { return group_; }

 private:
  std::shared_ptr<detail::GroupImpl> group_;
};

/// The global group of a backend. "any": MPI's world when nuvec was built with MPI and the
/// process was started by mpirun, else the single-process group (rank 0 of 1); "mpi": MPI's
/// world; "nccl": one NCCL communicator over every process of the launch, one GPU each
/// (MPI's world under mpirun, this process alone otherwise), for GPU arrays only: GPU users
/// ask for it by name, as in MLX ("any" keeps MPI, which moves GPU arrays through the host).
/// Each backend's group is made once; later calls return it. The first group made is the
/// default group of the ops (the one they use when given none), so call init(false, "nccl")
/// before anything else asks for init(). An unavailable backend gives the single-process
/// group, or with `strict` throws std::runtime_error saying why (for "nccl": nuvec was built
/// without NCCL, or no GPU is present; for "any": when no multi-process backend is).
/// Throws std::invalid_argument for an unknown backend name; for "nccl", std::runtime_error
/// when NCCL fails to start or the peers do not answer within NUVEC_DISTRIBUTED_TIMEOUT
/// seconds. Source: MLX distributed::init.
Group init(bool strict = false, const std::string& backend = "any");

} // namespace nuvec::distributed
