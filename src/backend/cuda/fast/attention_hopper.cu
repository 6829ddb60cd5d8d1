// nuvec: the flash-attention forward of ScaledDotProductAttention for Hopper (sm_90a), and
// PagedAttention's prefill on the same kernel (K and V through the block tables, plus
// uniform_rows_kernel for rows that see nothing): warp-specialised, with TMA copies and wgmma
// on both products (FlashAttention-3's forward, Shah et al. 2024: one producer and two
// consumer warpgroups). Meaning:
// src/fast/attention.h; geometry: src/backend/common/attention.h; the instructions:
// device/wgmma.cuh (products, the 128-byte-swizzled tile layout) and device/tma.cuh (copies,
// barriers, register reallocation).
//
// A block of 3 warpgroups per (128 query rows, batch row, query head):
//  - warpgroup 0, the producer, gives up registers (setmaxnreg 40) and one thread issues the
//    TMA copies: the 128 x D query tile once, then for each key tile the K tile and the V
//    tile (kBc x D each) into a ring of kStages stages, each stage's copy waiting until the
//    consumers released the stage ("empty" barrier) and completing on its "full" barrier;
//  - warpgroups 1 and 2, the consumers (setmaxnreg 232), own 64 query rows each. For each
//    key tile: S = Q Kᵀ (wgmma, both operands in shared memory; 64 x kBc float32 in
//    registers), the K stage released; scores scaled to log2 units, hidden keys −inf (only in
//    tiles some row of the warpgroup sees in part); the online softmax in registers (running
//    max m and sum l per row, over the row's 4 lanes); O = O · 2^(m_old − m_new) + P V (P
//    rounded to the dtype and packed in registers as the A operand, V from shared memory,
//    MN-major), the V stage released.
// The copies of later stages run while the consumers compute. The key loop has two schedules
// (HopperConsumer): the plain one above, each product waited for at once; and, by default,
// FlashAttention-3's: S of tile i and P V of tile i − 1 issued together and the softmax of
// tile i run while P V computes, with the two consumer warpgroups taking turns to issue
// (ping-pong on named barriers) so that one's products overlap the other's softmax.
// NUVEC_ATTENTION_HOPPER_PIPELINE=0 selects the plain one (read at each call).
// Epilogue: the sink joins (m, l), O / l goes through the warpgroup's rows of the query tile
// in shared memory to 16-byte coalesced stores, and lse = (m + log2 l) · ln 2.
// Tiles no query row of the block sees (causal: after the last row's last key; window:
// before the first row's first key) are never copied. Rows past Lq and keys past Lk arrive
// as zeros (the TMA's bounds) and are not written / are hidden.
//
// Coverage (attention_hopper_covers): float16 and bfloat16, D == Dv in {64, 128, 256}, no
// array mask, and every query row sees at least one key (not causal, or causal with Lq <= Lk)
// so that the no-visible-key rule never applies; causal, windows, sinks and GQA are in. The
// planner routes other calls to the mma.sync kernel (attention_tiled.cu), and the launcher
// does too for strides the TMA cannot step, unaligned buffers, tensor maps the driver refuses
// and builds without sm_90a code.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "backend/cuda/device/mma.cuh"
#include "backend/cuda/device/online_softmax.cuh"
#include "backend/cuda/device/tma.cuh"
#include "backend/cuda/device/wgmma.cuh"
#include "backend/cuda/fast/attention.h"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/wgmma_usable.h"
#include "core/env_switch.h"
#include "fast/attention_plan.h"

namespace nuvec::cu {

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kHopperThreads = 384;  // a producer and two consumer warpgroups
constexpr int kConsumerWarps = 8;    // the arrivals an "empty" barrier waits for
constexpr int kProducerRegs = 40;    // setmaxnreg targets (see the static_assert)
constexpr int kConsumerRegs = 232;
// setmaxnreg.inc waits until the block's pool holds the registers it asks for, and the pool is
// what the block got at launch (65536 / 384 = 170, allocated in multiples of 8: 168 a thread)
// plus what .dec returns: a larger total would stall every block for ever.
constexpr int kLaunchRegs = (65536 / kHopperThreads) / 8 * 8;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= kHopperThreads * kLaunchRegs,
              "the warpgroups' register counts exceed the block's launch allocation");

/// What one launch reads: the three tensor maps (q [B, Hq, Lq, D], k and v [B, Hkv, Lk, D],
/// each as a 4-d tensor D, L, H, B with a box of 64 columns x the tile's rows), the call's
/// buffers and geometry, the query tiles per (b, h), the first block of this launch and the
/// score scale in log2 units.
struct HopperArgs {
  CUtensorMap q_map;
  CUtensorMap k_map;
  CUtensorMap v_map;
  AttentionBuffers buf;
  attention::Geometry g;
  int64_t q_tiles = 0;
  int64_t block0 = 0;
  float scale_log2 = 0.0f;
  bool pipelined = true; // HopperConsumer::run_pipelined, else run_plain
  // The paged kernels (kPaged): k_map and v_map are the caches [blocks, Hkv, block_size, D] in
  // boxes of box_rows positions, tables [B, max_blocks] and lengths [B] name each sequence's
  // positions, g.lk is the capacity max_blocks · block_size and g.lq the queries L.
  const int32_t* tables = nullptr;
  const int32_t* lengths = nullptr;
  int max_blocks = 0, cache_blocks = 0, bs_log2 = 0, box_rows = 0;
};

