// nuvec: the decode-shaped quantized products (qmm.h's qmv: at most 8 activation rows per
// batch entry, W transposed), meant to be bound by the weight read. float16/bfloat16 run on
// tensor cores with the operands swapped: a 16-row slice of W is the mma's A operand
// (dequantized into T in registers, as MLX's GPU kernels round it), up to 8 activation rows
// (of one batch entry, or of entries sharing an expert) are its n8 B operand, so each weight
// word is read once for all of them; float32 accumulators. float32 runs a CUDA-core kernel
// (tf32 would round the activations). Gathered jobs: runs of equal rhs, found in-kernel.
// H200 status (bench/gpu_compare.py --only quantized): W4 14336x4096 M=1 takes 28 us in the
// kernel (ncu), 0.25 of the copy bandwidth, latency-bound (0.45 issued warps a scheduler).
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

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockRows = 16 * kWarps; ///< rows of W (output columns n) per block
constexpr int kCols = 8;                ///< activation rows per job: the mma's n8
constexpr int kSliceChunks = 64;        ///< chunks of 32 codes staged in shared memory at once
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
  int64_t split_chunks; ///< chunks of K per block of a cluster (a multiple of 4)
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

/// Loads the BITS words of one chunk (aligned to its vector width: the launcher checks the
/// row length) through the read-only path, or zeros.
template <int BITS>
__device__ __forceinline__ void load_chunk(uint32_t (&w)[BITS], const uint32_t* src, bool valid) {
  if constexpr (BITS % 4 == 0) {
#pragma unroll
    for (int i = 0; i < BITS / 4; ++i) {
      const uint4 v = valid ? __ldg(reinterpret_cast<const uint4*>(src) + i) : make_uint4(0, 0, 0, 0);
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (BITS % 2 == 0) {
#pragma unroll
    for (int i = 0; i < BITS / 2; ++i) {
      const uint2 v = valid ? __ldg(reinterpret_cast<const uint2*>(src) + i) : make_uint2(0, 0);
      w[2 * i] = v.x, w[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < BITS; ++i) w[i] = valid ? __ldg(src + i) : 0u;
  }
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

/// chunk_params as group_raw's bits (one register a group), for the tensor-core kernel.
template <typename T>
__device__ __forceinline__ void chunk_raw(
    const QmvParams& p, const void* scales, const void* biases, int64_t row_group, int q, bool valid,
    uint32_t (&g)[2]) {
  if (!valid) {
    g[0] = g[1] = 0u;
    return;
  }
  const int64_t i = row_group + ((q * kChunkCodes) >> p.group_shift);
  g[0] = quant::group_raw<T>(p.mode, scales, biases, i);
  g[1] = p.group_size == 16 ? quant::group_raw<T>(p.mode, scales, biases, i + 1) : g[0];
}

/// Raw bits of element k of 32 16-bit elements held in 16 words.
__device__ __forceinline__ uint32_t half_bits(const uint32_t (&e)[16], int k) {
  return (e[k / 2] >> (16 * (k % 2))) & 0xffffu;
}

/// Tensor-core qmv: block (n block, K split) x job; warp w owns rows n0 + 16w .. + 15 of W
/// and lanes (g, t) = (lane / 4, lane % 4) hold rows g and g + 8. Lane t of a quad reads
/// chunks 4u + t of its two rows (coalesced 16-byte loads), so its A fragments at step s are
/// pairs 2s, 2s + 1 of its chunk; the activations are staged in shared memory in that pair
/// order ([chunk][column] 64 bytes, 16-byte segments swizzled by chunk so a quarter warp's
/// reads hit distinct bank groups), column g being lane g's B. The weight read is software
/// pipelined: a round covers 4U chunks, and each chunk's words for the next round are
/// requested as soon as this round's are decoded, so a warp always has a round of loads in
/// flight (measured: one round per block left the H200 at 0.21 of the copy bandwidth,
/// latency-bound). A cluster of `splits` blocks covers K; their partial sums meet in
/// distributed shared memory and each block writes 1/splits of the tile.
template <typename T, bool kAffine, int BITS>
__global__ void __launch_bounds__(kThreads, 4) qmv_mma_kernel(const QmvParams p) {
  using Dec = quant::ChunkDecoder<T, kAffine, BITS>;
  constexpr int U = BITS >= 5 ? 2 : 4; // chunks a lane has in flight per row and round
  constexpr int kRound = 4 * U;        // chunks per round
  extern __shared__ uint4 xs[];        // [chunk][column slot][4 segments]
  __shared__ float part[kBlockRows * kCols];
  __shared__ JobSlots job;
  setup_job(p, job);
  if (job.cols == 0) return; // the whole cluster shares the job

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t nb = blockIdx.x / p.splits;
  const int split = blockIdx.x % p.splits;
  const int64_t row0 = nb * kBlockRows + warp * 16 + g, row1 = row0 + 8;
  const bool v0 = row0 < p.N, v1 = row1 < p.N;
  const int64_t e = job.expert;
  const uint32_t* w = p.w + e * p.N * p.row_words;
  const size_t pelt = p.mode == QuantMode::Affine ? sizeof(T) : 1;
  const void* scales = static_cast<const char*>(p.scales) + e * p.N * p.groups * pelt;
  const void* biases = p.biases ? static_cast<const char*>(p.biases) + e * p.N * p.groups * pelt : nullptr;
  const T* x = static_cast<const T*>(p.x);
  const int cs = p.col_slots, cols = job.cols;

  const int kchunks = static_cast<int>(p.K / kChunkCodes);
  const int q_begin = split * static_cast<int>(p.split_chunks);
  const int q_end = q_begin + p.split_chunks < kchunks ? q_begin + static_cast<int>(p.split_chunks) : kchunks;
  // Row bases hoisted out of the loop (64-bit products once).
  const uint32_t* w0 = w + row0 * p.row_words;
  const uint32_t* w1 = w + row1 * p.row_words;
  const int64_t g0 = row0 * p.groups, g1 = row1 * p.groups;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  uint32_t wr[U][2][BITS];
  uint32_t gp[U][2][2];
  // Requests chunk u of the round starting at slice chunk r0 (nq chunks in the slice).
  auto request = [&](int u, int qs, int r0, int nq) {
    const int qi = r0 + 4 * u + t;
    const bool vq = qi < nq;
    const int q = qs + qi;
    load_chunk<BITS>(wr[u][0], w0 + q * BITS, vq && v0);
    load_chunk<BITS>(wr[u][1], w1 + q * BITS, vq && v1);
    chunk_raw<T>(p, scales, biases, g0, q, vq && v0, gp[u][0]);
    chunk_raw<T>(p, scales, biases, g1, q, vq && v1, gp[u][1]);
  };

  for (int qs = q_begin; qs < q_end; qs += kSliceChunks) {
    const int nq = q_end - qs < kSliceChunks ? q_end - qs : kSliceChunks;
    // The first round's weights are requested before the staging barrier, so their latency
    // overlaps the activations' copy.
#pragma unroll
    for (int u = 0; u < U; ++u) request(u, qs, 0, nq);
    __syncthreads(); // the previous slice is consumed
    for (int i = threadIdx.x; i < nq * cols; i += kThreads) {
      const int qi = i / cols, c = i % cols;
      const uint4* src = reinterpret_cast<const uint4*>(x + job.x_row[c] * p.K + (qs + qi) * kChunkCodes);
      uint32_t el[16], pairs[16];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint4 v = __ldg(src + k);
        el[4 * k] = v.x, el[4 * k + 1] = v.y, el[4 * k + 2] = v.z, el[4 * k + 3] = v.w;
      }
#pragma unroll
      for (int q = 0; q < 16; ++q) pairs[q] = half_bits(el, Dec::code(q, 0)) | (half_bits(el, Dec::code(q, 1)) << 16);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        xs[(qi * cs + c) * 4 + (k ^ (qi & 3))] = make_uint4(pairs[4 * k], pairs[4 * k + 1], pairs[4 * k + 2], pairs[4 * k + 3]);
      }
    }
    __syncthreads();

    for (int r0 = 0; r0 < nq; r0 += kRound) {
      const bool more = r0 + kRound < nq;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (r0 + 4 * u >= nq) break; // warp-uniform: the last round's tail
        const int qi = r0 + 4 * u + t;
        uint32_t a0[16], a1[16], xb[16];
        Dec::decode(wr[u][0], gp[u][0], p.mode, a0);
        Dec::decode(wr[u][1], gp[u][1], p.mode, a1);
        if (more) request(u, qs, r0 + kRound, nq); // this chunk's registers are free again
        if (qi < nq && g < cols) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const uint4 v = xs[(qi * cs + g) * 4 + (k ^ (qi & 3))];
            xb[4 * k] = v.x, xb[4 * k + 1] = v.y, xb[4 * k + 2] = v.z, xb[4 * k + 3] = v.w;
          }
        } else {
#pragma unroll
          for (int k = 0; k < 16; ++k) xb[k] = 0u;
        }
#pragma unroll
        for (int s = 0; s < 8; ++s) {
          const uint32_t a[4] = {a0[2 * s], a1[2 * s], a0[2 * s + 1], a1[2 * s + 1]};
          const uint32_t b[2] = {xb[2 * s], xb[2 * s + 1]};
          mma_m16n8k16<T>(acc, a, b);
        }
      }
    }
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

  // Split K over a cluster of up to 8 blocks until the grid covers the device about three
  // times (small N, the decode case), keeping at least two rounds of 16 chunks a block (the
  // pipeline needs rounds to overlap; blocks of one round were latency-bound on the H200).
  const int64_t nblocks = ceil_div(a.N, kBlockRows);
  int splits = 1;
  while (splits < 8 && nblocks * jobs * splits < 3 * sms && kchunks / (2 * splits) >= 32) splits *= 2;
  p.split_chunks = ceil_div(ceil_div(kchunks, splits), 4) * 4;
  p.splits = splits;
  p.col_slots = static_cast<int>(p.gathered ? p.per_job * a.M : a.M);
  const size_t smem = static_cast<size_t>(std::min<int64_t>(p.split_chunks, kSliceChunks)) * p.col_slots * 64;
  const dim3 grid(static_cast<unsigned>(nblocks * splits), static_cast<unsigned>(jobs));
  dispatch_device_float_types(a.dtype, "quantized_matmul", [&]<typename T>() {
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      quant::dispatch_format(a.spec, [&]<bool kAffine, int BITS>() {
        launch(qmv_mma_kernel<T, kAffine, BITS>, grid, smem, splits, p);
      });
    }
  });
}

} // namespace nuvec::cu
