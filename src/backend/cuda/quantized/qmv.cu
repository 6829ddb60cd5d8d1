// nuvec: the decode-shaped quantized products (qmm.h's qmv: at most 8 activation rows per
// batch entry, W transposed), meant to be bound by the weight read. float16/bfloat16 run on
// tensor cores with the operands swapped: a 16-row slice of W is the mma's A operand
// (dequantized into T in registers, as MLX's GPU kernels round it), up to 8 activation rows
// (of one batch entry, or of entries sharing an expert) are its n8 B operand, so each weight
// word is read once for all of them; float32 accumulators. float32 runs a CUDA-core kernel
// (tf32 would round the activations). Gathered jobs: runs of equal rhs, found in-kernel.
// H200 status (bench/qmv_bench.cu, events): W4 g64 bf16 M=1 14336x4096 21-23 us in the
// kernel, 0.34 of the copy bandwidth (28.5 us before the lean loop below); the same read
// without decoding takes 10 us (bench/GPU-NOTES.md). What limits it now (ncu):
// warps issue every ~8 cycles, the stalls spread over fixed-latency dependencies, memory,
// and the block's barriers (staging, cluster reduction) amortised over few rounds; the next
// step is a producer/consumer pipeline (bulk copies of weight tiles into shared memory)
// that decouples the bytes in flight from the registers and the block count.
#include <cooperative_groups.h>

#include "backend/cuda/index_errors.cuh"
#include "backend/cuda/kernel_utils.cuh"
#include "backend/cuda/quantized/dequant.cuh"
#include "backend/cuda/quantized/qmm.h"