/// The keys query i sees, [first, end): the geometry's (key_range) or, paged, the positions
/// before its end len − Lq + 1 + i (len the sequence's clamped length; PagedAttention's rule,
/// which is causal over len keys). A query whose end is <= 0 sees nothing here; the paged
/// launcher's uniform_rows_kernel then writes its row.
template <bool kPaged>
__device__ __forceinline__ void seen_keys(const attention::Geometry& g, int64_t len, int64_t i, int64_t& first,
                                          int64_t& end) {
  if constexpr (kPaged) {
    const int64_t e = len - g.lq + 1 + i;
    first = 0;
    end = e < 0 ? 0 : (e > len ? len : e);
  } else {
    g.key_range(i, first, end);
  }
}

/// The compile-time shape of one kernel: head size D (= Dv), kBc keys a tile, kStages K and
/// V stages, and the shared-memory layout from the 1024-aligned base: the query tile
/// (128 x D), kStages K tiles, kStages V tiles (each in the 128-byte-swizzled layout, D / 64
/// panels), then the barriers: q_full, k_full[kStages], k_empty[kStages], v_full[kStages],
/// v_empty[kStages].
template <int D_, int kBc_, int kStages_>
struct HopperShape {
  static constexpr int D = D_, kBc = kBc_, kStages = kStages_;
  static constexpr int kBr = 128;                 // two consumer warpgroups of 64 rows
  static constexpr int kPanels = D / 64;          // 64-column panels (one TMA box each)
  static constexpr int kON = D == 64 ? 64 : 128;  // O columns one P V wgmma produces
  static constexpr int kOChunks = D / kON;
  static constexpr uint32_t q_bytes = kBr * D * 2, kv_bytes = kBc * D * 2;
  static constexpr uint32_t q = 0, k = q_bytes, v = k + kStages * kv_bytes, bars = v + kStages * kv_bytes;
  static constexpr uint32_t end = bars + (1 + 4 * kStages) * 8;
  static constexpr size_t bytes = end + 1024; // room to align the base up to 1024
  static_assert(D % 64 == 0 && (kBc == 64 || kBc == 128), "64-column panels, wgmma N of 64 or 128");
};

/// The shared-memory addresses of a kernel's mbarriers (HopperShape's layout): q_full, then
/// k_full, k_empty, v_full, v_empty, kStages each.
template <int kStages>
struct StageBarriers {
  uint32_t q_full = 0;
  __device__ __forceinline__ uint32_t k_full(int s) const { return q_full + 8u * (1 + s); }
  __device__ __forceinline__ uint32_t k_empty(int s) const { return q_full + 8u * (1 + kStages + s); }
  __device__ __forceinline__ uint32_t v_full(int s) const { return q_full + 8u * (1 + 2 * kStages + s); }
  __device__ __forceinline__ uint32_t v_empty(int s) const { return q_full + 8u * (1 + 3 * kStages + s); }
};

#if defined(NUVEC_WGMMA_AVAILABLE)
/// The 128-thread barrier of consumer warpgroup c (0 or 1: named barriers 1 and 2).
__device__ __forceinline__ void consumer_bar_sync(int c) {
  if (c == 0) bar_sync<1, 128>();
  else bar_sync<2, 128>();
}
#endif

#if defined(NUVEC_WGMMA_AVAILABLE)
/// One consumer warpgroup's part of the kernel: its 64 query rows' running state (O in the
/// wgmma accumulator layout, per row m and l: this thread holds rows my_row and my_row + 8),
/// the two products, the softmax of one key tile, and the two schedules of the key loop.
/// Element sc[4j + 2hf + e] of a score tile is row my_row + 8hf, key n0 + 8j + 2tq + e;
/// o[ch][4j + 2hf + e] is row my_row + 8hf, column ch · kON + 8j + 2tq + e.
template <typename T, typename S, bool kPaged>
struct HopperConsumer {
  static constexpr int D = S::D, kBc = S::kBc, kBr = S::kBr, kStages = S::kStages, kON = S::kON;
  const HopperArgs* a;
  uint32_t sb = 0, q_rows = 0;
  int c = 0, lane = 0, tq = 0, my_row = 0;
  int64_t len = 0;          // paged: the sequence's length
  int64_t wfl = 0, we0 = 0; // key tiles inside [wfl, we0) are seen whole by every row
  float o[S::kOChunks][kON / 2];
  float m[2], l[2];

