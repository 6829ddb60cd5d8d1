// nuvec: groups and init (MLX's distributed API). init makes each backend's group once: "mpi"
// (and "any") MPI's world when the process was started by mpirun and nuvec was built with MPI
// (src/distributed/mpi/), "nccl" an NCCL communicator over one GPU per process
// (src/backend/cuda/distributed/), else the single-process group, over which every collective
// is a copy (the ops short-circuit it: MLX's shortcut for groups of size 1). As in MLX, the
// first group made is the default group of the ops. The ops are in ops.cpp, the primitives in
// primitives.cpp.
#include "nuvec/distributed/distributed.h"

#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "distributed/mpi/mpi.h"
#include "distributed/nccl/nccl.h"

namespace nuvec::distributed {

namespace {

class SingleProcessGroup : public detail::GroupImpl {
 public:
  int rank() override { return 0; }
  int size() override { return 1; }
  const char* backend() const override { return "single"; }
  std::shared_ptr<GroupImpl> split(int, int) override { return std::make_shared<SingleProcessGroup>(); }
  void all_reduce(const array& in, array& out, detail::ReduceOp) override { copy(in, out); }
  void all_gather(const array& in, array& out) override { copy(in, out); }
  void sum_scatter(const array& in, array& out) override { copy(in, out); }
  void send(const array&, int) override { no_peer("send"); }
  void recv(array&, int) override { no_peer("recv"); }

 private:
  static void copy(const array& in, array& out) {
    if (in.nbytes() > 0) std::memcpy(out.data<char>(), in.data<char>(), in.nbytes());
  }
  [[noreturn]] static void no_peer(const char* op) {
    throw std::invalid_argument(std::string("[") + op + "] a group of one process has no peer to exchange with.");
  }
};

bool is_known_backend(const std::string& b) {
  return b == "any" || b == "mpi" || b == "ring" || b == "nccl" || b == "jaccl";
}

} // namespace

bool is_available() {
  return true;
}

bool is_available(const std::string& backend) {
  if (!is_known_backend(backend)) {
    throw std::invalid_argument("[distributed::is_available] unknown backend \"" + backend + "\".");
  }
  if (backend == "any") return true;
  if (backend == "mpi") return mpi::is_available();
  if (backend == "nccl") return nccl::is_available();
  return false;
}

Group Group::split(int color, int key) const {
  return Group(group_->split(color, key));
}

Group init(bool strict, const std::string& backend) {
  if (!is_known_backend(backend)) {
    throw std::invalid_argument("[distributed::init] unknown backend \"" + backend + "\".");
  }
  static std::mutex m;
  // Each backend's group, made once; "any" is the default group (the ops' when given none).
  // Never destroyed: stream workers may still resolve the default group at exit.
  static auto& groups = *new std::map<std::string, std::shared_ptr<detail::GroupImpl>>();
  std::lock_guard<std::mutex> lock(m);
  auto is_single = [](const std::shared_ptr<detail::GroupImpl>& g) {
    return std::strcmp(g->backend(), "single") == 0;
  };
  std::shared_ptr<detail::GroupImpl>& cached = groups[backend];
  if (cached && (!is_single(cached) || !strict)) return Group(cached);
  std::shared_ptr<detail::GroupImpl> g;
  if (backend == "any" || backend == "mpi") g = mpi::init();
  if (backend == "nccl") g = nccl::init();
  if (!g) {
    if (strict) {
      std::string why = "nuvec does not ship it yet";
      if (backend == "any" || backend == "mpi") why = "MPI needs a build with MPI and a process started by mpirun";
      if (backend == "nccl") why = nccl::unavailable_reason();
      throw std::runtime_error("[distributed::init] the " + backend + " backend is not available (" + why + ").");
    }
    g = std::make_shared<SingleProcessGroup>();
  }
  cached = g;
  // The first group made is the default, as MLX's first init makes it, unless that was the
  // single-process group and this one is a backend's (MPI's world, an NCCL communicator).
  std::shared_ptr<detail::GroupImpl>& any = groups["any"];
  if (!any || (is_single(any) && !is_single(g))) any = g;
  return Group(cached);
}

} // namespace nuvec::distributed