namespace nuvec::cu {
namespace {

namespace cg = cooperative_groups;
using quant::GroupParams;
using quant::kChunkCodes;
using quant::load_chunk;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockRows = 16 * kWarps; ///< rows of W (output columns n) per block
constexpr int kCols = 8;                ///< activation rows per job: the mma's n8
constexpr int kSliceBytes = 32 << 10;   ///< shared memory for staged activations, per block
constexpr int kMaxGatherBatch = 1024;   ///< batch entries the in-kernel job search scans

/// The launch's view of a QmmArgs (see qmm.h), plus the split of K over a cluster.
struct QmvParams {
  const void* x;
  const uint32_t* w;
  const void* scales;
  const void* biases;
  void* out;
  const uint32_t* lhs;
  const uint32_t* rhs;
  int64_t batch, M, N, K, x_count, w_count;
  int64_t row_words;    ///< packed words per row of W: K * bits / 32
  int64_t groups;       ///< groups per row of W: K / group_size
  int group_size;
  int group_shift;      ///< log2(group_size) (16, 32, 64 or 128)
  QuantMode mode;
  int per_job;          ///< batch entries per job: 8 / M
  int64_t split_chunks; ///< chunks of K per block of a cluster (a multiple of a round, 16)
  int slice_chunks;     ///< chunks of activations staged in shared memory at once
  int splits;           ///< blocks of a cluster (1: no cluster)
  int col_slots;        ///< activation columns a job can have (the staging layout's stride)
  bool gathered;
  IndexError* err;
};

/// The job of a block: up to 8 activation rows (entries of one run of equal rhs, M rows
/// each) against one weight matrix.
struct JobSlots {
  int64_t x_row[kCols];   ///< row of x (element offset / K) of each column
  int64_t out_row[kCols]; ///< row of out of each column
  int64_t expert;
  int cols;               ///< columns in use (0: no job; the block leaves)
};

/// Warp-wide: the j-th job of the batch. Jobs are the runs of equal rhs split into pieces of
/// per_job entries from each run's start (so every piece of a run but the last is full);
/// the index entries (rhs: the block's shared-memory copy, or null for all 0) are scanned 32
/// at a time with ballots. Returns false past the last job.
__device__ bool find_job(const QmvParams& p, const uint32_t* rhs, int64_t j, int64_t& b0, int& count) {
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  int64_t seen = 0, run_start = 0;
  uint32_t prev_last = 0;
  for (int64_t base = 0; base < p.batch; base += 32) {
    const int64_t b = base + lane;
    const bool valid = b < p.batch;
    const uint32_t r = valid && rhs ? rhs[b] : 0u;
    uint32_t prev = __shfl_up_sync(full, r, 1);
    if (lane == 0) prev = prev_last;
    const unsigned changes = __ballot_sync(full, valid && (b == 0 || r != prev));
    const unsigned upto = changes & (full >> (31 - lane));
    const int64_t rs = upto ? base + (31 - __clz(upto)) : run_start;
    const unsigned starts = __ballot_sync(full, valid && static_cast<int>(b - rs) % p.per_job == 0);
    const int n = __popc(starts);
    if (seen + n > j) {
      unsigned m = starts;
      for (int64_t k = seen; k < j; ++k) m &= m - 1;
      b0 = base + __ffs(m) - 1;
      const uint32_t e = rhs ? rhs[b0] : 0u;
      count = 1;
      while (count < p.per_job && b0 + count < p.batch && (rhs ? rhs[b0 + count] : 0u) == e) ++count;
      return true;
    }
    seen += n;
    run_start = __shfl_sync(full, rs, 31);
    prev_last = __shfl_sync(full, r, 31);
  }
  return false;
}

/// Fills the block's job (warp 0 searches; every thread calls): the columns' rows of x and
/// out and the weight batch, range-checked (an index past x_count or w_count is recorded
/// and the job dropped: the node's output is zeroed).
__device__ void setup_job(const QmvParams& p, JobSlots& s) {
  // The block copies rhs first (one round of loads, not one per 32 entries of the scan).
  __shared__ uint32_t rhs[kMaxGatherBatch];
  if (p.gathered && p.rhs) {
    for (int64_t b = threadIdx.x; b < p.batch; b += blockDim.x) rhs[b] = p.rhs[b];
    __syncthreads();
  }
  if (threadIdx.x < 32) {
    int64_t b0 = 0;
    int count = 1;
    const bool found = !p.gathered || find_job(p, p.rhs ? rhs : nullptr, blockIdx.y, b0, count);
    // Lane c < 8 fills column c (entry b0 + c / M, row c % M) and checks its x index.
    const int lane = threadIdx.x;
    const int cols = found ? count * static_cast<int>(p.M) : 0;
    const int64_t e = found && p.rhs ? rhs[b0] : 0;
    bool bad = false;
    if (lane < kCols) {
      s.x_row[lane] = s.out_row[lane] = -1;
      if (lane < cols) {
        const int64_t entry = b0 + lane / p.M, m = lane % p.M;
        const int64_t xi = p.lhs ? p.lhs[entry] : 0;
        bad = xi >= p.x_count;
        if (bad) record_index_error(p.err, xi, p.x_count, 0);
        s.x_row[lane] = xi * p.M + m;
        s.out_row[lane] = entry * p.M + m;
      }
    }
    const bool any_bad = __any_sync(0xffffffffu, bad);
    if (lane == 0) {
      if (cols > 0 && e >= p.w_count) record_index_error(p.err, e, p.w_count, 0);
      s.expert = e;
      s.cols = any_bad || e >= p.w_count ? 0 : cols;
    }
  }
  __syncthreads();
}

/// The group parameters of chunk q of the row whose first group is `row_group` (codes 0..15
/// and 16..31; two groups only when group_size is 16), or zeros. The group index is a shift:
/// no integer division in the loop.
template <typename T>
__device__ __forceinline__ void chunk_params(
    const QmvParams& p, const void* scales, const void* biases, int64_t row_group, int q, bool valid,
    GroupParams (&g)[2]) {
  if (!valid) {
    g[0] = g[1] = GroupParams{0.0f, 0.0f};
    return;
  }
  const int64_t i = row_group + ((q * kChunkCodes) >> p.group_shift);
  g[0] = quant::group_params<T>(p.mode, scales, biases, i);
  g[1] = p.group_size == 16 ? quant::group_params<T>(p.mode, scales, biases, i + 1) : g[0];
}

/// Raw bits of element k of 32 16-bit elements held in 16 words.
__device__ __forceinline__ uint32_t half_bits(const uint32_t (&e)[16], int k) {
  return (e[k / 2] >> (16 * (k % 2))) & 0xffffu;
}

/// One lane's weight rows in the tensor-core qmv: the packed words and group parameters of
/// row g and row g + 8 of its warp's 16, as 32-bit offsets from the weight batch's bases
/// (qmv_covers keeps a batch's words and groups under 2^31): the loop does no 64-bit
/// arithmetic and no mode or bounds tests outside the last round, and keeps few registers
/// for addresses (with a 64-bit pointer per row the compiler rematerialised the row
/// addresses on every chunk).
template <typename T, bool kAffine, int BITS>
struct LaneRows {
  const uint32_t* w;
  const unsigned short* s16; ///< affine scales (T bits)
  const unsigned short* b16; ///< affine biases
  const unsigned char* s8;   ///< fp modes' scale codes
  uint32_t wo[2];            ///< first word of each row
  uint32_t go[2];            ///< first group of each row
  int group_shift;
  bool two_groups;           ///< nvfp4: a chunk spans two groups of 16