  __device__ __forceinline__ void init(const HopperArgs& args, uint32_t smem, int consumer, int ln, int row,
                                       int64_t seq_len, int64_t first_last, int64_t end_first) {
    a = &args;
    len = seq_len;
    sb = smem;
    c = consumer;
    lane = ln;
    tq = ln % 4;
    my_row = row;
    wfl = first_last;
    we0 = end_first;
    q_rows = sb + S::q + c * 64 * 128; // the warpgroup's rows of panel 0
#pragma unroll
    for (int ch = 0; ch < S::kOChunks; ++ch) {
#pragma unroll
      for (int i = 0; i < kON / 2; ++i) o[ch][i] = 0.0f;
    }
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.0f;
  }

  __device__ __forceinline__ uint32_t k_tile(int s) const { return sb + S::k + s * S::kv_bytes; }
  __device__ __forceinline__ uint32_t v_tile(int s) const { return sb + S::v + s * S::kv_bytes; }

  /// Issues S = Q Kᵀ of the K tile at sk (A the warpgroup's query rows, B the key rows, both
  /// K-major) as one committed group. sc must not be touched until the group is waited for.
  __device__ __forceinline__ void issue_s(float (&sc)[kBc / 2], uint32_t sk) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t qo = (kk / 4) * kBr * 128 + (kk % 4) * 32, ko = (kk / 4) * kBc * 128 + (kk % 4) * 32;
      Wgmma<kBc>::template ss<T, 0, 0>(sc, sw128_desc(q_rows + qo, 16, 1024), sw128_desc(sk + ko, 16, 1024), kk > 0);
    }
    wgmma_commit();
  }

  /// Issues O += P V of the V tile at sv (B MN-major: rows = keys = K, columns = head dims =
  /// N; chunk ch of kON columns starts at panel ch · kON / 64) as one committed group. o and
  /// pa must not be touched until the group is waited for.
  __device__ __forceinline__ void issue_pv(uint32_t (&pa)[kBc / 16][4], uint32_t sv) {
#pragma unroll
    for (int ch = 0; ch < S::kOChunks; ++ch) fence_regs(o[ch]);
    fence_regs(pa);
    wgmma_fence();
#pragma unroll
    for (int ch = 0; ch < S::kOChunks; ++ch) {
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        Wgmma<kON>::template rs<T, 1>(o[ch], pa[kk], sw128_desc(sv + ch * (kON / 64) * kBc * 128 + kk * 2048, kBc * 128, 1024), 1);
      }
    }
    wgmma_commit();
  }

  /// After a wait that completed the P V group: its registers are the program's again.
  __device__ __forceinline__ void pv_done(uint32_t (&pa)[kBc / 16][4]) {
#pragma unroll
    for (int ch = 0; ch < S::kOChunks; ++ch) fence_regs(o[ch]);
    fence_regs(pa);
  }

  /// The scores of the key tile at n0 in log2 units (hidden keys −inf where some row sees
  /// part of the tile), merged into (m, l): sc becomes P = 2^(x − m_new) and alpha[hf] the
  /// factor O's rows must be multiplied by (rescale) before this tile's P V is added.
  __device__ __forceinline__ void softmax(float (&sc)[kBc / 2], int n0, float (&alpha)[2]) {
    const attention::Geometry& g = a->g;
#pragma unroll
    for (int e = 0; e < kBc / 2; ++e) sc[e] *= a->scale_log2;
    if (!(n0 >= wfl && n0 + kBc <= we0)) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        int64_t kf, ke;
        seen_keys<kPaged>(g, len, my_row + 8 * hf, kf, ke);
        // Visible columns x (key n0 + 2tq + x) are lo <= x < hi.
        const int lo = static_cast<int>(kf) - n0 - 2 * tq, hi = static_cast<int>(ke) - n0 - 2 * tq;
#pragma unroll
        for (int j = 0; j < kBc / 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (8 * j + e < lo || 8 * j + e >= hi) sc[4 * j + 2 * hf + e] = -INFINITY;
          }
        }
      }
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float mx = m[hf];
#pragma unroll
      for (int j = 0; j < kBc / 8; ++j) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * hf], sc[4 * j + 2 * hf + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // A row with nothing visible yet keeps max −inf; its weights are taken relative to 0
      // (exp2_base), which keeps them 0 rather than exp(−inf + inf).
      const float base = exp2_base(mx);
      alpha[hf] = exp2_approx(m[hf] - base);
      m[hf] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kBc / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = sc[4 * j + 2 * hf + e];
          x = exp2_approx(x - base);
          sum += x;
        }
      }
      l[hf] = l[hf] * alpha[hf] + sum;
    }
  }

  __device__ __forceinline__ void rescale(const float (&alpha)[2]) {
#pragma unroll
    for (int ch = 0; ch < S::kOChunks; ++ch) {
#pragma unroll
      for (int j = 0; j < kON / 8; ++j) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          o[ch][4 * j + 2 * hf] *= alpha[hf];
          o[ch][4 * j + 2 * hf + 1] *= alpha[hf];
        }
      }
    }
  }

  /// P rounded to T as the A operand of the k16 steps over the tile's keys (n8 blocks 2kk,
  /// 2kk + 1: device/wgmma.cuh's header).
  static __device__ __forceinline__ void pack(const float (&sc)[kBc / 2], uint32_t (&pa)[kBc / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
#pragma unroll
      for (int r = 0; r < 4; ++r) pa[kk][r] = pack2<T>(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);
    }
  }

  /// Each warp releases a stage once it no longer reads it (the empty barriers count warps).
  __device__ __forceinline__ void release(uint32_t bar) const {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  }

  /// The plain schedule: for each tile S, softmax, P V, each product waited for at once (the
  /// two warpgroups overlap each other only by the warp schedulers' interleaving).
  __device__ __forceinline__ void run_plain(int n_begin, int tiles, const StageBarriers<kStages>& bars) {
    for (int i = 0; i < tiles; ++i) {
      const int s = i % kStages;
      const uint32_t parity = (i / kStages) & 1;
      float sc[kBc / 2], alpha[2];
      uint32_t pa[kBc / 16][4];
      mbar_wait(bars.k_full(s), parity);
      __syncwarp();
      issue_s(sc, k_tile(s));
      wgmma_wait<0>();
      fence_regs(sc);
      release(bars.k_empty(s));
      softmax(sc, (n_begin + i) * kBc, alpha);
      rescale(alpha);
      pack(sc, pa);
      mbar_wait(bars.v_full(s), parity);
      __syncwarp();
      issue_pv(pa, v_tile(s));
      wgmma_wait<0>();
      pv_done(pa);
      release(bars.v_empty(s));
    }
  }

  /// FlashAttention-3's schedule (Shah et al. 2024, Algorithms 1 and 2): inside the warpgroup
  /// the softmax of tile i runs while the tensor cores compute P V of tile i − 1 (S of tile i
  /// and P V of tile i − 1 issued together, S waited for first); between the two consumer
  /// warpgroups a ping-pong of named barriers 3 and 4 (256 threads: one warpgroup waits, the
  /// other arrives) orders their issues, so that one warpgroup's products run while the other
  /// does its softmax. Warpgroup 0 issues first: warpgroup 1 arrives on 3 once up front and
  /// skips its last arrival, so that both barriers end balanced.
  __device__ __forceinline__ void run_pipelined(int n_begin, int tiles, const StageBarriers<kStages>& bars) {
    if (tiles <= 0) return; // (paged rows that see nothing; before the barriers, both warpgroups alike)
    const auto turn = [&] { // wait for this warpgroup's turn to issue
      if (c == 0) bar_sync<3, 256>();
      else bar_sync<4, 256>();
    };
    const auto pass = [&](bool last) { // hand the turn to the other warpgroup
      if (c == 0) bar_arrive<4, 256>();
      else if (!last) bar_arrive<3, 256>();
    };
    if (c == 1) bar_arrive<3, 256>();
    float sc[kBc / 2], alpha[2];
    uint32_t pa[kBc / 16][4];
    // Tile 0: S, softmax (O is still 0: no rescale), P.
    mbar_wait(bars.k_full(0), 0);
    __syncwarp();
    turn();
    issue_s(sc, k_tile(0));
    pass(tiles == 1);
    wgmma_wait<0>();
    fence_regs(sc);
    release(bars.k_empty(0));
    softmax(sc, n_begin * kBc, alpha);
    pack(sc, pa);
    for (int i = 1; i < tiles; ++i) {
      const int s = i % kStages, sp = (i - 1) % kStages;
      const uint32_t parity = (i / kStages) & 1, parity_p = ((i - 1) / kStages) & 1;
      mbar_wait(bars.k_full(s), parity);
      mbar_wait(bars.v_full(sp), parity_p);
      __syncwarp();
      turn();
      issue_s(sc, k_tile(s));
      issue_pv(pa, v_tile(sp));
      pass(i == tiles - 1);
      wgmma_wait<1>(); // S of tile i done; P V of tile i − 1 still running
      fence_regs(sc);
      release(bars.k_empty(s));
      softmax(sc, (n_begin + i) * kBc, alpha);
      wgmma_wait<0>();
      pv_done(pa);
      release(bars.v_empty(sp));
      rescale(alpha);
      pack(sc, pa);
    }
    // The last tile's P V.
    const int sl = (tiles - 1) % kStages;
    mbar_wait(bars.v_full(sl), ((tiles - 1) / kStages) & 1);
    __syncwarp();
    issue_pv(pa, v_tile(sl));
    wgmma_wait<0>();
    pv_done(pa);
    release(bars.v_empty(sl));
  }
};
#endif

