// nuvec: CPU kernels of the attention primitives (src/fast/attention.h; ops, checks, fallbacks
// and rules in src/fast/attention.cpp).
//
// ScaledDotProductAttention: FlashAttention's online softmax (Dao et al. 2022) on the thread
// pool, never materialising the Lq × Lk scores. One task takes one (batch, key head, block of
// queries) with the queries of every query head sharing that key head (grouped-query
// attention reads each K/V block once for all of them): its R = group × rows query rows run
// over the keys they may see in blocks of kKeyBlock, keeping per row the running max m, the
// running sum l of exp(s − m) and the unnormalised output, rescaled by exp(m_old − m_new)
// whenever the max grows. Everything is float32 whatever the dtype.
//
// The task's arrays are stored transposed, row index fastest (qᵀ [D][R], the score tile
// sᵀ [keys][R], outᵀ [Dv][R]), so that both products vectorise over the rows with no
// transpose of K or V: sᵀ[j][·] = Σ_d k[j][d] · qᵀ[d][·] and outᵀ[e][·] += Σ_j v[j][e] · pᵀ[j][·]
// broadcast one K or V element against a vector of rows, kTileKeys accumulator vectors at a
// time (K and V are read in place for float32; half types are widened a block at a time).
// In a micro-benchmark the products ran at 40-50 GFLOP/s a core on this machine's AVX-512
// (no FMA: cpu::vectorized turns contraction off), where OpenBLAS's sgemm on 64 × 64 × 64
// tiles reached 15, so the tiles are not handed to BLAS.
//
// PagedWrite: a copy of the cache, then the value rows written at their slots.
// PagedAttention and ScaledDotProductAttentionVjp are never recorded on the CPU (the op runs
// the fallback there); their eval_cpu throws.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "backend/common/attention.h"
#include "backend/common/dispatch.h"
#include "backend/common/math/unary.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/thread_pool.h"
#include "core/errors.h"
#include "fast/attention.h"
#include "nuvec/utils.h"

