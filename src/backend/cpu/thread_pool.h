// nuvec: the CPU thread pool every CPU kernel splits its work over (element-wise ops,
// reductions, softmax, im2col, and the fused CPU kernels to come). One pool per process,
// started on first use: num_threads() - 1 workers plus the calling thread, which always takes
// part. Sized to the machine (std::thread::hardware_concurrency), or to NUVEC_NUM_THREADS.
//
// Jobs do not nest and do not queue: a call from inside a pool task, or while another thread's
// job holds the pool (streams evaluate on their own threads), runs inline on the caller. So a
// caller never waits for anyone else's work, and small work never leaves its thread.
#pragma once

#include <cstddef>
#include <functional>

namespace nuvec::cpu {

/// Threads a CPU kernel may use, the caller included: NUVEC_NUM_THREADS when set to a
/// positive integer, else the machine's hardware concurrency (at least 1). Read once.
int num_threads();

/// Runs task(i) for every i in [0, tasks) on the pool's workers and the calling thread, and
/// returns when all have finished. The first exception a task throws is rethrown here (the
/// other tasks still run to the end). Runs inline, in order, for tasks <= 1, a pool of one
/// thread, a call from inside a task, or while another job holds the pool.
void run_tasks(size_t tasks, const std::function<void(size_t)>& task);

/// Runs f(begin, end) over [0, n) in contiguous chunks of at least `grain` elements (each
/// boundary a multiple of 64, so that chunks of any element size start on a cache line),
/// one chunk per thread at most. n < 2 * grain runs f(0, n) on the calling thread.
void parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& f);

} // namespace nuvec::cpu