template <typename T, typename S, bool kPaged>
__global__ void __launch_bounds__(kHopperThreads, 1) attention_hopper_kernel(const __grid_constant__ HopperArgs a) {
#if defined(NUVEC_WGMMA_AVAILABLE)
  constexpr int D = S::D, kBc = S::kBc, kBr = S::kBr, kStages = S::kStages, kON = S::kON;
  extern __shared__ __align__(16) unsigned char hopper_smem[];
  const uint32_t raw = smem_addr(hopper_smem), sb = (raw + 1023u) & ~1023u;
  unsigned char* const sbase = hopper_smem + (sb - raw);
  StageBarriers<kStages> bars;
  bars.q_full = sb + S::bars;
  const uint32_t bar_q = bars.q_full;

  const attention::Geometry& g = a.g;
  const int tid = threadIdx.x, wg = tid / 128;
  const int lq = static_cast<int>(g.lq);
  const int64_t bid = a.block0 + blockIdx.x;
  const int64_t bh = bid / a.q_tiles;
  // Later query tiles first: under causal they see the most keys, and starting them early
  // keeps the last wave short.
  const int q0 = static_cast<int>((a.q_tiles - 1 - bid % a.q_tiles) * kBr);
  const int64_t b = bh / g.hq, h = bh % g.hq, hk = h / g.group();
  int64_t len = 0; // paged: the sequence's positions, clamped to [0, capacity]
  if constexpr (kPaged) {
    len = a.lengths[b];
    len = len < 0 ? 0 : (len > g.lk ? g.lk : len);
  }

  // The key tiles the block's rows see: [first(q0), end(last row)) (first and end grow with
  // the row). Every row below Lq sees a key (the coverage; paged, rows that see nothing are
  // written by uniform_rows_kernel), so the range is empty only for such rows.
  const int q_last = (q0 + kBr < lq ? q0 + kBr : lq) - 1;
  int64_t first0, end0, first_l, end_l;
  seen_keys<kPaged>(g, len, q0, first0, end0);
  seen_keys<kPaged>(g, len, q_last, first_l, end_l);
  const int n_begin = static_cast<int>(first0 / kBc);
  const int tiles = end_l > first0 ? static_cast<int>((end_l + kBc - 1) / kBc) - n_begin : 0;

  if (tid == 0) {
    mbar_init(bar_q, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(bars.k_full(s), 1);
      mbar_init(bars.v_full(s), 1);
      mbar_init(bars.k_empty(s), kConsumerWarps);
      mbar_init(bars.v_empty(s), kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // ---- producer ----
    setmaxnreg_dec<kProducerRegs>();
    if (tid == 0 && tiles > 0) {
      mbar_arrive_expect_tx(bar_q, S::q_bytes);
#pragma unroll
      for (int p = 0; p < S::kPanels; ++p) {
        tma_load_4d(sb + S::q + p * kBr * 128, &a.q_map, bar_q, 64 * p, q0, static_cast<int>(h), static_cast<int>(b));
      }
      for (int i = 0; i < tiles; ++i) {
        const int s = i % kStages;
        const uint32_t parity = ((i / kStages) & 1) ^ 1;
        const int n0 = (n_begin + i) * kBc;
        // One tile of kBc positions into stage s of the tiles at `tile` through `map`: dense,
        // one box a panel; paged, kBc / box_rows boxes a panel, box j from the cache block
        // holding positions n0 + j · box_rows .. (table entries clamped as the fallback's).
        const auto load = [&](uint32_t tile, const CUtensorMap* map, uint32_t bar) {
          if constexpr (kPaged) {
            for (int j = 0; j < kBc / a.box_rows; ++j) {
              const int pos = n0 + j * a.box_rows;
              int idx = pos >> a.bs_log2;
              idx = idx < a.max_blocks ? idx : a.max_blocks - 1; // past the capacity: hidden anyway
              int blk = a.tables[b * a.max_blocks + idx];
              blk = blk < 0 ? 0 : (blk >= a.cache_blocks ? a.cache_blocks - 1 : blk);
              const int off = pos & ((1 << a.bs_log2) - 1);
#pragma unroll
              for (int p = 0; p < S::kPanels; ++p) {
                tma_load_4d(tile + p * kBc * 128 + j * a.box_rows * 128, map, bar, 64 * p, off, static_cast<int>(hk), blk);
              }
            }
          } else {
#pragma unroll
            for (int p = 0; p < S::kPanels; ++p) {
              tma_load_4d(tile + p * kBc * 128, map, bar, 64 * p, n0, static_cast<int>(hk), static_cast<int>(b));
            }
          }
        };
        mbar_wait(bars.k_empty(s), parity);
        mbar_arrive_expect_tx(bars.k_full(s), S::kv_bytes);
        load(sb + S::k + s * S::kv_bytes, &a.k_map, bars.k_full(s));
        mbar_wait(bars.v_empty(s), parity);
        mbar_arrive_expect_tx(bars.v_full(s), S::kv_bytes);
        load(sb + S::v + s * S::kv_bytes, &a.v_map, bars.v_full(s));
      }
    }
  } else {
    // ---- consumers: warpgroup c owns query rows q0 + 64c .. q0 + 64c + 63 ----
    setmaxnreg_inc<kConsumerRegs>();
    const int c = wg - 1, wtid = tid % 128, warp = wtid / 32, lane = tid % 32, gr = lane / 4, tq = lane % 4;
    const int row0 = q0 + 64 * c;             // the warpgroup's first row
    const int my_row = row0 + 16 * warp + gr; // this thread's rows: my_row, my_row + 8
    // Tiles every row of the warpgroup sees whole need no per-key test: [first(last row),
    // end(first row)).
    int64_t wf0, we0, wfl, wel;
    seen_keys<kPaged>(g, len, row0, wf0, we0);
    seen_keys<kPaged>(g, len, row0 + 63, wfl, wel);

    HopperConsumer<T, S, kPaged> w;
    w.init(a, sb, c, lane, my_row, len, wfl, we0);
    if (tiles > 0) mbar_wait(bar_q, 0);
    __syncwarp(); // the wgmma below are .aligned: the warp reconverged after its spin
    if (a.pipelined) {
      w.run_pipelined(n_begin, tiles, bars);
    } else {
      w.run_plain(n_begin, tiles, bars);
    }
    float (&o)[S::kOChunks][kON / 2] = w.o;
    const float (&m)[2] = w.m;
    const float (&l)[2] = w.l;

    // Epilogue: the row sums over the row's 4 lanes, the sink, 1 / l and the lse.
    const float sink = g.has_sinks ? static_cast<float>(static_cast<const T*>(a.buf.sinks)[h]) : 0.0f;
    float scale_o[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float sum = l[hf];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      float mm = m[hf];
      if (g.has_sinks) {
        // The sink is one more score, of weight 1 and value 0.
        const float2 f = online_merge_exp2(mm, sum, sink * kLog2e, 1.0f);
        scale_o[hf] = f.x / sum;
      } else {
        scale_o[hf] = 1.0f / sum;
      }
      const int row = my_row + 8 * hf;
      if (tq == 0 && row < lq && a.buf.lse != nullptr) a.buf.lse[bh * g.lq + row] = (mm + log2f(sum)) * kLn2;
    }

    // O through the warpgroup's own rows of the query tile (no wgmma reads them any more once
    // every warp of the warpgroup is past its last S product), then 16-byte stores of whole
    // rows.
    consumer_bar_sync(c);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = 64 * c + 16 * warp + gr + 8 * hf; // row in the tile
#pragma unroll
      for (int ch = 0; ch < S::kOChunks; ++ch) {
#pragma unroll
        for (int j = 0; j < kON / 8; ++j) {
          const int col = ch * kON + 8 * j; // chunk col / 8, bytes 4tq of it
          *reinterpret_cast<uint32_t*>(sbase + S::q + sw128_offset<kBr>(r, col / 8) + 4 * tq) =
              pack2<T>(o[ch][4 * j + 2 * hf] * scale_o[hf], o[ch][4 * j + 2 * hf + 1] * scale_o[hf]);
        }
      }
    }
    consumer_bar_sync(c);
    T* out = static_cast<T*>(a.buf.out) + (bh * g.lq + row0) * D;
    constexpr int kChunks = D / 8;
#pragma unroll
    for (int it = 0; it < 64 * kChunks / 128; ++it) {
      const int idx = it * 128 + wtid, r = idx / kChunks, cc = idx % kChunks;
      if (row0 + r < lq) {
        *reinterpret_cast<uint4*>(out + int64_t(r) * D + cc * 8) =
            *reinterpret_cast<const uint4*>(sbase + S::q + sw128_offset<kBr>(64 * c + r, cc));
      }
    }
  }
#else
  __trap(); // built without sm_90a: attention_hopper never launches this (wgmma_usable)
#endif
}

// ---- host side ---------------------------------------------------------------------------

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

/// The driver's cuTensorMapEncodeTiled, through the runtime (no link against libcuda).
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    NUVEC_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || p == nullptr) {
      throw std::runtime_error("[attention_hopper] the CUDA driver has no cuTensorMapEncodeTiled.");
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

/// The tensor map of a [B, H, L, D] operand (element strides b, h, l; the last axis
/// contiguous) read in boxes of 64 columns x `rows` rows with the 128-byte swizzle, into
/// *map. An axis of size 1 is never stepped along: its stride is replaced by the contiguous
/// one (the encoder wants multiples of 16 bytes). False when the encoder refuses the tensor
/// (a stride of 2^40 bytes or more, say): the caller runs the mma.sync kernel instead.
bool tile_map(CUtensorMap* map, Dtype dtype, const void* ptr, int64_t bsz, int64_t hsz, int64_t lsz, int64_t d,
              const int64_t (&stride)[3], int rows) {
  const cuuint64_t dims[4] = {cuuint64_t(d), cuuint64_t(lsz), cuuint64_t(hsz), cuuint64_t(bsz)};
  const int64_t sizes[3] = {lsz, hsz, bsz}, elem[3] = {stride[2], stride[1], stride[0]};
  cuuint64_t strides[3];
  int64_t contiguous = d * 2;
  for (int i = 0; i < 3; ++i) {
    strides[i] = cuuint64_t(sizes[i] == 1 ? contiguous : elem[i] * 2);
    contiguous = int64_t(strides[i]) * sizes[i];
  }
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1}, unit[4] = {1, 1, 1, 1};
  const CUresult r = encode_tiled()(
      map, dtype == float16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(ptr),
      dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

/// Launches the kernel of shape S; false (nothing launched) when a tensor map cannot be made.
/// Dense: q, k and v [B, H, L, D] through their strides. Paged: k_map and v_map over the
/// caches (a.buf.k, a.buf.v [blocks, Hkv, 2^bs_log2, D] row-contiguous) in boxes of
/// a.box_rows positions.
template <typename T, typename S, bool kPaged>
bool launch_hopper(HopperArgs& a) {
  auto kernel = attention_hopper_kernel<T, S, kPaged>;
  static const bool raised = [&] {
    NUVEC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(S::bytes)));
    return true;
  }();
  (void)raised;
  const attention::Geometry& g = a.g;
  const Dtype dt = std::is_same_v<T, __half> ? float16 : bfloat16;
  if (!tile_map(&a.q_map, dt, a.buf.q, g.b, g.hq, g.lq, g.d, g.q_stride, S::kBr)) return false;
  if constexpr (kPaged) {
    const int64_t bs = int64_t(1) << a.bs_log2;
    const int64_t cache[3] = {g.hkv * bs * g.d, bs * g.d, g.d}; // [blocks, Hkv, bs, D] as b, h, l
    a.box_rows = static_cast<int>(bs < S::kBc ? bs : S::kBc);
    if (!tile_map(&a.k_map, dt, a.buf.k, a.cache_blocks, g.hkv, bs, g.d, cache, a.box_rows) ||
        !tile_map(&a.v_map, dt, a.buf.v, a.cache_blocks, g.hkv, bs, g.d, cache, a.box_rows)) {
      return false;
    }
  } else {
    if (!tile_map(&a.k_map, dt, a.buf.k, g.b, g.hkv, g.lk, g.d, g.k_stride, S::kBc) ||
        !tile_map(&a.v_map, dt, a.buf.v, g.b, g.hkv, g.lk, g.dv, g.v_stride, S::kBc)) {
      return false;
    }
  }
  a.q_tiles = ceil_div(g.lq, S::kBr);
  const int64_t blocks = a.q_tiles * g.b * g.hq;
  constexpr int64_t kMaxBlocks = 0x7fffffff;
  for (int64_t b0 = 0; b0 < blocks; b0 += kMaxBlocks) {
    a.block0 = b0;
    const int64_t n = blocks - b0 < kMaxBlocks ? blocks - b0 : kMaxBlocks;
    kernel<<<static_cast<unsigned>(n), kHopperThreads, S::bytes, stream()>>>(a);
    check_launch("attention_hopper_kernel");
  }
  return true;
}