namespace nuvec {

namespace {

using attention::Geometry;

/// Keys per block of the loop: a block of V (32 KB of float32 at Dv 128) stays in L1 while
/// the value tiles sweep it once per vector of rows and group of columns, and the score tile
/// (kKeyBlock × R floats) with it. (128 measured no faster on this machine's prefill.)
constexpr int64_t kKeyBlock = 64;
/// Query rows (query heads × queries) a task aims for: enough to amortise each K/V block's
/// loads and conversion over many rows, few enough that qᵀ and outᵀ stay in L1/L2.
constexpr int64_t kRowTarget = 64;
/// Keys (or value columns) of one register tile of the products: kTileKeys accumulator
/// vectors of one vector of rows each, plus the broadcasts, fit the 16 registers of AVX2.
constexpr int kTileKeys = 8;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// The inputs and outputs of one call as the tasks read them.
template <typename T>
struct Operands {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const void* mask = nullptr; // bool or T, [B, Hq, Lq, Lk] through g.mask_stride
  const float* sinks = nullptr; // [Hq] widened, or null
  float lowest = 0.0f; // the fallback's value for hidden scores (the dtype's lowest)
  T* out = nullptr;    // [B, Hq, Lq, Dv] row-contiguous
  float* lse = nullptr; // [B, Hq, Lq]
};

/// One thread's scratch, kept between tasks (thread_local) so tasks allocate nothing.
struct Scratch {
  std::vector<float> qt, st, ot, kf, vf, vmean, m, l, alpha, shift;
  std::vector<int64_t> first, end, cnt, moff;
};

/// W floats as one vector register (GCC's vector extension): the products' accumulators.
/// Written with explicit vectors because GCC's loop vectoriser, given float[NB][W] arrays
/// whose W is not the target's width, packed them with permutes (8 rows on AVX-512 ran at
/// 2 GFLOP/s). Each lane is one query row's own sequential sum, so every width gives the same
/// bits.
template <int W>
struct Lanes {
  typedef float type __attribute__((vector_size(W * sizeof(float)), aligned(alignof(float))));
};

// Loads and stores through references: a vector passed or returned by value would change
// the calling convention between the versions (GCC's -Wpsabi).
template <int W>
inline void load_lanes(typename Lanes<W>::type& v, const float* p) {
  __builtin_memcpy(&v, p, sizeof(v));
}

template <int W>
inline void store_lanes(float* p, const typename Lanes<W>::type& v) {
  __builtin_memcpy(p, &v, sizeof(v));
}

/// sᵀ[j][r] = Σ_x kb[j][x] · qt[x][r] for keys [j0, j0 + NB) and rows [r0, r0 + W): NB
/// accumulator vectors held in registers across the whole D loop, each K element broadcast.
template <int W, int NB>
inline void score_tile(const float* kb, int64_t kld, int64_t j0, int64_t d, const float* qt, int64_t rp, int64_t r0,
                       float* st) {
  typename Lanes<W>::type acc[NB] = {};
  for (int64_t x = 0; x < d; ++x) {
    typename Lanes<W>::type qv;
    load_lanes<W>(qv, qt + x * rp + r0);
    for (int jj = 0; jj < NB; ++jj) acc[jj] += kb[(j0 + jj) * kld + x] * qv;
  }
  for (int jj = 0; jj < NB; ++jj) store_lanes<W>(st + (j0 + jj) * rp + r0, acc[jj]);
}

/// The score tile sᵀ [nk][rp] of nk keys (rows of kb, kld floats apart) against qᵀ [d][rp].
template <int W>
inline void scores(const float* kb, int64_t kld, int64_t nk, int64_t d, const float* qt, int64_t rp, float* st) {
  for (int64_t r0 = 0; r0 < rp; r0 += W) {
    int64_t j = 0;
    for (; j + kTileKeys <= nk; j += kTileKeys) score_tile<W, kTileKeys>(kb, kld, j, d, qt, rp, r0, st);
    for (; j < nk; ++j) score_tile<W, 1>(kb, kld, j, d, qt, rp, r0, st);
  }
}

/// outᵀ[e][r] = alpha[r] · outᵀ[e][r] + Σ_j vb[j][e] · pᵀ[j][r] for columns [e0, e0 + NB) and
/// rows [r0, r0 + W): the rescale of the online softmax folded into the tile's load.
template <int W, int NB>
inline void value_tile(const float* vb, int64_t vld, int64_t nk, int64_t e0, const float* pt, int64_t rp, int64_t r0,
                       const float* alpha, float* ot) {
  typename Lanes<W>::type a, p, acc[NB];
  load_lanes<W>(a, alpha + r0);
  for (int ee = 0; ee < NB; ++ee) {
    load_lanes<W>(acc[ee], ot + (e0 + ee) * rp + r0);
    acc[ee] *= a;
  }
  for (int64_t j = 0; j < nk; ++j) {
    load_lanes<W>(p, pt + j * rp + r0);
    for (int ee = 0; ee < NB; ++ee) acc[ee] += vb[j * vld + e0 + ee] * p;
  }
  for (int ee = 0; ee < NB; ++ee) store_lanes<W>(ot + (e0 + ee) * rp + r0, acc[ee]);
}

/// outᵀ [dv][rp] rescaled by alpha and accumulated with pᵀ [nk][rp] times the nk value rows.
template <int W>
inline void values(const float* vb, int64_t vld, int64_t nk, int64_t dv, const float* pt, int64_t rp,
                   const float* alpha, float* ot) {
  for (int64_t r0 = 0; r0 < rp; r0 += W) {
    int64_t e = 0;
    for (; e + kTileKeys <= dv; e += kTileKeys) value_tile<W, kTileKeys>(vb, vld, nk, e, pt, rp, r0, alpha, ot);
    for (; e < dv; ++e) value_tile<W, 1>(vb, vld, nk, e, pt, rp, r0, alpha, ot);
  }
}

/// Partials of dot: 16 floats fill one AVX-512 register, two AVX2 or four SSE2 ones.
constexpr int kDotLanes = 16;
/// Tasks of at most this many rows run the dot-product loops: vectors of rows would be mostly
/// padding (a decode step of one query per head and a few heads per key head), and along D
/// one K row's loads serve each row without broadcasts (the row-vector loops cost a
/// broadcast, a multiply and an add per key and element whatever the rows).
constexpr int64_t kDotRows = 8;

/// Σ_x a[x] · b[x] over x in [0, n): element x into partial x % kDotLanes, the partials then
/// added pairwise in a fixed tree (rows.h's reduce_lanes order, in float), so every vector
/// version gives the same bits.
inline float dot(const float* a, const float* b, int64_t n) {
  float p[kDotLanes] = {};
  int64_t x = 0;
  for (; x + kDotLanes <= n; x += kDotLanes) {
    for (int k = 0; k < kDotLanes; ++k) p[k] += a[x + k] * b[x + k];
  }
  for (int k = 0; x < n; ++x, ++k) p[k] += a[x] * b[x];
  for (int w = kDotLanes / 2; w > 0; w /= 2) {
    for (int k = 0; k < w; ++k) p[k] += p[k + w];
  }
  return p[0];
}

/// The decode-shaped tasks' score tile (at most kDotRows rows, too few to fill a vector of
/// rows): sᵀ[j][r] = q_r · k_j as dot products along D, K and the queries read row-major.
inline void scores_dot(const float* kb, int64_t kld, int64_t nk, int64_t d, const float* q, int64_t rows, float* st) {
  for (int64_t j = 0; j < nk; ++j) {
    for (int64_t r = 0; r < rows; ++r) st[j * rows + r] = dot(q + r * d, kb + j * kld, d);
  }
}

/// out[r][e0, e0 + NB · W) = alpha[r] · out[r][·] + Σ_j pᵀ[j][r] · vb[j][·]: NB vectors of
/// value columns in registers across the block's keys.
template <int W, int NB>
inline void value_row_tile(const float* vb, int64_t vld, int64_t nk, int64_t e0, const float* pt, int64_t rows,
                           int64_t r, float alpha, float* o) {
  typename Lanes<W>::type acc[NB], v;
  for (int n = 0; n < NB; ++n) {
    load_lanes<W>(acc[n], o + e0 + n * W);
    acc[n] *= alpha;
  }
  for (int64_t j = 0; j < nk; ++j) {
    const float p = pt[j * rows + r];
    for (int n = 0; n < NB; ++n) {
      load_lanes<W>(v, vb + j * vld + e0 + n * W);
      acc[n] += p * v;
    }
  }
  for (int n = 0; n < NB; ++n) store_lanes<W>(o + e0 + n * W, acc[n]);
}

/// The decode-shaped tasks' value update: out [rows][dv] (row-major) rescaled by alpha and
/// accumulated with pᵀ [nk][rows] times the nk value rows, vectorised along Dv (columns past
/// the last whole vector one at a time, the same sums in the same order).
template <int W>
inline void values_rows(const float* vb, int64_t vld, int64_t nk, int64_t dv, const float* pt, int64_t rows,
                        const float* alpha, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * dv;
    int64_t e = 0;
    for (; e + kTileKeys * W <= dv; e += kTileKeys * W) {
      value_row_tile<W, kTileKeys>(vb, vld, nk, e, pt, rows, r, alpha[r], o);
    }
    for (; e + W <= dv; e += W) value_row_tile<W, 1>(vb, vld, nk, e, pt, rows, r, alpha[r], o);
    for (; e < dv; ++e) {
      float acc = o[e] * alpha[r];
      for (int64_t j = 0; j < nk; ++j) acc += pt[j * rows + r] * vb[j * vld + e];
      o[e] = acc;
    }
  }
}

/// nk rows of n elements (rows `ld` elements apart) as float32 rows of n: src itself for
/// float32, else widened into buf.
template <typename T>
inline const float* float_rows(
    const T* src, int64_t ld, int64_t nk, int64_t n, std::vector<float>& buf, int64_t& out_ld) {
  if constexpr (std::is_same_v<T, float>) {
    out_ld = ld;
    return src;
  } else {
    buf.resize(static_cast<size_t>(nk * n));
    for (int64_t j = 0; j < nk; ++j) {
      const T* s = src + j * ld;
      float* d = buf.data() + j * n;
      for (int64_t x = 0; x < n; ++x) d[x] = static_cast<float>(s[x]);
    }
    out_ld = n;
    return buf.data();
  }
}

/// Hides the keys [j0, j0 + nk) that rows [0, rt) may not see (outside the row's causal range,
/// or false in a bool mask) by setting their scores to −inf, adds an additive mask, and counts
/// each row's visible keys. Only for blocks that need it (the others add nk to every count).
template <typename T>
void mask_block(const Geometry& g, const Operands<T>& op, int64_t j0, int64_t nk, int64_t rt, int64_t rp, bool causal,
                Scratch& s) {
  float* st = s.st.data();
  const bool* bm = g.has_mask && g.bool_mask ? static_cast<const bool*>(op.mask) : nullptr;
  const T* am = g.has_mask && !g.bool_mask ? static_cast<const T*>(op.mask) : nullptr;
  const int64_t ms = g.mask_stride[3];
  for (int64_t r = 0; r < rt; ++r) {
    int64_t lo = 0, hi = nk; // the block's keys this row's causal range keeps
    if (causal) {
      lo = std::clamp<int64_t>(s.first[r] - j0, 0, nk);
      hi = std::clamp<int64_t>(s.end[r] - j0, lo, nk);
    }
    for (int64_t j = 0; j < lo; ++j) st[j * rp + r] = kNegInf;
    for (int64_t j = hi; j < nk; ++j) st[j * rp + r] = kNegInf;
    int64_t seen = hi - lo;
    if (bm) {
      const bool* mrow = bm + s.moff[r] + j0 * ms;
      for (int64_t j = lo; j < hi; ++j) {
        if (!mrow[j * ms]) {
          st[j * rp + r] = kNegInf;
          --seen;
        }
      }
    } else if (am) {
      const T* mrow = am + s.moff[r] + j0 * ms;
      for (int64_t j = lo; j < hi; ++j) st[j * rp + r] += static_cast<float>(mrow[j * ms]);
    }
    s.cnt[r] += seen;
  }
}

/// One task: batch b, key head kvh, queries [q0, q0 + rq) of each of the key head's query
/// heads. Row r of the task is query q0 + r % rq of query head kvh · group + r / rq. The
/// products either vectorise over the rows (rows [rt, rp) pad them to a multiple of the
/// vector width W: zero queries, never written out; q and out stored transposed) or, for
/// Dot (decode-shaped tasks of a few rows), along D and Dv (rp = rt; q and out row-major).
template <typename T, int W, bool Dot>
void attend(const Geometry& g, const Operands<T>& op, int64_t b, int64_t kvh, int64_t q0, int64_t rq, Scratch& s) {
  const int64_t group = g.group(), d = g.d, dv = g.dv, lk = g.lk;
  const int64_t rt = group * rq, rp = Dot ? rt : (rt + W - 1) / W * W;
  const auto head = [&](int64_t r) { return kvh * group + r / rq; };
  const auto query = [&](int64_t r) { return q0 + r % rq; };

  s.qt.assign(static_cast<size_t>(d * rp), 0.0f);
  s.ot.assign(static_cast<size_t>(dv * rp), 0.0f);
  s.st.resize(static_cast<size_t>(kKeyBlock * rp));
  for (auto* v : {&s.m, &s.l, &s.alpha, &s.shift}) v->resize(static_cast<size_t>(rp));
  for (auto* v : {&s.first, &s.end, &s.cnt, &s.moff}) v->assign(static_cast<size_t>(rp), 0);

  // q (qᵀ unless Dot), pre-scaled; the row state (a sink starts each row as a logit of weight exp(0) = 1
  // at m = sink); each row's causal range and the task's union and intersection of them.
  int64_t jlo = lk, jhi = 0, all_lo = 0, all_hi = lk;
  for (int64_t r = 0; r < rp; ++r) {
    const bool real = r < rt;
    s.m[r] = real && op.sinks ? op.sinks[head(r)] : kNegInf;
    s.l[r] = real && op.sinks ? 1.0f : 0.0f;
    if (!real) continue;
    const int64_t h = head(r), i = query(r);
    const T* qrow = op.q + b * g.q_stride[0] + h * g.q_stride[1] + i * g.q_stride[2];
    for (int64_t x = 0; x < d; ++x) s.qt[Dot ? r * d + x : x * rp + r] = g.scale * static_cast<float>(qrow[x]);
    g.key_range(i, s.first[r], s.end[r]);
    if (s.first[r] < s.end[r]) {
      jlo = std::min(jlo, s.first[r]);
      jhi = std::max(jhi, s.end[r]);
    }
    all_lo = std::max(all_lo, s.first[r]);
    all_hi = std::min(all_hi, s.end[r]);
    s.moff[r] = b * g.mask_stride[0] + h * g.mask_stride[1] + i * g.mask_stride[2];
  }

  const T* kbase = op.k + b * g.k_stride[0] + kvh * g.k_stride[1];
  const T* vbase = op.v + b * g.v_stride[0] + kvh * g.v_stride[1];
  float* st = s.st.data();
  for (int64_t j0 = jlo; j0 < jhi; j0 += kKeyBlock) {
    const int64_t nk = std::min(kKeyBlock, jhi - j0);
    int64_t kld = 0, vld = 0;
    const float* kb = float_rows(kbase + j0 * g.k_stride[2], g.k_stride[2], nk, d, s.kf, kld);
    const float* vb = float_rows(vbase + j0 * g.v_stride[2], g.v_stride[2], nk, dv, s.vf, vld);
    if constexpr (Dot) scores_dot(kb, kld, nk, d, s.qt.data(), rp, st);
    else scores<W>(kb, kld, nk, d, s.qt.data(), rp, st);
    const bool cut = g.causal && (j0 < all_lo || j0 + nk > all_hi);
    if (cut || g.has_mask) {
      mask_block(g, op, j0, nk, rt, rp, cut, s);
    } else {
      for (int64_t r = 0; r < rt; ++r) s.cnt[r] += nk;
    }
    // The online softmax: the block's max per row, the new max, the factor exp(m_old − m_new)
    // for what was accumulated (0 when nothing was: m_old = −inf), then pᵀ = exp(sᵀ − m_new)
    // in place (exactly 0 for hidden keys) and its sum. A row whose max is still −inf (all
    // hidden, or an additive −inf) shifts by 0 so no −inf − −inf makes a NaN.
    float* m = s.m.data();
    float* l = s.l.data();
    float* alpha = s.alpha.data();
    float* shift = s.shift.data();
    for (int64_t r = 0; r < rp; ++r) shift[r] = kNegInf;
    for (int64_t j = 0; j < nk; ++j) {
      const float* sj = st + j * rp;
      for (int64_t r = 0; r < rp; ++r) shift[r] = sj[r] > shift[r] ? sj[r] : shift[r];
    }
    for (int64_t r = 0; r < rp; ++r) {
      const float mn = shift[r] > m[r] ? shift[r] : m[r];
      const float sh = mn == kNegInf ? 0.0f : mn;
      alpha[r] = m[r] == kNegInf ? 0.0f : math::Exp{}(m[r] - sh);
      m[r] = mn;
      shift[r] = sh;
      l[r] *= alpha[r];
    }
    for (int64_t j = 0; j < nk; ++j) {
      float* sj = st + j * rp;
      for (int64_t r = 0; r < rp; ++r) {
        const float p = sj[r] == kNegInf ? 0.0f : math::Exp{}(sj[r] - shift[r]);
        sj[r] = p;
        l[r] += p;
      }
    }
    if constexpr (Dot) values_rows<W>(vb, vld, nk, dv, st, rp, alpha, s.ot.data());
    else values<W>(vb, vld, nk, dv, st, rp, alpha, s.ot.data());
  }

  // The rows out. A row that saw no key gets the fallback's value (backend/common/attention.h):
  // the mean of all Lk values and lse = lowest + log Lk without sinks, 0 and the sink with.
  bool need_mean = !op.sinks;
  if (need_mean) {
    need_mean = false;
    for (int64_t r = 0; r < rt; ++r) need_mean = need_mean || s.cnt[r] == 0;
  }
  if (need_mean) {
    s.vmean.assign(static_cast<size_t>(dv), 0.0f);
    for (int64_t j = 0; j < lk; ++j) {
      const T* vr = vbase + j * g.v_stride[2];
      for (int64_t e = 0; e < dv; ++e) s.vmean[e] += static_cast<float>(vr[e]);
    }
    for (auto& x : s.vmean) x /= static_cast<float>(lk);
  }
  for (int64_t r = 0; r < rt; ++r) {
    const int64_t h = head(r), i = query(r);
    const int64_t row = (b * g.hq + h) * g.lq + i;
    T* o = op.out + row * dv;
    if (s.cnt[r] == 0) {
      if (op.sinks) {
        for (int64_t e = 0; e < dv; ++e) o[e] = static_cast<T>(0.0f);
        op.lse[row] = op.sinks[h];
      } else {
        for (int64_t e = 0; e < dv; ++e) o[e] = static_cast<T>(lk > 0 ? s.vmean[e] : 0.0f);
        op.lse[row] = op.lowest + std::log(static_cast<float>(lk));
      }
      continue;
    }
    if (s.m[r] == kNegInf) { // every visible score −inf (an additive mask), no sink: the softmax's NaN
      for (int64_t e = 0; e < dv; ++e) o[e] = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
      op.lse[row] = kNegInf;
      continue;
    }
    const float inv = 1.0f / s.l[r];
    for (int64_t e = 0; e < dv; ++e) o[e] = static_cast<T>(s.ot[Dot ? r * dv + e : e * rp + r] * inv);
    op.lse[row] = s.m[r] + std::log(s.l[r]);
  }
}

/// Query rows per task: kRowTarget rows over the group's heads, halved while the tasks would
/// not give every thread a few (keeping at least 16 rows a task, one AVX-512 vector, so each
/// broadcast K or V element still serves a full vector).
int64_t rows_per_task(const Geometry& g) {
  const int64_t group = g.group();
  int64_t rq = std::max<int64_t>(1, std::min(g.lq, (kRowTarget + group - 1) / group));
  const int64_t want = 4 * static_cast<int64_t>(cpu::num_threads());
  while (rq > 1 && rq * group > 16 && g.b * g.hkv * ((g.lq + rq - 1) / rq) < want) rq = (rq + 1) / 2;
  return rq;
}

template <typename T, int W, bool Dot>
void run_attention(const Geometry& g, const Operands<T>& op, int64_t rq) {
  const int64_t qblocks = (g.lq + rq - 1) / rq;
  const int64_t tasks = g.b * g.hkv * qblocks;
  cpu::run_tasks(static_cast<size_t>(tasks), [&](size_t t) {
    thread_local Scratch s;
    const int64_t qb = static_cast<int64_t>(t) % qblocks;
    const int64_t bh = static_cast<int64_t>(t) / qblocks;
    const int64_t q0 = qb * rq;
    cpu::vectorized([&] { attend<T, W, Dot>(g, op, bh / g.hkv, bh % g.hkv, q0, std::min(rq, g.lq - q0), s); });
  });
}

} // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  std::vector<array> in = inputs;
  for (int i = 0; i < 3; ++i) {
    if (in[i].ndim() > 0 && in[i].shape(-1) > 1 && in[i].strides().back() != 1) in[i] = cpu::as_row_contiguous(in[i]);
  }
  const Dtype dt = in[0].dtype();
  if (dt != float32 && dt != float16 && dt != bfloat16) {
    throw_invalid_argument(
        "scaled_dot_product_attention", "the CPU kernel takes float32, float16 or bfloat16; got ", dt,
        " (float64 runs the composed graph).");
  }
  const Geometry g = fast::attention_geometry(in, params());
  if (g.has_mask && !g.bool_mask && in[3].dtype() != dt) {
    throw_invalid_argument(
        "scaled_dot_product_attention", "an additive mask must have the attention's dtype ", dt, "; got ",
        in[3].dtype(), ".");
  }
  array& out = outputs[0];
  array& lse = outputs[1];
  out.set_data(allocator::malloc(out.nbytes()));
  lse.set_data(allocator::malloc(lse.nbytes()));
  std::vector<float> sinks;
  if (g.has_sinks) {
    const array sk = cpu::contiguous_copy(in.back(), float32);
    sinks.assign(sk.data<float>(), sk.data<float>() + sk.size());
  }
  dispatch_float_types(dt, "scaled_dot_product_attention", [&]<typename T>() {
    if constexpr (std::is_same_v<T, double>) {
      throw std::logic_error("scaled_dot_product_attention: float64 never reaches the CPU kernel");
    } else {
      Operands<T> op;
      op.q = static_cast<const T*>(in[0].raw_data());
      op.k = static_cast<const T*>(in[1].raw_data());
      op.v = static_cast<const T*>(in[2].raw_data());
      op.mask = g.has_mask ? in[3].raw_data() : nullptr;
      op.sinks = g.has_sinks ? sinks.data() : nullptr;
      op.lowest = static_cast<float>(finfo(dt).min);
      op.out = static_cast<T*>(out.raw_data());
      op.lse = static_cast<float*>(lse.raw_data());
      // The vector width W is the CPU's (cpu::vectorized runs its version). Tasks of at
      // most kDotRows rows (decode) take the dot-product loops whatever the CPU, so every
      // version computes the same sums.
      const int64_t rq = rows_per_task(g);
      const bool dot = rq * g.group() <= kDotRows;
      switch (cpu::active_isa()) {
        case cpu::Isa::avx512:
          dot ? run_attention<T, 16, true>(g, op, rq) : run_attention<T, 16, false>(g, op, rq);
          break;
        case cpu::Isa::avx2:
          dot ? run_attention<T, 8, true>(g, op, rq) : run_attention<T, 8, false>(g, op, rq);
          break;
        case cpu::Isa::baseline:
          dot ? run_attention<T, 4, true>(g, op, rq) : run_attention<T, 4, false>(g, op, rq);
          break;
      }
    }
  });
}

