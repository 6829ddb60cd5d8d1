// nuvec: the NCCL backend of the collectives (MLX's mlx/distributed/nccl/nccl.cpp, dtypes
// widened, split added): a group is an ncclComm_t over one GPU per process. The primitives'
// eval_gpu (primitives.cpp beside this file) calls the collectives on the worker of the node's
// GPU stream with the input row-contiguous on the device and the output allocated there; they
// are enqueued on that stream's CUDA stream (cu::stream()), so they start after the kernels
// that made the input, finish before the kernels that read the output, and the host never
// waits for them. Reductions use NCCL's types (bool as uint8, max for or and min for and, as
// the MPI backend's or/and; complex64 as float pairs, sum only; int16 and uint16 have no NCCL
// type and are refused); gathers and transfers move bytes, so every dtype travels.
// Failures: communicators are non-blocking (config.blocking = 0) and every NCCL call is
// followed by a poll of ncclCommGetAsyncError until it has settled, for at most
// NUVEC_DISTRIBUTED_TIMEOUT seconds: the setup, a split and the first collectives (where NCCL
// connects to the peers) wait that long for a missing peer, then the communicator is aborted
// (ncclCommAbort) and std::runtime_error names the call; an error NCCL reports asynchronously
// (a peer lost over the network) is raised by the next call. A collective already running on
// the GPU whose peer died is not watched: the host blocks at its next wait for that stream.
// Processes must call the same collectives with the same shapes in the same order: NCCL does
// not check (the MPI backend's signature exchange would cost a host wait per collective).
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/runtime/stream.h"
#include "distributed/mpi/mpi.h"
#include "distributed/nccl/nccl.h"
#include "distributed/timeout.h"
#include "nuvec/backend/gpu/device_info.h"

namespace nuvec::distributed::nccl {

namespace {

std::string describe(ncclResult_t r, ncclComm_t comm) {
  std::string msg = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') msg += std::string(" (") + last + ")";
  return msg;
}

[[noreturn]] void fail(const char* op, const char* call, ncclResult_t r, ncclComm_t comm) {
  throw std::runtime_error(std::string("[") + op + "] " + call + " failed: " + describe(r, comm) + ".");
}

// Waits until `comm` has settled the call that returned `r` (a non-blocking communicator
// answers ncclInProgress while it reaches its peers): polls its state, spinning for 1 ms, then
// napping. When the state is an error or the deadline passes, aborts the communicator, sets
// `comm` to null and throws std::runtime_error.
void settle(ncclComm_t& comm, ncclResult_t r, const char* op, const char* call, int rank) {
  if (r != ncclSuccess && r != ncclInProgress) fail(op, call, r, comm);
  const double limit = timeout_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm, &state);
    if (q != ncclSuccess) fail(op, "ncclCommGetAsyncError", q, comm);
    if (state == ncclSuccess) return;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool late = limit > 0 && waited > limit;
    if (state != ncclInProgress || late) {
      const std::string why = late
          ? "no answer from the group after " + std::to_string(static_cast<int>(waited)) +
              " s (NUVEC_DISTRIBUTED_TIMEOUT): a process failed, hangs or called other collectives"
          : "the communicator failed: " + describe(state, comm);
      ncclCommAbort(comm);
      comm = nullptr;
      throw std::runtime_error(
          std::string("[") + op + "] rank " + std::to_string(rank) + ", in " + call + ": " + why +
          "; the NCCL communicator was aborted.");
    }
    if (waited > 1e-3) std::this_thread::sleep_for(std::chrono::microseconds(waited > 0.1 ? 1000 : 20));
  }
}

// How a dtype is reduced: NCCL's element type, its op, and NCCL elements per array element.
struct Reduction {
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t lanes;
};