// The kernel shape of each head size (FlashAttention-3's tiles for D 64 and 128; for 256 a
// 64-key tile keeps two stages of K and V within the 227 KB of shared memory): D 64: 128-key
// tiles, 3 stages (112 KB); 128: 128-key tiles, 2 stages (160 KB); 256: 64-key tiles, 2
// stages (192 KB).
template <typename T, bool kPaged>
bool launch_for_head(HopperArgs& a) {
  switch (a.g.d) {
    case 64: return launch_hopper<T, HopperShape<64, 128, 3>, kPaged>(a);
    case 128: return launch_hopper<T, HopperShape<128, 128, 2>, kPaged>(a);
    case 256: return launch_hopper<T, HopperShape<256, 64, 2>, kPaged>(a);
    default: break;
  }
  throw std::invalid_argument("[attention_hopper] head size " + std::to_string(a.g.d) + " is not covered.");
}

/// FlashAttention-3's schedule unless NUVEC_ATTENTION_HOPPER_PIPELINE=0 (read at each call,
/// so that tests and benchmarks can run both; the plain one is the simpler to trust).
bool pipelined_schedule() {
  return env_switch("NUVEC_ATTENTION_HOPPER_PIPELINE", true);
}

/// Paged rows that see nothing (query l of sequence b with len − L + 1 + l <= 0) attend
/// uniformly to all max_blocks · block_size gathered positions (PagedAttention's rule, the
/// fallback's all-false mask): their output is the mean of those V rows, written here over
/// whatever the main kernel left. A block of 128 threads per (b, query head); nothing to do
/// (the usual case) returns at once.
template <typename T>
__global__ void __launch_bounds__(128) uniform_rows_kernel(const __grid_constant__ HopperArgs a) {
  const attention::Geometry& g = a.g;
  const int64_t bh = blockIdx.x, b = bh / g.hq, h = bh % g.hq, hk = h / g.group();
  int64_t len = a.lengths[b];
  len = len < 0 ? 0 : (len > g.lk ? g.lk : len);
  const int64_t rows = g.lq - len; // queries 0 .. rows − 1 see nothing
  if (rows <= 0) return;
  const int64_t bs = int64_t(1) << a.bs_log2;
  const T* v = static_cast<const T*>(a.buf.v);
  T* out = static_cast<T*>(a.buf.out) + bh * g.lq * g.d;
  for (int64_t d = threadIdx.x; d < g.d; d += blockDim.x) {
    float sum = 0.0f;
    for (int64_t p = 0; p < g.lk; ++p) {
      int64_t blk = a.tables[b * a.max_blocks + (p >> a.bs_log2)];
      blk = blk < 0 ? 0 : (blk >= a.cache_blocks ? a.cache_blocks - 1 : blk);
      sum += static_cast<float>(v[((blk * g.hkv + hk) * bs + (p & (bs - 1))) * g.d + d]);
    }
    const T mean = static_cast<T>(sum / static_cast<float>(g.lk));
    for (int64_t i = 0; i < rows && i < g.lq; ++i) out[i * g.d + d] = mean;
  }
}

} // namespace