void ScaledDotProductAttentionVjp::eval_cpu(const std::vector<array>&, std::vector<array>&) {
  throw std::logic_error(
      "scaled_dot_product_attention: no CPU backward kernel; the vjp runs the fallback's graph on the CPU");
}

void PagedAttention::eval_cpu(const std::vector<array>&, std::vector<array>&) {
  throw std::logic_error("paged_attention: no CPU kernel; the op runs its fallback on the CPU");
}

void PagedWrite::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  if (inputs[1].dtype() != out.dtype()) {
    throw_invalid_argument(
        "paged_write", "values must have the cache's dtype ", out.dtype(), "; got ", inputs[1].dtype(), ".");
  }
  // The cache, row-contiguous: its own buffer when nothing else refers to it (a pool the
  // caller replaces with the result each step), else a copy.
  if (!cpu::donate(inputs[0], out)) cpu::copy_strided(inputs[0], out);
  const array values = cpu::as_row_contiguous(inputs[1]);
  const array slots = cpu::contiguous_copy(inputs[2], int32);
  const int64_t blocks = out.shape(0), hkv = out.shape(1), bs = out.shape(2), d = out.shape(3);
  const size_t row_bytes = static_cast<size_t>(d) * size_of(out.dtype());
  const int32_t* sp = slots.data<int32_t>();
  const char* src = static_cast<const char*>(values.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  // In order, so a repeated slot keeps its last row (the op's rule, as the CUDA kernels).
  for (int64_t n = 0; n < static_cast<int64_t>(slots.size()); ++n) {
    const int64_t slot = sp[n];
    if (slot < 0 || slot >= blocks * bs) continue;
    const int64_t blk = slot / bs, off = slot % bs;
    for (int64_t h = 0; h < hkv; ++h) {
      std::memcpy(dst + ((blk * hkv + h) * bs + off) * row_bytes, src + (n * hkv + h) * row_bytes, row_bytes);
    }
  }
}

} // namespace nuvec
