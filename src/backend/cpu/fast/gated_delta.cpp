// nuvec: the CPU kernels of GatedDelta and of its backward GatedDeltaVjp (rules and fallback
// in src/fast/gated_delta.cpp; GatedDeltaVjp's at the end of this file). One
// task per (b, value head) over the thread pool: the head's [Dv, Dk] state converted once into
// a float32 (float64) buffer that stays in cache for all T steps, each row advanced by the
// step of src/backend/common/math/gated_delta.h (one pass for the three dot products, one for
// the update). q, k, v, g and beta are converted to the recurrence's dtype first: they are
// O(T·D) against the O(T·Dv·Dk) work. States are written in the state's dtype per (b, h) (per
// step for the steps mode); the slots mode writes the named rows into the pool's own buffer
// when it can be donated, else into a copy.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/common/math/gated_delta.h"
#include "backend/common/strided.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/index_range.h"
#include "backend/cpu/thread_pool.h"
#include "fast/gated_delta.h"
#include "nuvec/allocator.h"

namespace nuvec {

namespace {

/// s·k and s·q over n elements in one pass, with 8 partial sums each (a fixed order the
/// compiler vectorises).
template <typename A>
void dot2(const A* s, const A* k, const A* q, int64_t n, A& sk, A& sq) {
  constexpr int W = 8;
  A pk[W] = {}, pq[W] = {};
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    for (int u = 0; u < W; ++u) {
      pk[u] += s[j + u] * k[j + u];
      pq[u] += s[j + u] * q[j + u];
    }
  }
  for (; j < n; ++j) {
    pk[j % W] += s[j] * k[j];
    pq[j % W] += s[j] * q[j];
  }
  sk = sq = A(0);
  for (int u = 0; u < W; ++u) {
    sk += pk[u];
    sq += pq[u];
  }
}

/// The inputs as the recurrence reads them, row-major in its dtype A.
template <typename A>
struct Operands {
  const A *q, *k, *v, *g, *beta;
  int64_t b, t, hk, dk, hv, dv;
};

/// Runs the T steps of head (b, h) on `work` ([Dv, Dk] in A), writing y and calling
/// after_step(t) after each step.
template <typename A, typename F>
void run_head(const Operands<A>& o, int64_t b, int64_t h, A* work, A* y, F&& after_step) {
  const int64_t hk = h / (o.hv / o.hk);
  for (int64_t t = 0; t < o.t; ++t) {
    const int64_t bt = b * o.t + t;
    const A* k = o.k + (bt * o.hk + hk) * o.dk;
    const A* q = o.q + (bt * o.hk + hk) * o.dk;
    const A* v = o.v + (bt * o.hv + h) * o.dv;
    const A g = o.g[bt * o.hv + h], beta = o.beta[bt * o.hv + h];
    A kq, unused;
    dot2(k, q, q, o.dk, kq, unused);
    A* yt = y + (bt * o.hv + h) * o.dv;
    for (int64_t i = 0; i < o.dv; ++i) {
      A* s = work + i * o.dk;
      A sk, sq;
      dot2(s, k, q, o.dk, sk, sq);
      const auto step = math::gated_delta_row_step(g, beta, v[i], sk, sq, kq);
      yt[i] = step.y;
      for (int64_t j = 0; j < o.dk; ++j) s[j] = math::gated_delta_update(s[j], g, step.delta, k[j]);
    }
    after_step(t);
  }
}

template <typename A>
void gated_delta_cpu(GatedDeltaMode mode, const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Dtype acc = std::is_same_v<A, double> ? float64 : float32;
  std::vector<array> in;
  for (int i = 0; i < 5; ++i) in.push_back(cpu::contiguous_copy(inputs[i], acc));
  const array& q = inputs[0];
  // The slots mode updates the pool in place when nothing else refers to it (the serving
  // engine replaces its pool with the result each step): each task reads its row before it
  // writes it. Asked before any handle to the pool is copied here.
  const bool donated = mode == GatedDeltaMode::slots && cpu::donate(inputs[5], outputs[1]);
  const array state = cpu::as_row_contiguous(inputs[5]);
  Operands<A> o{in[0].data<A>(), in[1].data<A>(), in[2].data<A>(), in[3].data<A>(), in[4].data<A>(),
                q.shape(0), q.shape(1), q.shape(2), q.shape(3), inputs[2].shape(2), inputs[2].shape(3)};
  const int64_t head = o.dv * o.dk;
  const Dtype sd = state.dtype();
  const Shape row{static_cast<int>(head)};
  const Strides unit{1};

  // The row of the state source each sequence starts from (its slot in the pool).
  std::vector<int64_t> source(static_cast<size_t>(o.b));
  array& states = outputs[1];
  if (mode == GatedDeltaMode::slots) {
    const array slots = cpu::as_row_contiguous(inputs[6]);
    const int32_t* sp = slots.data<int32_t>();
    for (int64_t b = 0; b < o.b; ++b) source[b] = cpu::checked_index(sp[b], state.shape(0), 0, "gated_delta_slots");
    // Two sequences writing one row would race (tasks per (sequence, head)): refused.
    std::vector<int64_t> sorted = source;
    std::sort(sorted.begin(), sorted.end());
    if (auto at = std::adjacent_find(sorted.begin(), sorted.end()); at != sorted.end()) {
      throw_invalid_argument("gated_delta_slots", "indices must be distinct; row ", *at, " is named twice.");
    }
    if (!donated) cpu::copy_strided(state, states); // the rows no sequence names
  } else {
    for (int64_t b = 0; b < o.b; ++b) source[b] = b;
    states.set_data(allocator::malloc(states.nbytes()));
  }
  std::vector<A> y(static_cast<size_t>(outputs[0].size()));
  const char* src = static_cast<const char*>(state.raw_data());
  char* dst = static_cast<char*>(states.raw_data());
  const int64_t row_bytes = head * static_cast<int64_t>(size_of(sd));
  cpu::run_tasks(static_cast<size_t>(o.b * o.hv), [&](size_t task) {
    const int64_t b = static_cast<int64_t>(task) / o.hv, h = static_cast<int64_t>(task) % o.hv;
    std::vector<A> work(static_cast<size_t>(head));
    const int64_t from = source[b] * o.hv + h;
    cpu::copy_elements(src + from * row_bytes, sd, unit, work.data(), acc, unit, row);
    auto write = [&](int64_t at) { cpu::copy_elements(work.data(), acc, unit, dst + at * row_bytes, sd, unit, row); };
    run_head(o, b, h, work.data(), y.data(), [&](int64_t t) {
      if (mode == GatedDeltaMode::steps) write((b * o.t + t) * o.hv + h);
    });
    if (mode != GatedDeltaMode::steps) write(from);
  });
  array& out = outputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  const Strides strides = row_strides(out.shape());
  cpu::copy_elements(y.data(), acc, strides, out.raw_data(), out.dtype(), strides, out.shape());
}

/// s·k over n elements (dot2's order).
template <typename A>
A dot(const A* s, const A* k, int64_t n) {
  A sk, unused;
  dot2(s, k, k, n, sk, unused);
  return sk;
}

/// One step of the recurrence on a head's state `s` ([Dv, Dk]), without y: the forward pass
/// GatedDeltaVjp recomputes.
template <typename A>
void step_state(A* s, const A* k, const A* v, A g, A beta, int64_t dv, int64_t dk) {
  for (int64_t i = 0; i < dv; ++i) {
    A* row = s + i * dk;
    const A delta = math::gated_delta_row_step(g, beta, v[i], dot(row, k, dk), A(0), A(0)).delta;
    for (int64_t j = 0; j < dk; ++j) row[j] = math::gated_delta_update(row[j], g, delta, k[j]);
  }
}

/// GatedDeltaVjp (src/fast/gated_delta.h): one task per (b, key head), its value heads in
/// turn (they add into the same dq and dk rows). Per head: the forward pass once, keeping the
/// state every kGatedDeltaVjpChunk steps; then the chunks from the last, each recomputed
/// forwards from its checkpoint into `states` and walked backwards with the row rule of
/// math::gated_delta_row_grad, the cotangent D ([Dv, Dk]) carried across.
template <typename A>
void gated_delta_vjp_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const Dtype acc = std::is_same_v<A, double> ? float64 : float32;
  std::vector<array> in;
  for (int i = 0; i < 8; ++i) in.push_back(cpu::contiguous_copy(inputs[i], acc));
  const array& q0 = inputs[0];
  const int64_t B = q0.shape(0), T = q0.shape(1), Hk = q0.shape(2), Dk = q0.shape(3);
  const int64_t Hv = inputs[2].shape(2), Dv = inputs[2].shape(3), rep = Hv / Hk, head = Dv * Dk;
  const A *q = in[0].data<A>(), *k = in[1].data<A>(), *v = in[2].data<A>(), *g = in[3].data<A>(),
          *beta = in[4].data<A>(), *state = in[5].data<A>(), *dy = in[6].data<A>(), *dstate = in[7].data<A>();
  std::vector<A> dq(size_t(B * T * Hk * Dk), A(0)), dk(dq.size(), A(0)), dv(size_t(B * T * Hv * Dv), A(0)),
      dg(size_t(B * T * Hv), A(0)), dbeta(dg.size(), A(0)), ds0(size_t(B * Hv * head), A(0));
  constexpr int64_t C = kGatedDeltaVjpChunk;
  const int64_t chunks = (T + C - 1) / C;
  cpu::run_tasks(static_cast<size_t>(B * Hk), [&](size_t task) {
    const int64_t b = static_cast<int64_t>(task) / Hk, hk = static_cast<int64_t>(task) % Hk;
    std::vector<A> ckpt(static_cast<size_t>(std::max<int64_t>(chunks, 1) * head));
    std::vector<A> states(static_cast<size_t>((C + 1) * head)), D(static_cast<size_t>(head));
    for (int64_t r = 0; r < rep; ++r) {
      const int64_t h = hk * rep + r;
      auto kt = [&](int64_t t) { return k + ((b * T + t) * Hk + hk) * Dk; };
      auto vt = [&](int64_t t) { return v + ((b * T + t) * Hv + h) * Dv; };
      auto at = [&](int64_t t) { return (b * T + t) * Hv + h; };
      // The forward pass, keeping the state before every C-th step.
      A* work = states.data();
      std::copy(state + (b * Hv + h) * head, state + (b * Hv + h + 1) * head, work);
      for (int64_t t = 0; t < T; ++t) {
        if (t % C == 0) std::copy(work, work + head, ckpt.data() + (t / C) * head);
        step_state(work, kt(t), vt(t), g[at(t)], beta[at(t)], Dv, Dk);
      }
      std::copy(dstate + (b * Hv + h) * head, dstate + (b * Hv + h + 1) * head, D.data());
      for (int64_t c = chunks - 1; c >= 0; --c) {
        const int64_t t0 = c * C, t1 = std::min(t0 + C, T);
        std::copy(ckpt.data() + c * head, ckpt.data() + (c + 1) * head, states.data());
        for (int64_t t = t0; t < t1; ++t) {
          A* next = states.data() + (t - t0 + 1) * head;
          std::copy(next - head, next, next);
          step_state(next, kt(t), vt(t), g[at(t)], beta[at(t)], Dv, Dk);
        }
        for (int64_t t = t1 - 1; t >= t0; --t) {
          const A* P = states.data() + (t - t0) * head;     // the state before step t
          const A* S = P + head;                            // after it
          const A* kk = kt(t);
          const A* qq = q + ((b * T + t) * Hk + hk) * Dk;
          const A* vv = vt(t);
          const A* dyt = dy + at(t) * Dv;
          A* dqt = dq.data() + ((b * T + t) * Hk + hk) * Dk;
          A* dkt = dk.data() + ((b * T + t) * Hk + hk) * Dk;
          A* dvt = dv.data() + at(t) * Dv;
          const A gt = g[at(t)], bt = beta[at(t)];
          A dbeta_t = 0, dg_t = 0;
          for (int64_t i = 0; i < Dv; ++i) {
            A* d = D.data() + i * Dk;
            const A* p = P + i * Dk;
            const A* sn = S + i * Dk;
            const A dyi = dyt[i];
            for (int64_t j = 0; j < Dk; ++j) {
              d[j] += dyi * qq[j]; // y_t = S q: D += dy qᵀ, dq += Sᵀ dy
              dqt[j] += dyi * sn[j];
            }
            const auto rg = math::gated_delta_row_grad(gt, bt, vv[i], dot(p, kk, Dk), dot(d, kk, Dk), dot(d, p, Dk));
            dvt[i] = rg.du;
            dbeta_t += rg.dbeta;
            dg_t += rg.dg;
            for (int64_t j = 0; j < Dk; ++j) {
              dkt[j] += rg.delta * d[j] - rg.g_du * p[j];
              d[j] = math::gated_delta_row_back(d[j], gt, rg.du, kk[j]);
            }
          }
          dg[at(t)] = dg_t;
          dbeta[at(t)] = dbeta_t;
        }
      }
      std::copy(D.begin(), D.end(), ds0.begin() + (b * Hv + h) * head);
    }
  });
  const A* results[6] = {dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), ds0.data()};
  for (int i = 0; i < 6; ++i) {
    array& out = outputs[i];
    out.set_data(allocator::malloc(out.nbytes()));
    const Strides strides = row_strides(out.shape());
    cpu::copy_elements(results[i], acc, strides, out.raw_data(), out.dtype(), strides, out.shape());
  }
}

} // namespace

void GatedDeltaVjp::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  bool wide = false;
  for (const array& x : inputs) wide = wide || x.dtype() == float64;
  if (wide) {
    gated_delta_vjp_cpu<double>(inputs, outputs);
  } else {
    gated_delta_vjp_cpu<float>(inputs, outputs);
  }
}

void GatedDelta::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  bool wide = false;
  for (int i = 0; i < 6; ++i) wide = wide || inputs[i].dtype() == float64;
  if (wide) {
    gated_delta_cpu<double>(mode_, inputs, outputs);
  } else {
    gated_delta_cpu<float>(mode_, inputs, outputs);
  }
}

} // namespace nuvec