  /// Requests chunk q (row-relative) of both rows into w and raw (group_raw's bits of its
  /// two halves). kChecked: q may lie past the range's end (valid false): zeros instead.
  template <bool kChecked>
  __device__ __forceinline__ void request(int q, bool valid, uint32_t (&wr)[2][BITS], uint32_t (&raw)[2][2]) const {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (kChecked && !valid) {
#pragma unroll
        for (int i = 0; i < BITS; ++i) wr[r][i] = 0u;
        raw[r][0] = raw[r][1] = 0u;
        continue;
      }
      load_chunk<BITS>(wr[r], w + (wo[r] + uint32_t(q) * BITS), true);
      const uint32_t gi = go[r] + ((uint32_t(q) * kChunkCodes) >> group_shift);
      if constexpr (kAffine) {
        raw[r][0] = raw[r][1] = uint32_t(__ldg(s16 + gi)) | (uint32_t(__ldg(b16 + gi)) << 16);
      } else {
        raw[r][0] = __ldg(s8 + gi);
        raw[r][1] = two_groups ? uint32_t(__ldg(s8 + gi + 1)) : raw[r][0];
      }
    }
  }
};

/// Tensor-core qmv: block (n block, K split) x job; warp w owns rows n0 + 16w .. + 15 of W
/// and lanes (g, t) = (lane / 4, lane % 4) hold rows g and g + 8. Lane t of a quad reads
/// chunks 4u + t of its two rows (coalesced 16-byte loads), so its A fragments at step s are
/// pairs 2s, 2s + 1 of its chunk; the activations are staged in shared memory once per slice
/// (normally the block's whole K range) in that pair order ([chunk][column] 64 bytes, 16-byte
/// segments swizzled by chunk so a quarter warp's reads hit distinct bank groups), column g
/// being lane g's B (lanes past the job's columns read its last: their outputs are not
/// stored). The weight read is software pipelined: a round covers 4U chunks, and each chunk's
/// words for the next round are requested as soon as this round's are decoded, so a warp
/// always has a round of loads in flight. Only the last round of a slice checks its chunks
/// (the staging zero-fills the activations past the slice); rows past N read row N - 1 and
/// are not stored. A cluster of `splits` blocks covers K; their partial sums meet in
/// distributed shared memory and each block writes 1/splits of the tile.
/// Measured on the H200 (bench/qmv_bench.cu): the earlier form of this kernel, with a mode
/// test, 64-bit index arithmetic and bounds predicates on every chunk, executed ~400
/// instructions a warp per KB of weights and was issue-bound at 0.25 of the copy bandwidth.
template <typename T, bool kAffine, int BITS, int U = (BITS >= 5 ? 2 : 4), int kMinBlocks = 4>
__global__ void __launch_bounds__(kThreads, kMinBlocks) qmv_mma_kernel(const QmvParams p) {
  // U: chunks a lane has in flight per row and round; kMinBlocks: blocks an SM (registers).
  using Dec = quant::ChunkDecoder<T, kAffine, BITS>;
  constexpr int kRound = 4 * U;        // chunks per round
  // The host sizes slices in multiples of 16 chunks, so a padded slice fits the staging.
  static_assert(16 % kRound == 0, "qmv_mma_kernel: a round must divide 16 chunks");
  extern __shared__ uint4 xs[];        // [chunk][column slot][4 segments]
  __shared__ float part[kBlockRows * kCols];
  __shared__ JobSlots job;
  setup_job(p, job);
  if (job.cols == 0) return; // the whole cluster shares the job

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t nb = blockIdx.x / p.splits;
  const int split = blockIdx.x % p.splits;
  const int64_t row0 = nb * kBlockRows + warp * 16 + g, row1 = row0 + 8;
  const int64_t e = job.expert;
  LaneRows<T, kAffine, BITS> rows;
  {
    const size_t pelt = kAffine ? sizeof(T) : 1;
    const int64_t goff = e * p.N * p.groups * static_cast<int64_t>(pelt);
    rows.w = p.w + e * p.N * p.row_words;
    rows.s16 = reinterpret_cast<const unsigned short*>(static_cast<const char*>(p.scales) + goff);
    rows.b16 = p.biases ? reinterpret_cast<const unsigned short*>(static_cast<const char*>(p.biases) + goff) : nullptr;
    rows.s8 = static_cast<const unsigned char*>(p.scales) + goff;
    // Rows past N read row N - 1 (not stored).
    const uint32_t n0 = static_cast<uint32_t>(row0 < p.N ? row0 : p.N - 1);
    const uint32_t n1 = static_cast<uint32_t>(row1 < p.N ? row1 : p.N - 1);
    rows.wo[0] = n0 * static_cast<uint32_t>(p.row_words), rows.wo[1] = n1 * static_cast<uint32_t>(p.row_words);
    rows.go[0] = n0 * static_cast<uint32_t>(p.groups), rows.go[1] = n1 * static_cast<uint32_t>(p.groups);
  }
  rows.group_shift = p.group_shift;
  rows.two_groups = !kAffine && p.group_size == 16;
  const T* x = static_cast<const T*>(p.x);
  const int cs = p.col_slots, cols = job.cols;
  const int xc = g < cols ? g : cols - 1; // the activation column lane g's B operand holds

  const int kchunks = static_cast<int>(p.K / kChunkCodes);
  const int q_begin = split * static_cast<int>(p.split_chunks);
  const int q_end = q_begin + p.split_chunks < kchunks ? q_begin + static_cast<int>(p.split_chunks) : kchunks;
  // Two accumulator sets (chunk u of a round adds into set u % 2), so that consecutive mmas
  // do not wait for each other (measured: 3-7% on W8, nothing on W4; four sets no better).
  constexpr int kAcc = 2;
  float accs[kAcc][4] = {};

  uint32_t wr[U][2][BITS];
  uint32_t gp[U][2][2];
  // Requests round chunk u (chunk r0 + 4u + t of the slice at qs, nq chunks in it).
  auto request_round = [&](int qs, int r0, int nq) {
    if (r0 + kRound <= nq) {
#pragma unroll
      for (int u = 0; u < U; ++u) rows.template request<false>(qs + r0 + 4 * u + t, true, wr[u], gp[u]);
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int qi = r0 + 4 * u + t;
        rows.template request<true>(qs + qi, qi < nq, wr[u], gp[u]);
      }
    }
  };