bool attention_hopper_covers(Dtype dtype, const attention::Geometry& g) {
  if (!fast::hopper_head(g.d, g.dv, dtype)) return false;
  if (g.has_mask || g.lk == 0 || (g.causal && g.lq > g.lk)) return false;
  if (g.lq >= (int64_t(1) << 30) || g.lk >= (int64_t(1) << 30) || g.b >= (int64_t(1) << 31) || g.hq >= (int64_t(1) << 31)) {
    return false;
  }
  // The TMA steps along b, h and l: positive strides of whole 16-byte vectors.
  const int64_t qn[3] = {g.b, g.hq, g.lq}, kn[3] = {g.b, g.hkv, g.lk};
  for (int i = 0; i < 3; ++i) {
    if (qn[i] > 1 && (g.q_stride[i] <= 0 || g.q_stride[i] % 8 != 0)) return false;
    if (kn[i] > 1 && (g.k_stride[i] <= 0 || g.k_stride[i] % 8 != 0)) return false;
    if (kn[i] > 1 && (g.v_stride[i] <= 0 || g.v_stride[i] % 8 != 0)) return false;
  }
  return true;
}

void attention_hopper(Dtype dtype, const attention::Geometry& g, const AttentionBuffers& buf) {
  // Other devices and builds, and calls outside the coverage, take the mma.sync kernel.
  // (The epilogue's 16-byte stores need out aligned too; alloc_output's buffers are.)
  const bool aligned =
      is_aligned(buf.q, 16) && is_aligned(buf.k, 16) && is_aligned(buf.v, 16) && is_aligned(buf.out, 16);
  if (!wgmma_usable() || !aligned || !attention_hopper_covers(dtype, g)) return attention_tiled(dtype, g, buf);
  if (g.b * g.hq * g.lq == 0) return;
  HopperArgs a;
  a.buf = buf;
  a.g = g;
  a.scale_log2 = g.scale * kLog2e;
  a.pipelined = pipelined_schedule();
  const bool launched = dtype == float16 ? launch_for_head<__half, false>(a) : launch_for_head<__nv_bfloat16, false>(a);
  if (!launched) attention_tiled(dtype, g, buf);
}