Reduction reduction(Dtype dt, detail::ReduceOp op, const char* name) {
  const ncclRedOp_t red = op == detail::ReduceOp::sum ? ncclSum : op == detail::ReduceOp::max ? ncclMax : ncclMin;
  switch (dt.val()) {
    // 0/1 bytes: or is their maximum, and their minimum.
    case Dtype::Val::bool_: return {ncclUint8, op == detail::ReduceOp::min ? ncclMin : ncclMax, 1};
    case Dtype::Val::uint8: return {ncclUint8, red, 1};
    case Dtype::Val::uint32: return {ncclUint32, red, 1};
    case Dtype::Val::uint64: return {ncclUint64, red, 1};
    case Dtype::Val::int8: return {ncclInt8, red, 1};
    case Dtype::Val::int32: return {ncclInt32, red, 1};
    case Dtype::Val::int64: return {ncclInt64, red, 1};
    case Dtype::Val::float16: return {ncclFloat16, red, 1};
    case Dtype::Val::bfloat16: return {ncclBfloat16, red, 1};
    case Dtype::Val::float32: return {ncclFloat32, red, 1};
    case Dtype::Val::float64: return {ncclFloat64, red, 1};
    case Dtype::Val::complex64:
      if (op != detail::ReduceOp::sum) {
        throw std::invalid_argument(std::string("[") + name + "] complex64 has no order to take the extreme of.");
      }
      return {ncclFloat32, ncclSum, 2}; // (re, im) pairs add component-wise
    case Dtype::Val::uint16:
    case Dtype::Val::int16:
      throw_no_reduction(name, dt);
  }
  throw std::logic_error("[distributed] unknown dtype.");
}

const char* const kReduceNames[] = {"all_sum", "all_max", "all_min"};

class NcclGroup : public detail::GroupImpl {
 public:
  explicit NcclGroup(ncclComm_t comm) : comm_(comm) {
    ncclResult_t r = ncclCommUserRank(comm_, &rank_);
    if (r != ncclSuccess) fail("distributed", "ncclCommUserRank", r, comm_);
    r = ncclCommCount(comm_, &size_);
    if (r != ncclSuccess) fail("distributed", "ncclCommCount", r, comm_);
  }
  // The communicator lives as long as the process: NCCL's teardown (ncclCommFinalize) waits
  // for every rank, so freeing it when this process drops its last handle would make that
  // moment a synchronisation point, and hang on a peer that keeps its handle.
  ~NcclGroup() override = default;

  int rank() override { return rank_; }
  int size() override { return size_; }
  const char* backend() const override { return "nccl"; }

  std::shared_ptr<GroupImpl> split(int color, int key) override {
    if (color < 0) {
      throw std::invalid_argument("[split] the color must be non-negative for the nccl backend; got " +
                                  std::to_string(color) + ".");
    }
    std::lock_guard<std::mutex> lock(mtx_);
    ncclComm_t parent = live("split");
    // A non-blocking split writes the new handle from NCCL's thread once the parent's state
    // has settled; if it never does (a peer is missing), the slot is left to NCCL.
    auto slot = std::make_unique<ncclComm_t>(nullptr);
    const ncclResult_t r = ncclCommSplit(parent, color, key < 0 ? rank_ : key, slot.get(), nullptr);
    try {
      settle(comm_, r, "split", "ncclCommSplit", rank_);
    } catch (...) {
      slot.release();
      throw;
    }
    ncclComm_t sub = *slot;
    if (sub == nullptr) throw std::logic_error("[split] ncclCommSplit gave no communicator.");
    settle(sub, ncclSuccess, "split", "ncclCommSplit", rank_); // the child inherits blocking = 0
    return std::make_shared<NcclGroup>(sub);
  }

  void all_reduce(const array& in, array& out, detail::ReduceOp op) override {
    const char* name = kReduceNames[static_cast<int>(op)];
    require_gpu(name);
    const Reduction red = reduction(in.dtype(), op, name);
    if (in.size() == 0) return;
    const void* src = cu::device_ptr(in);
    void* dst = cu::device_ptr(out); // out's fresh device buffer (cu::alloc_output)
    enqueue(name, "ncclAllReduce", [&](ncclComm_t c, cudaStream_t s) {
      return ncclAllReduce(src, dst, in.size() * red.lanes, red.type, red.op, c, s);
    });
  }

  void all_gather(const array& in, array& out) override {
    require_gpu("all_gather");
    if (in.nbytes() == 0) return;
    const void* src = cu::device_ptr(in);
    void* dst = cu::device_ptr(out);
    enqueue("all_gather", "ncclAllGather", [&](ncclComm_t c, cudaStream_t s) {
      return ncclAllGather(src, dst, in.nbytes(), ncclUint8, c, s);
    });
  }

  void sum_scatter(const array& in, array& out) override {
    require_gpu("sum_scatter");
    const Reduction red = reduction(in.dtype(), detail::ReduceOp::sum, "sum_scatter");
    if (out.size() == 0) return;
    const void* src = cu::device_ptr(in);
    void* dst = cu::device_ptr(out);
    enqueue("sum_scatter", "ncclReduceScatter", [&](ncclComm_t c, cudaStream_t s) {
      return ncclReduceScatter(src, dst, out.size() * red.lanes, red.type, red.op, c, s);
    });
  }