  for (int qs = q_begin; qs < q_end; qs += p.slice_chunks) {
    const int nq = q_end - qs < p.slice_chunks ? q_end - qs : p.slice_chunks;
    const int padded = (nq + kRound - 1) / kRound * kRound;
    // The first round's weights are requested before the staging barrier, so their latency
    // overlaps the activations' copy.
    request_round(qs, 0, nq);
    __syncthreads(); // the previous slice is consumed
    for (int i = threadIdx.x; i < padded * cols; i += kThreads) {
      const int qi = i / cols, c = i % cols;
      uint32_t pairs[16];
      if (qi < nq) {
        const uint4* src = reinterpret_cast<const uint4*>(x + job.x_row[c] * p.K + int64_t(qs + qi) * kChunkCodes);
        uint32_t el[16];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint4 v = __ldg(src + k);
          el[4 * k] = v.x, el[4 * k + 1] = v.y, el[4 * k + 2] = v.z, el[4 * k + 3] = v.w;
        }
#pragma unroll
        for (int q = 0; q < 16; ++q) pairs[q] = half_bits(el, Dec::code(q, 0)) | (half_bits(el, Dec::code(q, 1)) << 16);
      } else {
#pragma unroll
        for (int q = 0; q < 16; ++q) pairs[q] = 0u; // past the slice: zero activations
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        xs[(qi * cs + c) * 4 + (k ^ (qi & 3))] = make_uint4(pairs[4 * k], pairs[4 * k + 1], pairs[4 * k + 2], pairs[4 * k + 3]);
      }
    }
    __syncthreads();

