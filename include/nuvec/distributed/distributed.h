// nuvec: process groups for collective communication (MLX's distributed/distributed.h).
// Today only the single-process group exists: every process is its own group of size 1, so
// code written for MLX's distributed API runs unchanged on one machine (MLX does the same
// when no backend is configured). Multi-process backends (MPI, NCCL) are a later issue.
#pragma once

#include <memory>
#include <string>

namespace nuvec::distributed {

namespace detail {
/// A backend's view of a group (rank, size, how to split it).
class GroupImpl {
 public:
  virtual ~GroupImpl() = default;
  virtual int rank() = 0;
  virtual int size() = 0;
  virtual std::shared_ptr<GroupImpl> split(int color, int key) = 0;
};
} // namespace detail

/// Whether a communication backend can be initialised: true, since the single-process
/// group always can. `backend` "any" asks for any; "mpi", "ring", "nccl" and "jaccl" are
/// reported unavailable until nuvec ships them.
bool is_available();
bool is_available(const std::string& backend);

/// A group of processes; rank() in [0, size()).
struct Group {
  explicit Group(std::shared_ptr<detail::GroupImpl> group) : group_(std::move(group)) {}
  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }
  /// The processes of this group with the same color, ordered by key (rank when key < 0).
  Group split(int color, int key = -1) const;
  const std::shared_ptr<detail::GroupImpl>& raw_group() const { return group_; }

 private:
  std::shared_ptr<detail::GroupImpl> group_;
};

/// The global group: the single-process group (rank 0 of 1). Throws std::runtime_error when
/// `strict` asks for a real multi-process backend (none is configured), or
/// std::invalid_argument for an unknown backend name. Source: MLX distributed::init.
Group init(bool strict = false, const std::string& backend = "any");

} // namespace nuvec::distributed
