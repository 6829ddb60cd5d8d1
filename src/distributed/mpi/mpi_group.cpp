// nuvec: the MPI backend (Open MPI): a group is an MPI communicator, the collectives are
// MPI_Iallreduce, MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Isend and MPI_Irecv on host
// buffers. Before every collective the processes exchange a signature (op, dtype, shape) with
// one small MPI_Allgather and raise std::invalid_argument on every process when they disagree,
// instead of reducing mismatched buffers or hanging in a transfer of the wrong size; a send
// carries the same signature ahead of its payload and the receiver checks it. float16 and
// bfloat16 travel as 2-byte types with their own reduction ops (float arithmetic, rounded per
// combine, as a tree of float16 additions would); float maxima and minima propagate NaN
// (NumPy's maximum/minimum; MPI leaves NaN unspecified); bool reduces as or (sum, max) and
// and (min). MPI is started with MPI_THREAD_MULTIPLE since the collectives run on a stream's
// worker thread, not the thread that called init. Every transfer is non-blocking and waited on
// with a deadline (NUVEC_DISTRIBUTED_TIMEOUT seconds, default 600; 0 waits forever): a process
// that died, hangs or called other collectives makes the others abort the job with a message
// naming the op and the rank after that time, instead of hanging silently (a pending MPI
// collective cannot be cancelled, so aborting is the only clean way out).
// The C interface only (Open MPI's C++ bindings are deprecated and warn under -Wextra).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "distributed/mpi/mpi.h"
#include "distributed/timeout.h"
#include "nuvec/types/half_types.h"

namespace nuvec::distributed::mpi {

namespace {

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw std::runtime_error(std::string("[distributed] ") + what + " failed: " + std::string(msg, len));
  }
}

// The float reductions MPI lacks: float16 and bfloat16 (computed in float), and NaN-propagating
// maximum and minimum for every float type.
enum class Combine { sum, max, min };

template <typename T, Combine C>
void combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    if constexpr (C == Combine::sum) {
      b[i] = T(x + y);
    } else if constexpr (C == Combine::max) {
      b[i] = std::isnan(x) || x > y ? a[i] : b[i];
    } else {
      b[i] = std::isnan(x) || x < y ? a[i] : b[i];
    }
  }
}

template <typename T, Combine C>
void combine_wide(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    if constexpr (C == Combine::max) {
      if (std::isnan(a[i]) || a[i] > b[i]) b[i] = a[i];
    } else {
      if (std::isnan(a[i]) || a[i] < b[i]) b[i] = a[i];
    }
  }
}

// MPI's process-wide state: started once, finalised at exit (a static's destructor).
struct Runtime {
  MPI_Datatype f16 = MPI_DATATYPE_NULL, bf16 = MPI_DATATYPE_NULL;
  MPI_Op f16_ops[3]{}, bf16_ops[3]{}, f32_ops[2]{}, f64_ops[2]{};
  bool started = false;

  void start() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      started = true;
    }
    check(MPI_Type_contiguous(2, MPI_BYTE, &f16), "MPI_Type_contiguous");
    check(MPI_Type_commit(&f16), "MPI_Type_commit");
    check(MPI_Type_contiguous(2, MPI_BYTE, &bf16), "MPI_Type_contiguous");
    check(MPI_Type_commit(&bf16), "MPI_Type_commit");
    MPI_Op_create(&combine<float16_t, Combine::sum>, 1, &f16_ops[0]);
    MPI_Op_create(&combine<float16_t, Combine::max>, 1, &f16_ops[1]);
    MPI_Op_create(&combine<float16_t, Combine::min>, 1, &f16_ops[2]);
    MPI_Op_create(&combine<bfloat16_t, Combine::sum>, 1, &bf16_ops[0]);
    MPI_Op_create(&combine<bfloat16_t, Combine::max>, 1, &bf16_ops[1]);
    MPI_Op_create(&combine<bfloat16_t, Combine::min>, 1, &bf16_ops[2]);
    MPI_Op_create(&combine_wide<float, Combine::max>, 1, &f32_ops[0]);
    MPI_Op_create(&combine_wide<float, Combine::min>, 1, &f32_ops[1]);
    MPI_Op_create(&combine_wide<double, Combine::max>, 1, &f64_ops[0]);
    MPI_Op_create(&combine_wide<double, Combine::min>, 1, &f64_ops[1]);
  }

  ~Runtime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (started && !finalized) MPI_Finalize();
  }
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