    for (int r0 = 0; r0 < nq; r0 += kRound) {
      const int next = r0 + kRound;
      // What the next round requests (warp-uniform): 0 nothing, 1 a full round, 2 the tail.
      const int kind = next >= nq ? 0 : next + kRound <= nq ? 1 : 2;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int qi = r0 + 4 * u + t;
        uint32_t a0[16], a1[16], xb[16];
        Dec::decode(wr[u][0], gp[u][0], p.mode, a0);
        Dec::decode(wr[u][1], gp[u][1], p.mode, a1);
        // This chunk's registers are free again: request its successor of the next round.
        if (kind == 1) {
          rows.template request<false>(qs + next + 4 * u + t, true, wr[u], gp[u]);
        } else if (kind == 2) {
          rows.template request<true>(qs + next + 4 * u + t, next + 4 * u + t < nq, wr[u], gp[u]);
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint4 v = xs[(qi * cs + xc) * 4 + (k ^ (qi & 3))];
          xb[4 * k] = v.x, xb[4 * k + 1] = v.y, xb[4 * k + 2] = v.z, xb[4 * k + 3] = v.w;
        }
#pragma unroll
        for (int s = 0; s < 8; ++s) {
          const uint32_t a[4] = {a0[2 * s], a1[2 * s], a0[2 * s + 1], a1[2 * s + 1]};
          const uint32_t b[2] = {xb[2 * s], xb[2 * s + 1]};
          mma_m16n8k16<T>(accs[u % kAcc], a, b);
        }
      }
    }
  }
  float acc[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc[i] = accs[0][i];
#pragma unroll
    for (int k = 1; k < kAcc; ++k) acc[i] += accs[k][i];
  }

  // acc[0..1]: (row0, columns 2t, 2t + 1); acc[2..3]: (row1, the same columns).
  T* out = static_cast<T*>(p.out);
  if (p.splits == 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = 2 * t + (i & 1);
      const int64_t row = i < 2 ? row0 : row1;
      if (c < cols && row < p.N) out[job.out_row[c] * p.N + row] = store_as<T>(acc[i]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) part[(warp * 16 + g + (i < 2 ? 0 : 8)) * kCols + 2 * t + (i & 1)] = acc[i];
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int per = kBlockRows * kCols / p.splits;
  for (int i = threadIdx.x; i < per; i += kThreads) {
    const int idx = split * per + i;
    const int c = idx % kCols;
    const int64_t row = nb * kBlockRows + idx / kCols;
    if (c >= cols || row >= p.N) continue;
    float sum = 0.0f;
    for (int r = 0; r < p.splits; ++r) sum += cluster.map_shared_rank(part, r)[idx];
    out[job.out_row[c] * p.N + row] = store_as<T>(sum);
  }
  cluster.sync(); // the other blocks' reads of `part` are done
}

