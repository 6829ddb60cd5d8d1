// nuvec-mpi-bench: distributed::all_sum over MPI beside the raw MPI_Allreduce on the same
// buffers, in the same run (issue 16's goal: within 5% of raw MPI at 64 MiB). Run under
// mpirun, e.g. `mpirun -np 2 build/bench/nuvec-mpi-bench` (as root add
// --allow-run-as-root). float32 buffers of 4 KiB to 64 MiB; per size the median of many
// runs, each after an MPI_Barrier; the floor column is one memcpy of the buffer (a read and
// a write, the least an all-reduce of one process's data can move) measured in the run.
// Rank 0 prints the table.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "nuvec/nuvec.h"

namespace dist = nuvec::distributed;

namespace {

template <typename F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  double m = t[t.size() / 2];
  // Every rank reports the slowest rank's median (the collective ends when the last does).
  MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

} // namespace

int main() {
  const auto g = dist::init(true, "mpi"); // starts MPI
  const int rank = g.rank();
  if (rank == 0) {
    std::printf("# %d processes; float32 all_sum; median ms (slowest rank)\n", g.size());
    std::printf("%-10s %10s %10s %10s %12s %12s\n", "bytes", "nuvec", "raw MPI", "floor", "raw/nuvec", "floor/nuvec");
  }
  for (size_t bytes : {size_t(4) << 10, size_t(1) << 20, size_t(16) << 20, size_t(64) << 20}) {
    const size_t n = bytes / 4;
    const int reps = bytes >= (16u << 20) ? 15 : 100;
    std::vector<float> src(n, 1.0f + rank), dst(n);
    const double raw = median_ms(reps, [&] {
      MPI_Allreduce(src.data(), dst.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    const nuvec::array x = nuvec::full({static_cast<int>(n)}, 1.0f + rank);
    nuvec::eval(x);
    const double ours = median_ms(reps, [&] { nuvec::eval(dist::all_sum(x)); });
    const double floor = median_ms(reps, [&] { std::memcpy(dst.data(), src.data(), bytes); });
    // The answer, so the timed work cannot be skipped: every element is the sum of 1 + r.
    const float want = g.size() + g.size() * (g.size() - 1) / 2.0f;
    nuvec::array y = dist::all_sum(x);
    nuvec::eval(y);
    if (y.data<float>()[n - 1] != want) {
      std::fprintf(stderr, "wrong sum at %zu bytes\n", bytes);
      return 1;
    }
    if (rank == 0) {
      std::printf("%-10zu %10.3f %10.3f %10.3f %12.3f %12.3f\n", bytes, ours, raw, floor, raw / ours, floor / ours);
    }
  }
  return 0;
}