MPI_Datatype mpi_type(Dtype dt) {
  switch (dt.val()) {
    case Dtype::Val::bool_: return MPI_C_BOOL;
    case Dtype::Val::uint8: return MPI_UINT8_T;
    case Dtype::Val::uint16: return MPI_UINT16_T;
    case Dtype::Val::uint32: return MPI_UINT32_T;
    case Dtype::Val::uint64: return MPI_UINT64_T;
    case Dtype::Val::int8: return MPI_INT8_T;
    case Dtype::Val::int16: return MPI_INT16_T;
    case Dtype::Val::int32: return MPI_INT32_T;
    case Dtype::Val::int64: return MPI_INT64_T;
    case Dtype::Val::float16: return runtime().f16;
    case Dtype::Val::bfloat16: return runtime().bf16;
    case Dtype::Val::float32: return MPI_FLOAT;
    case Dtype::Val::float64: return MPI_DOUBLE;
    case Dtype::Val::complex64: return MPI_C_FLOAT_COMPLEX;
  }
  throw std::invalid_argument("[distributed] no MPI type for this dtype.");
}

MPI_Op mpi_op(Dtype dt, detail::ReduceOp op) {
  const int k = static_cast<int>(op); // sum, max, min
  switch (dt.val()) {
    case Dtype::Val::bool_: return op == detail::ReduceOp::min ? MPI_LAND : MPI_LOR;
    case Dtype::Val::float16: return runtime().f16_ops[k];
    case Dtype::Val::bfloat16: return runtime().bf16_ops[k];
    case Dtype::Val::float32: return op == detail::ReduceOp::sum ? MPI_SUM : runtime().f32_ops[k - 1];
    case Dtype::Val::float64: return op == detail::ReduceOp::sum ? MPI_SUM : runtime().f64_ops[k - 1];
    default: return op == detail::ReduceOp::sum ? MPI_SUM : op == detail::ReduceOp::max ? MPI_MAX : MPI_MIN;
  }
}

std::string shape_str(const int64_t* dims, int ndim) {
  std::string out = "(";
  for (int i = 0; i < ndim; ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + (ndim == 1 ? ",)" : ")");
}

// What the processes must agree on before a collective: the op, the dtype and the shape
// (up to 8 axes; more are folded into the last slot).
constexpr int kMaxAxes = 8;
struct Signature {
  int64_t op, dtype, ndim, dims[kMaxAxes];
};

Signature signature(int op, const array& x) {
  Signature s{op, static_cast<int64_t>(x.dtype().val()), static_cast<int64_t>(x.ndim()), {}};
  for (int i = 0; i < static_cast<int>(x.ndim()); ++i) {
    if (i < kMaxAxes) s.dims[i] = x.shape(i);
    else s.dims[kMaxAxes - 1] = s.dims[kMaxAxes - 1] * 1000003 + x.shape(i);
  }
  return s;
}

Dtype dtype_of(int64_t val) {
  for (Dtype d : {bool_, uint8, uint16, uint32, uint64, int8, int16, int32, int64, float16, bfloat16, float32,
                  float64, complex64}) {
    if (static_cast<int64_t>(d.val()) == val) return d;
  }
  throw std::invalid_argument("[distributed] a peer sent an unknown dtype.");
}

std::string describe(const Signature& s) {
  return dtype_name(dtype_of(s.dtype)) + " " +
      shape_str(s.dims, static_cast<int>(std::min<int64_t>(s.ndim, kMaxAxes)));
}

// Waits for `req`: polls (spinning for 5 ms, then napping 20 us, from 0.1 s on 1 ms) until it
// completes or the deadline passes, then aborts the job with a message naming op and rank.
void wait(MPI_Request& req, MPI_Comm comm, const char* op) {
  const double limit = timeout_seconds();
  if (limit <= 0) {
    check(MPI_Wait(&req, MPI_STATUS_IGNORE), op);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), op);
    if (done) return;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > limit) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      std::fprintf(stderr,
          "[%s] rank %d: no answer from the group after %.0f s (NUVEC_DISTRIBUTED_TIMEOUT): a process failed, "
          "hangs or called other collectives; aborting the job.\n", op, rank, waited);
      std::fflush(stderr);
      MPI_Abort(comm, 3);
    }
    // Spin for the first 5 ms (a transfer of a few MiB), then yield the core in growing naps.
    if (waited > 5e-3) std::this_thread::sleep_for(std::chrono::microseconds(waited > 0.1 ? 1000 : 20));
  }
}

