// Threads that build and evaluate graphs at once: independent graphs, graphs that share
// evaluated arrays, one unevaluated graph that every thread evaluates, async_eval and grad.
// Run under ThreadSanitizer by scripts/tsan_check.sh; here it checks the answers.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

TEST(ThreadStress, IndependentAndSharedGraphs) {
  const array w = randn({64, 32});
  eval(w);
  const auto wv = to_vector(w);
  // One graph, not yet evaluated, that every thread evaluates.
  const array shared = sum(exp(multiply(w, array(0.5f))));
  double shared_ref = 0;
  for (double v : wv) shared_ref += std::exp(0.5 * v);

  constexpr int kThreads = 4, kIters = 30;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int it = 0; it < kIters; ++it) {
        const float c = 0.1f * static_cast<float>(t + 1) + 0.01f * static_cast<float>(it);
        // An independent graph over the shared weights: sum((w c)^2) and its gradient 2 w c^2.
        auto loss = [&](const array& s) { return sum(square(multiply(w, s))); };
        array g = grad(loss)(array(c));
        array y = matmul(transpose(w), multiply(w, array(c)));
        if (it % 2) {
          async_eval(g, y);
          y.wait();
          g.wait();
        } else {
          eval(g, y);
        }
        double g_ref = 0;
        for (double v : wv) g_ref += 2 * v * v * c;
        if (std::abs(g.item<float>() - g_ref) > 1e-3 * std::abs(g_ref)) failures[t]++;
        double y00 = 0; // (wᵀ w c)[0, 0]
        for (int r = 0; r < 64; ++r) y00 += wv[r * 32] * wv[r * 32] * c;
        if (std::abs(to_vector(y)[0] - y00) > 1e-4 * (1 + std::abs(y00))) failures[t]++;
        if (std::abs(shared.item<float>() - shared_ref) > 1e-4 * shared_ref) failures[t]++;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}