/// float32 qmv on CUDA cores: one warp per row n of W (grid-stride over rows), lanes over
/// chunks of 32 codes, every column of the job accumulated at once, then a warp sum.
template <bool kAffine, int BITS>
__global__ void __launch_bounds__(kThreads) qmv_f32_kernel(const QmvParams p) {
  __shared__ JobSlots job;
  setup_job(p, job);
  if (job.cols == 0) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t e = job.expert;
  const uint32_t* w = p.w + e * p.N * p.row_words;
  const size_t pelt = p.mode == QuantMode::Affine ? sizeof(float) : 1;
  const void* scales = static_cast<const char*>(p.scales) + e * p.N * p.groups * pelt;
  const void* biases = p.biases ? static_cast<const char*>(p.biases) + e * p.N * p.groups * pelt : nullptr;
  const float* x = static_cast<const float*>(p.x);
  float* out = static_cast<float*>(p.out);
  const int kchunks = static_cast<int>(p.K / kChunkCodes);
  for (int64_t row = int64_t(blockIdx.x) * kWarps + warp; row < p.N; row += int64_t(gridDim.x) * kWarps) {
    float acc[kCols] = {};
    for (int q = lane; q < kchunks; q += 32) {
      uint32_t wr[BITS];
      GroupParams gp[2];
      load_chunk<BITS>(wr, w + row * p.row_words + q * BITS, true);
      chunk_params<float>(p, scales, biases, row * p.groups, q, true, gp);
#pragma unroll
      for (int c0 = 0; c0 < kChunkCodes; c0 += 4) {
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint32_t code = quant::ChunkDecoder<__half, kAffine, BITS>::extract(wr, c0 + i);
          const GroupParams& g = gp[c0 + i >= 16 ? 1 : 0];
          v[i] = kAffine ? fmaf(g.scale, static_cast<float>(code), g.bias)
                         : math::fp_code_value(BITS, code) * g.scale;
        }
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          if (c >= job.cols) break;
          const float4 xv = __ldg(reinterpret_cast<const float4*>(x + job.x_row[c] * p.K + q * kChunkCodes + c0));
          acc[c] += v[0] * xv.x + v[1] * xv.y + v[2] * xv.z + v[3] * xv.w;
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float s = acc[c];
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0 && c < job.cols) out[job.out_row[c] * p.N + row] = s;
    }
  }
}

/// The cluster split a launch takes when positive (bench/qmv_bench.cu's sweeps: 1, 2, 4 or 8,
/// a portable cluster dividing the reduction tile; 0: the heuristic below).
int force_splits = 0;
/// When set, launches the half-type kernel in qmv's place with qmv's parameters (bench
/// variants of qmv_mma_kernel's template arguments).
void (*launch_override)(const QmmArgs& a, const QmvParams& p, dim3 grid, size_t smem) = nullptr;

/// Words moved by one load of a chunk of BITS words (16-, 8- or 4-byte vectors).
int chunk_vector_words(int bits) {
  return bits % 4 == 0 ? 4 : bits % 2 == 0 ? 2 : 1;
}

template <typename Kernel>
void launch(Kernel kernel, dim3 grid, size_t smem, int cluster, const QmvParams& p) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream();
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 1 ? 1 : 0;
  NUVEC_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
}

} // namespace

bool qmv_covers(const QmmArgs& a) {
  if (!a.transpose || a.w_plain != nullptr || a.w == nullptr) return false;
  if (a.dtype != float32 && a.dtype != float16 && a.dtype != bfloat16) return false;
  if (a.M < 1 || a.M > kCols || a.N < 1 || a.K < kChunkCodes || a.K % kChunkCodes != 0) return false;
  const bool gathered = a.lhs != nullptr || a.rhs != nullptr;
  if (gathered ? a.batch > kMaxGatherBatch : a.batch != 1) return false;
  const int vw = chunk_vector_words(a.spec.bits);
  const int64_t row_words = a.K * a.spec.bits / 32;
  // The kernels address one weight batch's words and groups, and a row's codes, with 32-bit
  // offsets.
  if (a.N * row_words >= (int64_t(1) << 31) || a.K >= (int64_t(1) << 31)) return false;
  return row_words % vw == 0 && is_aligned(a.w, 4 * vw) && is_aligned(a.x, 16);
}