bool attention_hopper_paged(Dtype dtype, const PagedGeometry& pg, const void* q, const void* k_cache, const void* v_cache,
                            const int32_t* tables, const int32_t* lengths, void* out) {
  const int64_t cap = pg.max_blocks * pg.block_size;
  const bool covered = fast::hopper_head(pg.d, pg.d, dtype) && pg.block_size >= 8 && (pg.block_size & (pg.block_size - 1)) == 0 && pg.block_size <= (int64_t(1) << 20) &&
      pg.window == 0 && cap > 0 && cap < (int64_t(1) << 30) && pg.l < (int64_t(1) << 30) && pg.blocks < (int64_t(1) << 31) &&
      pg.b * pg.max_blocks < (int64_t(1) << 31) && is_aligned(q, 16) && is_aligned(k_cache, 16) &&
      is_aligned(v_cache, 16) && is_aligned(out, 16);
  if (!covered || !wgmma_usable()) return false;
  if (pg.b * pg.hq * pg.l == 0) return true;
  HopperArgs a;
  a.g = paged_query_geometry(pg); // the key rule: seen_keys<true>
  const attention::Geometry& g = a.g;
  a.buf.q = q;
  a.buf.k = k_cache;
  a.buf.v = v_cache;
  a.buf.out = out; // no lse: PagedAttention has none
  a.tables = tables;
  a.lengths = lengths;
  a.max_blocks = static_cast<int>(pg.max_blocks);
  a.cache_blocks = static_cast<int>(pg.blocks);
  while ((int64_t(1) << a.bs_log2) < pg.block_size) ++a.bs_log2;
  a.scale_log2 = pg.scale * kLog2e;
  a.pipelined = pipelined_schedule();
  const bool launched = dtype == float16 ? launch_for_head<__half, true>(a) : launch_for_head<__nv_bfloat16, true>(a);
  if (!launched) return false;
  const int64_t heads = g.b * g.hq;
  if (heads > 0x7fffffff) throw std::invalid_argument("[paged_attention] too many (sequence, head) pairs.");
  if (dtype == float16) uniform_rows_kernel<__half><<<static_cast<unsigned>(heads), 128, 0, stream()>>>(a);
  else uniform_rows_kernel<__nv_bfloat16><<<static_cast<unsigned>(heads), 128, 0, stream()>>>(a);
  check_launch("uniform_rows_kernel");
  return true;
}

} // namespace nuvec::cu