  void send(const array& in, int dst) override {
    require_gpu("send");
    if (in.nbytes() == 0) return;
    const void* src = cu::device_ptr(in);
    enqueue("send", "ncclSend", [&](ncclComm_t c, cudaStream_t s) {
      return ncclSend(src, in.nbytes(), ncclUint8, dst, c, s);
    });
  }

  void recv(array& out, int src) override {
    require_gpu("recv");
    if (out.nbytes() == 0) return;
    void* dst = cu::device_ptr(out);
    enqueue("recv", "ncclRecv", [&](ncclComm_t c, cudaStream_t s) {
      return ncclRecv(dst, out.nbytes(), ncclUint8, src, c, s);
    });
  }

 private:
  // Outside a GPU node (eval_cpu of a node built on a CPU stream) there are no device buffers.
  static void require_gpu(const char* op) {
    if (cu::current_state() == nullptr) throw_not_on_gpu(op);
  }

  ncclComm_t live(const char* op) const {
    if (comm_ == nullptr) {
      throw std::runtime_error(
          std::string("[") + op + "] this group's NCCL communicator was aborted after an earlier failure.");
    }
    return comm_;
  }

  // One NCCL call on the node's CUDA stream. The lock keeps two streams' workers from using
  // the communicator at once (NCCL does not allow it); the order of the calls across the
  // processes is the program's, as with MPI.
  template <typename Call>
  void enqueue(const char* op, const char* call, Call&& f) {
    cudaStream_t stream = cu::stream();
    std::lock_guard<std::mutex> lock(mtx_);
    const ncclResult_t r = f(live(op), stream);
    settle(comm_, r, op, call, rank_);
  }

  std::mutex mtx_;
  ncclComm_t comm_;
  int rank_ = 0, size_ = 1;
};

// The number of processes a launcher started, from its variables (0 when none is set).
int launcher_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

} // namespace

bool is_available() {
  return gpu::is_available();
}

std::string unavailable_reason() {
  return is_available() ? std::string() : std::string("no CUDA GPU is present");
}

std::shared_ptr<detail::GroupImpl> init() {
  if (!is_available()) return nullptr;
  static std::mutex m;
  // Never destroyed (see ~NcclGroup); the global group of distributed::init holds it too.
  static auto* world = new std::shared_ptr<detail::GroupImpl>();
  std::lock_guard<std::mutex> lock(m);
  if (*world) return *world;

  const char* op = "distributed::init";
  int rank = 0, size = 1, local = 0;
  if (auto mpi_world = mpi::init()) {
    rank = mpi_world->rank();
    size = mpi_world->size();
    local = mpi::local_rank();
  } else if (const int n = launcher_size(); n > 1) {
    throw std::runtime_error(
        std::string("[") + op + "] this process is one of " + std::to_string(n) +
        " started by a launcher, but nuvec was built without MPI, which the nccl backend uses to share "
        "its id between them; rebuild with MPI (libopenmpi-dev).");
  }
  // One GPU per process, the local rank's. nuvec computes on the first GPU a process sees.
  const int count = gpu::device_count();
  const int device = local % count;
  if (device != 0) {
    throw std::runtime_error(
        std::string("[") + op + "] the nccl backend takes one GPU per process: this process is local rank " +
        std::to_string(local) + " of its node and sees " + std::to_string(count) + " GPUs, so its GPU is " +
        std::to_string(device) +
        ", but nuvec computes on the first GPU a process sees. Give each process its own GPU with "
        "CUDA_VISIBLE_DEVICES, e.g. mpirun -np N sh -c 'CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK exec "
        "./program'.");
  }
  cu::check(cudaSetDevice(device), "cudaSetDevice");

  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) fail(op, "ncclGetUniqueId", r, nullptr);
  }
  if (size > 1) mpi::broadcast(&id, static_cast<int>(sizeof(id)), 0);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; // so that a missing peer meets the deadline in settle
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    fail(op, "ncclCommInitRankConfig", r, nullptr);
  }
  settle(comm, r, op, "ncclCommInitRankConfig", rank);
  *world = std::make_shared<NcclGroup>(comm);
  return *world;
}

} // namespace nuvec::distributed::nccl