// Index of a signature's op in the messages.
const char* const kOpNames[] = {"all_sum", "all_max", "all_min", "all_gather", "sum_scatter", "send"};

class MpiGroup : public detail::GroupImpl {
 public:
  explicit MpiGroup(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }

  int rank() override { return rank_; }
  int size() override { return size_; }
  const char* backend() const override { return "mpi"; }

  std::shared_ptr<GroupImpl> split(int color, int key) override {
    MPI_Comm sub;
    check(MPI_Comm_split(comm_, color, key < 0 ? rank_ : key, &sub), "MPI_Comm_split");
    return std::make_shared<MpiGroup>(sub, true);
  }

  void all_reduce(const array& in, array& out, detail::ReduceOp op) override {
    const int code = static_cast<int>(op);
    agree(code, in);
    if (in.dtype() == complex64 && op != detail::ReduceOp::sum) {
      throw std::invalid_argument(std::string("[") + kOpNames[code] + "] complex64 has no order.");
    }
    if (in.size() == 0) return;
    MPI_Request req;
    check(
        MPI_Iallreduce(in.data<void>(), out.data<void>(), count(in.size()), mpi_type(in.dtype()), mpi_op(in.dtype(), op),
                       comm_, &req),
        "MPI_Iallreduce");
    wait(req, comm_, kOpNames[code]);
  }

  void all_gather(const array& in, array& out) override {
    agree(3, in);
    if (in.size() == 0) return;
    MPI_Request req;
    check(
        MPI_Iallgather(in.data<void>(), count(in.size()), mpi_type(in.dtype()), out.data<void>(), count(in.size()),
                       mpi_type(in.dtype()), comm_, &req),
        "MPI_Iallgather");
    wait(req, comm_, "all_gather");
  }

  void sum_scatter(const array& in, array& out) override {
    agree(4, in);
    if (out.size() == 0) return;
    MPI_Request req;
    check(
        MPI_Ireduce_scatter_block(in.data<void>(), out.data<void>(), count(out.size()), mpi_type(in.dtype()),
                                  mpi_op(in.dtype(), detail::ReduceOp::sum), comm_, &req),
        "MPI_Ireduce_scatter_block");
    wait(req, comm_, "sum_scatter");
  }

  void send(const array& in, int dst) override {
    const Signature s = signature(5, in);
    MPI_Request req;
    check(MPI_Isend(&s, sizeof(s), MPI_BYTE, dst, kHeaderTag, comm_, &req), "MPI_Isend");
    wait(req, comm_, "send");
    if (in.nbytes() > 0) {
      check(MPI_Isend(in.data<void>(), count(in.size()), mpi_type(in.dtype()), dst, kDataTag, comm_, &req), "MPI_Isend");
      wait(req, comm_, "send");
    }
  }

