// nuvec: the single-process group and the collectives over it (MLX's distributed API; with
// one process every reduction is the identity, MLX's own shortcut for groups of size 1).
#include "nuvec/distributed/distributed.h"

#include <stdexcept>
#include <string>

#include "nuvec/distributed/ops.h"

namespace nuvec::distributed {

namespace {

class SingleProcessGroup : public detail::GroupImpl {
 public:
  int rank() override { return 0; }
  int size() override { return 1; }
  std::shared_ptr<GroupImpl> split(int, int) override {
    return std::make_shared<SingleProcessGroup>();
  }
};

bool is_known_backend(const std::string& b) {
  return b == "any" || b == "mpi" || b == "ring" || b == "nccl" || b == "jaccl";
}

// The group an op runs over, checked: only groups of one process can be served today.
Group resolve(const std::optional<Group>& group, const char* op) {
  Group g = group.value_or(init());
  if (g.size() != 1) {
    throw std::invalid_argument(
        std::string("[") + op + "] groups of more than one process need a communication "
        "backend, which nuvec does not ship yet; got a group of size " +
        std::to_string(g.size()) + ".");
  }
  return g;
}

[[noreturn]] void no_peer(const char* op) {
  throw std::invalid_argument(
      std::string("[") + op + "] a group of one process has no peer to exchange with.");
}

} // namespace

bool is_available() {
  return true;
}

bool is_available(const std::string& backend) {
  if (!is_known_backend(backend)) {
    throw std::invalid_argument("[distributed::is_available] unknown backend \"" + backend + "\".");
  }
  return backend == "any";
}

Group Group::split(int color, int key) const {
  return Group(group_->split(color, key));
}

Group init(bool strict, const std::string& backend) {
  if (!is_known_backend(backend)) {
    throw std::invalid_argument("[distributed::init] unknown backend \"" + backend + "\".");
  }
  if (strict) {
    throw std::runtime_error(
        "[distributed::init] no multi-process backend (" + backend +
        ") is available; nuvec runs every process as its own group of size 1.");
  }
  static Group global(std::make_shared<SingleProcessGroup>());
  return global;
}

array all_sum(const array& x, std::optional<Group> group, StreamOrDevice s) {
  resolve(group, "all_sum");
  return x;
}
array all_max(const array& x, std::optional<Group> group, StreamOrDevice s) {
  resolve(group, "all_max");
  return x;
}
array all_min(const array& x, std::optional<Group> group, StreamOrDevice s) {
  resolve(group, "all_min");
  return x;
}
array all_gather(const array& x, std::optional<Group> group, StreamOrDevice s) {
  resolve(group, "all_gather");
  return x;
}
array sum_scatter(const array& x, std::optional<Group> group, StreamOrDevice s) {
  resolve(group, "sum_scatter");
  return x;
}
array send(const array& x, int dst, std::optional<Group> group, StreamOrDevice s) {
  resolve(group, "send");
  no_peer("send");
}
array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group, StreamOrDevice s) {
  resolve(group, "recv");
  no_peer("recv");
}
array recv_like(const array& x, int src, std::optional<Group> group, StreamOrDevice s) {
  resolve(group, "recv_like");
  no_peer("recv_like");
}

} // namespace nuvec::distributed
