// The CPU thread pool (src/backend/cpu/thread_pool.h): every task runs once, errors reach the
// caller, nested and concurrent calls run inline instead of waiting, chunks are aligned, and
// kernels split over it give the same bits for any NUVEC_NUM_THREADS.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "nuvec/nuvec.h"

using namespace nuvec;

TEST(ThreadPool, RunsEveryTaskOnce) {
  for (size_t tasks : {0, 1, 2, 3, 17, 1000}) {
    std::vector<std::atomic<int>> hits(tasks);
    cpu::run_tasks(tasks, [&](size_t i) { hits[i]++; });
    for (size_t i = 0; i < tasks; ++i) EXPECT_EQ(hits[i].load(), 1) << "task " << i << " of " << tasks;
  }
  EXPECT_GE(cpu::num_threads(), 1);
}

TEST(ThreadPool, RethrowsTheFirstErrorAfterEveryTaskRan) {
  std::atomic<int> ran{0};
  EXPECT_THROW(
      cpu::run_tasks(8, [&](size_t i) {
        ran++;
        if (i % 3 == 1) throw std::out_of_range("task " + std::to_string(i));
      }),
      std::out_of_range);
  EXPECT_EQ(ran.load(), 8);
  // The pool is still usable afterwards.
  std::atomic<int> again{0};
  cpu::run_tasks(5, [&](size_t) { again++; });
  EXPECT_EQ(again.load(), 5);
}

TEST(ThreadPool, NestedAndConcurrentCallsRunInline) {
  // A task that splits its own work, on several threads at once: nothing may deadlock.
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        cpu::run_tasks(4, [&](size_t) {
          cpu::run_tasks(3, [&](size_t) { total++; });
        });
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4 * 50 * 4 * 3);
}

TEST(ThreadPool, ParallelForCoversTheRangeInAlignedChunks) {
  for (size_t n : {size_t(0), size_t(1), size_t(100), size_t(1) << 17, (size_t(1) << 20) + 13}) {
    std::mutex mtx;
    std::vector<std::pair<size_t, size_t>> chunks;
    cpu::parallel_for(n, 1 << 16, [&](size_t b, size_t e) {
      std::lock_guard<std::mutex> lk(mtx);
      chunks.push_back({b, e});
    });
    std::sort(chunks.begin(), chunks.end());
    size_t at = 0;
    for (auto [b, e] : chunks) {
      EXPECT_EQ(b, at) << "n " << n;
      EXPECT_EQ(b % 64, 0u);
      EXPECT_LE(b, e);
      at = e;
    }
    EXPECT_EQ(at, n);
    EXPECT_LE(chunks.size(), static_cast<size_t>(cpu::num_threads()));
  }
}

TEST(ThreadPool, AForkedChildRunsItsJobsInline) {
  // The child has none of the parent's workers: waiting for them would hang it.
  cpu::run_tasks(4, [](size_t) {});
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int> n{0};
    cpu::run_tasks(16, [&](size_t) { n++; });
    _exit(n.load() == 16 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

namespace {

// A hash of the bits of reductions and element-wise results that run on the pool.
std::string result_bits() {
  random::seed(7);
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const array& a) {
    array c = astype(a, float32);
    eval(c);
    const float* p = c.data<float>();
    for (size_t i = 0; i < c.size(); ++i) {
      uint32_t b;
      std::memcpy(&b, p + i, 4);
      h = (h ^ b) * 1099511628211ull;
    }
  };
  auto cols = random::normal({128 * 21 + 37, 300});
  mix(sum(cols, 0));
  mix(max(cols, 0));
  mix(prod(add(cols, array(1.0f)), 0));
  mix(sum(cols, 1));
  auto flat = random::normal({3'000'000});
  mix(sum(flat));
  mix(min(flat));
  mix(sum(reshape(flat, {3, 1'000'000, 1}), 1));
  // Ties whose bits differ (+0 and -0) must not depend on the split either.
  std::vector<float> ties(300'001, -1.0f);
  ties[5] = 0.0f;
  ties[150'001] = -0.0f;
  array t(ties.data(), Shape{300'001}, float32);
  mix(max(t));
  mix(min(negative(t)));
  mix(exp(flat));
  mix(add(flat, flat));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string run_self_with_threads(int threads) {
  std::string cmd = "NUVEC_NUM_THREADS=" + std::to_string(threads) +
      " /proc/" + std::to_string(getpid()) +
      "/exe --gtest_filter=ThreadPool.PrintsResultBits:ThreadPool.ParallelFor*:ThreadPool.Runs*"
      " 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "popen failed";
  std::string out;
  char line[256];
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, "result bits ", 12) == 0) out = std::string(line + 12, 16);
  }
  if (pclose(f) != 0) return "a test failed with " + std::to_string(threads) + " threads";
  return out;
}

} // namespace

// Run by the next test in child processes with NUVEC_NUM_THREADS set.
TEST(ThreadPool, PrintsResultBits) {
  std::printf("result bits %s\n", result_bits().c_str());
}

TEST(ThreadPool, ResultsAreTheSameForAnyThreadCount) {
  // Sums split at their own pairwise boundaries, so the bits do not depend on the split.
  // The children also run the pool's own tests at their thread count.
  const std::string here = result_bits();
  for (int threads : {1, 2, 3, 8, 16}) {
    EXPECT_EQ(run_self_with_threads(threads), here) << "NUVEC_NUM_THREADS=" << threads;
  }
}