  void recv(array& out, int src) override {
    Signature theirs{};
    MPI_Request req;
    check(MPI_Irecv(&theirs, sizeof(theirs), MPI_BYTE, src, kHeaderTag, comm_, &req), "MPI_Irecv");
    wait(req, comm_, "recv");
    const Signature ours = signature(5, out);
    const bool same = std::memcmp(&theirs, &ours, sizeof(ours)) == 0;
    // The payload is taken off the wire whatever it is, so the next transfer stays aligned.
    int64_t bytes = 1;
    for (int i = 0; i < std::min<int64_t>(theirs.ndim, kMaxAxes); ++i) bytes *= theirs.dims[i];
    bytes *= size_of(dtype_of(theirs.dtype));
    if (same) {
      if (out.nbytes() > 0) {
        check(MPI_Irecv(out.data<void>(), count(out.size()), mpi_type(out.dtype()), src, kDataTag, comm_, &req), "MPI_Irecv");
        wait(req, comm_, "recv");
      }
      return;
    }
    if (bytes > 0) {
      MPI_Status st;
      check(MPI_Probe(src, kDataTag, comm_, &st), "MPI_Probe");
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      std::vector<char> drain(static_cast<size_t>(n));
      check(MPI_Recv(drain.data(), n, MPI_BYTE, src, kDataTag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    }
    throw std::invalid_argument(
        "[recv] rank " + std::to_string(src) + " sent " + describe(theirs) + " but this process expects " +
        describe(ours) + ".");
  }

 private:
  static constexpr int kHeaderTag = 7001, kDataTag = 7002;

  static int count(size_t n) {
    if (n > static_cast<size_t>(INT32_MAX)) {
      throw std::invalid_argument("[distributed] MPI moves at most 2^31 - 1 elements in one collective.");
    }
    return static_cast<int>(n);
  }

  // Every process's signature; all raise together when any differs.
  void agree(int code, const array& x) {
    const Signature mine = signature(code, x);
    std::vector<Signature> all(size_);
    MPI_Request req;
    check(MPI_Iallgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine), MPI_BYTE, comm_, &req), "MPI_Iallgather");
    wait(req, comm_, kOpNames[code]);
    for (int r = 0; r < size_; ++r) {
      if (std::memcmp(&all[r], &all[0], sizeof(mine)) == 0) continue;
      if (all[r].op != all[0].op) {
        throw std::invalid_argument(
            std::string("[distributed] the processes called different collectives: rank 0 ") +
            kOpNames[all[0].op] + ", rank " + std::to_string(r) + " " + kOpNames[all[r].op] + ".");
      }
      throw std::invalid_argument(
          std::string("[") + kOpNames[code] + "] the processes disagree: rank 0 has " + describe(all[0]) +
          ", rank " + std::to_string(r) + " has " + describe(all[r]) + ".");
    }
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

} // namespace

bool is_available() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
      std::getenv("PMIX_RANK") != nullptr;
}

std::shared_ptr<detail::GroupImpl> init() {
  if (!is_available()) return nullptr;
  static std::mutex m;
  static std::shared_ptr<detail::GroupImpl> world;
  std::lock_guard<std::mutex> lock(m);
  if (!world) {
    runtime().start();
    world = std::make_shared<MpiGroup>(MPI_COMM_WORLD, false);
  }
  return world;
}

void broadcast(void* data, int bytes, int root) {
  MPI_Request req;
  check(MPI_Ibcast(data, bytes, MPI_BYTE, root, MPI_COMM_WORLD, &req), "MPI_Ibcast");
  wait(req, MPI_COMM_WORLD, "distributed::init");
}

int local_rank() {
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) return std::atoi(v);
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int rank = 0;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  return rank;
}

} // namespace nuvec::distributed::mpi