void qmv(const QmmArgs& a) {
  QmvParams p{};
  p.x = a.x, p.w = a.w, p.scales = a.scales, p.biases = a.biases, p.out = a.out;
  p.lhs = a.lhs, p.rhs = a.rhs;
  p.batch = a.batch, p.M = a.M, p.N = a.N, p.K = a.K, p.x_count = a.x_count, p.w_count = a.w_count;
  p.row_words = a.K * a.spec.bits / 32;
  p.groups = a.K / a.spec.group_size;
  p.group_size = a.spec.group_size;
  p.group_shift = __builtin_ctz(static_cast<unsigned>(a.spec.group_size));
  p.mode = a.spec.mode;
  p.per_job = static_cast<int>(kCols / a.M);
  p.gathered = a.lhs != nullptr || a.rhs != nullptr;
  p.err = a.err;
  // Jobs: at most one per run of equal rhs plus one per per_job entries (a bound: blocks
  // past the last job leave at once).
  int64_t jobs = 1;
  if (p.gathered) {
    const int64_t runs = a.sorted ? std::min(a.batch, a.w_count) : a.batch;
    jobs = std::min<int64_t>(a.batch, ceil_div(a.batch, p.per_job) + runs);
  }
  if (jobs < 1) return;
  const int64_t kchunks = a.K / kChunkCodes;
  const int sms = device_props().multiProcessorCount;

  if (a.dtype == float32) {
    const int64_t blocks = std::min<int64_t>(ceil_div(a.N, kWarps), std::max<int64_t>(1, 8 * sms / jobs));
    p.split_chunks = kchunks, p.splits = 1;
    quant::dispatch_format(a.spec, [&]<bool kAffine, int BITS>() {
      qmv_f32_kernel<kAffine, BITS><<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(jobs)), kThreads, 0, stream()>>>(p);
      check_launch("qmv_f32_kernel");
    });
    return;
  }

  // 4-bit codes against at most four activation columns take two chunks a lane per round
  // (U = 2: fewer registers, more blocks an SM); otherwise the kernel's default. Split K
  // over a cluster of up to 8 blocks until the grid has enough blocks an SM (U = 2 at 4-bit:
  // 13/4; otherwise 15/8: the best of bench/qmv_bench.cu's sweep on the H200 over the
  // issue's shapes; more splits only add reductions and barriers, fewer leave the memory
  // system idle) and a block's activations fit the staging budget, keeping at least a round
  // of 16 chunks a block. A block stages its range's activations once when they fit (slices
  // of kSliceBytes otherwise: each slice drains the pipeline).
  const int64_t nblocks = ceil_div(a.N, kBlockRows);
  p.col_slots = static_cast<int>(p.gathered ? p.per_job * a.M : a.M);
  const bool narrow = a.spec.bits == 4 && p.col_slots <= 4;
  const int64_t blocks_per_sm_x8 = narrow ? 26 : 15;
  auto range = [&](int s) { return ceil_div(ceil_div(kchunks, s), int64_t(16)) * 16; };
  const int64_t slice_cap = std::max<int64_t>(16, kSliceBytes / (p.col_slots * 64) / 16 * 16);
  int splits = 1;
  while (splits < 8 && ceil_div(kchunks, int64_t(2 * splits)) >= 16 &&
         (8 * nblocks * jobs * splits < blocks_per_sm_x8 * sms || range(splits) > slice_cap)) {
    splits *= 2;
  }
  if (force_splits > 0) splits = force_splits;
  p.split_chunks = range(splits);
  p.splits = splits;
  p.slice_chunks = static_cast<int>(std::min(p.split_chunks, slice_cap));
  const size_t smem = static_cast<size_t>(p.slice_chunks) * p.col_slots * 64;
  const dim3 grid(static_cast<unsigned>(nblocks * splits), static_cast<unsigned>(jobs));
  if (launch_override) return launch_override(a, p, grid, smem);
  dispatch_device_float_types(a.dtype, "quantized_matmul", [&]<typename T>() {
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      quant::dispatch_format(a.spec, [&]<bool kAffine, int BITS>() {
        if constexpr (BITS == 4) {
          if (narrow) launch(qmv_mma_kernel<T, kAffine, 4, 2>, grid, smem, splits, p);
          else launch(qmv_mma_kernel<T, kAffine, 4>, grid, smem, splits, p);
        } else {
          launch(qmv_mma_kernel<T, kAffine, BITS>, grid, smem, splits, p);
        }
      });
    }
  });
}

} // namespace nuvec::cu
