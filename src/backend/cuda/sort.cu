// nuvec: GPU kernels of Sort, ArgSort, Partition and ArgPartition. Every line along the
// axis is sorted by an order-preserving unsigned key (NaNs last as in NumPy, -0 tied with +0
// for argsort, complex lexicographic) with CUB's stable LSD radix sort; the line number rides
// in the key's high bits (or a second stable pass sorts by line), so one global sort handles
// any number and length of lines. Ties keep ascending positions, as the CPU's
// std::stable_sort and radix sort do (src/backend/cpu/sort.cpp). A partition is returned fully
// sorted: the same (value with NaNs last, index) order src/backend/cpu/partition.cpp
// partitions by, so partition and argpartition agree, as on the CPU.
#include <cub/device/device_radix_sort.cuh>
#include <cuda/std/bit>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/kernel_utils.cuh"
#include "primitives/primitives.h"
#include "primitives/partition.h"

namespace nuvec {

namespace {

using cu::complex64;
using cu::StridedIndexer;

constexpr unsigned kThreads = 256;

// ---------------------------------------------------------------------------------------
// Order-preserving keys

/// Significant bits of T's key: keys of narrow types sort in fewer radix passes.
template <typename T>
constexpr int key_bits() {
  if constexpr (cu::is_complex_device_v<T>) {
    return 64;
  } else {
    return 8 * static_cast<int>(sizeof(T));
  }
}

/// Float bits u made unsigned-ordered: negatives (sign set) reversed below the positives.
template <typename U>
__host__ __device__ __forceinline__ U float_key(U u, U sign) {
  return (u & sign) ? static_cast<U>(~u) : static_cast<U>(u | sign);
}

template <typename U>
__host__ __device__ __forceinline__ U float_unkey(U k, U sign) {
  return (k & sign) ? static_cast<U>(k ^ sign) : static_cast<U>(~k);
}

/// The bits of a float as the unsigned type B of its size.
template <typename B, typename F>
__host__ __device__ __forceinline__ B bits_of(F v) {
  return cuda::std::bit_cast<B>(v);
}

/// The sort key of v: unsigned, in key_bits<T>() low bits, ordered as the CPU's
/// nan_last_less. Every NaN maps to the key of the positive quiet NaN (above +inf), so NaNs
/// tie and go last; with zero_ties, -0 maps to +0 so that the two tie (argsort keeps their
/// positions, as std::stable_sort with `<` does). Complex keys put the real part's key above
/// the imaginary part's, zeros always tied (the lexicographic `<` ties them in both parts).
template <typename T>
__host__ __device__ __forceinline__ uint64_t encode_key(T v, bool zero_ties) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? 1u : 0u;
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    return static_cast<uint64_t>(v);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    constexpr U sign = U(1) << (8 * sizeof(T) - 1);
    return static_cast<uint64_t>(static_cast<U>(static_cast<U>(v) ^ sign));
  } else if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    constexpr bool fp16 = std::is_same_v<T, __half>;
    constexpr uint16_t inf = fp16 ? 0x7c00 : 0x7f80, qnan = fp16 ? 0x7e00 : 0x7fc0;
    uint16_t u = bits_of<uint16_t>(v);
    if ((u & 0x7fff) > inf) {
      u = qnan;
    } else if (zero_ties && (u & 0x7fff) == 0) {
      u = 0;
    }
    return float_key<uint16_t>(u, 0x8000);
  } else if constexpr (std::is_same_v<T, float>) {
    uint32_t u = v != v ? 0x7fc00000u : (zero_ties && v == 0.0f ? 0u : bits_of<uint32_t>(v));
    return float_key<uint32_t>(u, 0x80000000u);
  } else if constexpr (std::is_same_v<T, double>) {
    uint64_t u = v != v ? 0x7ff8000000000000ull
                        : (zero_ties && v == 0.0 ? 0ull
                                                 : bits_of<uint64_t>(v));
    return float_key<uint64_t>(u, 0x8000000000000000ull);
  } else {
    static_assert(std::is_same_v<T, complex64>);
    float re = v.real(), im = v.imag();
    if (re != re || im != im) return ~0ull; // above every number: the largest real key
    // (+inf's, 0xff800000) leaves the top word below all ones
    uint32_t kr = float_key<uint32_t>(re == 0.0f ? 0u : bits_of<uint32_t>(re), 0x80000000u);
    uint32_t ki = float_key<uint32_t>(im == 0.0f ? 0u : bits_of<uint32_t>(im), 0x80000000u);
    return (static_cast<uint64_t>(kr) << 32) | ki;
  }
}

/// The value of key k (encode_key's inverse, NaNs coming back as the quiet NaN). Not for
/// complex64, whose keys tie -0 and +0 (its sorted values are gathered from the input).
template <typename T>
__host__ __device__ __forceinline__ T decode_key(uint64_t k) {
  if constexpr (std::is_same_v<T, bool>) {
    return k != 0;
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    return static_cast<T>(k);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    constexpr U sign = U(1) << (8 * sizeof(T) - 1);
    return static_cast<T>(static_cast<U>(static_cast<U>(k) ^ sign));
  } else if constexpr (std::is_same_v<T, __half>) {
    return cuda::std::bit_cast<T>(float_unkey<uint16_t>(static_cast<uint16_t>(k), 0x8000));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return cuda::std::bit_cast<T>(float_unkey<uint16_t>(static_cast<uint16_t>(k), 0x8000));
  } else if constexpr (std::is_same_v<T, float>) {
    return cuda::std::bit_cast<T>(float_unkey<uint32_t>(static_cast<uint32_t>(k), 0x80000000u));
  } else {
    static_assert(std::is_same_v<T, double>);
    return cuda::std::bit_cast<T>(float_unkey<uint64_t>(k, 0x8000000000000000ull));
  }
}

// ---------------------------------------------------------------------------------------
// Kernels. Element e is the row-major index over the input's shape with the sort axis moved
// last, so line e / n holds positions e % n; `ix` / `ox` give the input's / output's element
// offsets of e.

/// keys[e] = key of in[e], with the line number above bit `line_shift` when it is >= 0.
template <typename T>
__global__ void encode_keys_kernel(
    const T* in,
    StridedIndexer<1> ix,
    uint64_t* keys,
    int64_t total,
    int64_t n,
    int line_shift,
    bool zero_ties) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t off[1];
    ix.offsets(e, off);
    uint64_t k = encode_key<T>(in[off[0]], zero_ties);
    if (line_shift >= 0) k |= static_cast<uint64_t>(e / n) << line_shift;
    keys[e] = k;
  }
}

/// out[e's offset] = the value of the low key bits of keys[e] (mask).
template <typename T>
__global__ void decode_keys_kernel(
    const uint64_t* keys,
    uint64_t mask,
    T* out,
    StridedIndexer<1> ox,
    int64_t total) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t off[1];
    ox.offsets(e, off);
    out[off[0]] = decode_key<T>(keys[e] & mask);
  }
}

/// pos[e] = e % n (a position within its line), or e itself when n is 0.
template <typename I>
__global__ void fill_positions_kernel(I* pos, int64_t total, int64_t n) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    pos[e] = static_cast<I>(n > 0 ? e % n : e);
  }
}

/// line[e] = g[e] / n: the line of each element of a key-sorted permutation, the key of the
/// second (stable) pass that regroups the lines.
template <typename I>
__global__ void line_of_kernel(const I* g, I* line, int64_t total, int64_t n) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    line[e] = static_cast<I>(static_cast<int64_t>(g[e]) / n);
  }
}

/// out[e's offset] = pos[e] % n (n > 0) or pos[e]: the sorted positions as argsort's uint32.
template <typename I>
__global__ void write_positions_kernel(
    const I* pos,
    uint32_t* out,
    StridedIndexer<1> ox,
    int64_t total,
    int64_t n) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t off[1];
    ox.offsets(e, off);
    int64_t p = static_cast<int64_t>(pos[e]);
    out[off[0]] = static_cast<uint32_t>(n > 0 ? p % n : p);
  }
}

/// out[e's offset] = in[g[e]'s offset]: sorted values gathered through the permutation g
/// (for the 8-byte types, whose 64-bit keys leave no room for the line number).
template <typename U, typename I>
__global__ void gather_sorted_kernel(
    const I* g,
    const U* in,
    StridedIndexer<1> ix,
    U* out,
    StridedIndexer<1> ox,
    int64_t total) {
  NUVEC_CUDA_KERNEL_LOOP(e, total) {
    int64_t src[1], dst[1];
    ix.offsets(static_cast<int64_t>(g[e]), src);
    ox.offsets(e, dst);
    out[dst[0]] = in[src[0]];
  }
}

// ---------------------------------------------------------------------------------------
// CUB calls (temporary storage from the node's scratch)

/// Sorts n keys by their bits [0, end_bit) into out (CUB's stable LSD radix sort).
template <typename K>
void radix_sort_keys(const K* in, K* out, int64_t n, int end_bit) {
  size_t bytes = 0;
  NUVEC_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(
      nullptr, bytes, in, out, n, 0, end_bit, cu::stream()));
  void* tmp = cu::scratch(std::max<size_t>(bytes, 16));
  NUVEC_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(
      tmp, bytes, in, out, n, 0, end_bit, cu::stream()));
}

/// Sorts n (key, value) pairs by the keys' bits [0, end_bit), stably (equal keys keep their
/// order), into kout / vout.
template <typename K, typename V>
void radix_sort_pairs(const K* kin, K* kout, const V* vin, V* vout, int64_t n, int end_bit) {
  size_t bytes = 0;
  NUVEC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, kin, kout, vin, vout, n, 0, end_bit, cu::stream()));
  void* tmp = cu::scratch(std::max<size_t>(bytes, 16));
  NUVEC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      tmp, bytes, kin, kout, vin, vout, n, 0, end_bit, cu::stream()));
}

/// Node scratch for count elements of T.
template <typename T>
T* scratch_of(int64_t count) {
  return static_cast<T*>(cu::scratch(sizeof(T) * static_cast<size_t>(count)));
}

// ---------------------------------------------------------------------------------------
// Planning

/// The input walked line by line: its shape with the axis moved last, the input's and the
/// row-contiguous output's strides in that order, the line length and count.
struct LinePlan {
  Shape shape;
  Strides in_strides, out_strides;
  int64_t n = 0, lines = 0, total = 0;
};

/// The LinePlan of in along axis.
LinePlan line_plan(const array& in, int axis) {
  LinePlan p;
  const Strides rs = row_strides(in.shape());
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    if (d == axis) continue;
    p.shape.push_back(in.shape(d));
    p.in_strides.push_back(in.strides()[d]);
    p.out_strides.push_back(rs[d]);
  }
  p.shape.push_back(in.shape(axis));
  p.in_strides.push_back(in.strides()[axis]);
  p.out_strides.push_back(rs[axis]);
  p.n = in.shape(axis);
  p.total = static_cast<int64_t>(in.size());
  p.lines = p.n > 0 ? p.total / p.n : 0;
  return p;
}

/// Sorts (indices = false) or argsorts (true) every line of `input` along axis into out
/// (row-contiguous, input's shape; uint32 for argsort). Any dtype and layout.
template <bool indices>
void sort_lines(const array& input, array& out, int axis, const char* op) {
  void* dst = cu::alloc_output(out);
  if (out.size() == 0) return;
  array in = input;
  LinePlan p = line_plan(in, axis);
  auto in_plan = collapse_dims(p.shape, {p.in_strides});
  if (in_plan.shape.size() > size_t(cu::kMaxDims)) {
    // Too many unmergeable dimensions to walk: a row-major copy merges into at most three.
    in = cu::contiguous_copy(input);
    cu::retain(in);
    p = line_plan(in, axis);
    in_plan = collapse_dims(p.shape, {p.in_strides});
  }
  // Row-major strides with one dimension moved merge into at most three dimensions.
  const auto ix = cu::make_indexer<1>(in_plan, op);
  const auto ox = cu::make_indexer<1>(collapse_dims(p.shape, {p.out_strides}), op);
  const int64_t total = p.total, n = p.n;
  const int line_bits = p.lines > 1 ? std::bit_width(static_cast<uint64_t>(p.lines - 1)) : 0;
  const unsigned blocks = cu::grid_for(static_cast<size_t>(total), kThreads);
  cudaStream_t st = cu::stream();

  cu::dispatch_device_types(in.dtype(), [&]<typename T>() {
    constexpr int kb = key_bits<T>();
    const T* src = cu::device_ptr<T>(in);
    uint64_t* keys = scratch_of<uint64_t>(total);
    uint64_t* keys_out = scratch_of<uint64_t>(total);

    if constexpr (kb <= 32) {
      // One pass: the line number above the key keeps lines apart and in order.
      if (kb + line_bits > 64) {
        // Only with more than 2^32 lines of 32-bit keys: beyond any H200's memory for the
        // key buffers, so no second path is compiled for it.
        throw std::invalid_argument(
            std::string("[") + op + "] the GPU sort handles at most 2^" +
            std::to_string(64 - kb) + " lines of " + std::to_string(kb) + "-bit keys; got " +
            std::to_string(p.lines) + ".");
      }
      encode_keys_kernel<T><<<blocks, kThreads, 0, st>>>(src, ix, keys, total, n, kb, indices);
      cu::check_launch("encode_keys_kernel");
      const int end_bit = kb + line_bits;
      if constexpr (indices) {
        uint32_t* pos = scratch_of<uint32_t>(total);
        uint32_t* pos_out = scratch_of<uint32_t>(total);
        fill_positions_kernel<uint32_t><<<blocks, kThreads, 0, st>>>(pos, total, n);
        cu::check_launch("fill_positions_kernel");
        radix_sort_pairs<uint64_t, uint32_t>(keys, keys_out, pos, pos_out, total, end_bit);
        write_positions_kernel<uint32_t><<<blocks, kThreads, 0, st>>>(
            pos_out, static_cast<uint32_t*>(dst), ox, total, 0);
        cu::check_launch("write_positions_kernel");
      } else {
        radix_sort_keys<uint64_t>(keys, keys_out, total, end_bit);
        const uint64_t mask = (uint64_t(1) << kb) - 1;
        decode_keys_kernel<T><<<blocks, kThreads, 0, st>>>(
            keys_out, mask, static_cast<T*>(dst), ox, total);
        cu::check_launch("decode_keys_kernel");
      }
    } else {
      // 64-bit keys: sort (key, element) pairs, then regroup lines with a stable sort by
      // line number, which keeps each line's key order (and ties in element order).
      encode_keys_kernel<T><<<blocks, kThreads, 0, st>>>(src, ix, keys, total, n, -1, indices);
      cu::check_launch("encode_keys_kernel");
      auto run = [&]<typename I>() {
        I* g = scratch_of<I>(total);
        I* g1 = scratch_of<I>(total);
        fill_positions_kernel<I><<<blocks, kThreads, 0, st>>>(g, total, 0);
        cu::check_launch("fill_positions_kernel");
        radix_sort_pairs<uint64_t, I>(keys, keys_out, g, g1, total, 64);
        if (p.lines > 1) {
          I* line = scratch_of<I>(total);
          I* line_out = scratch_of<I>(total);
          line_of_kernel<I><<<blocks, kThreads, 0, st>>>(g1, line, total, n);
          cu::check_launch("line_of_kernel");
          radix_sort_pairs<I, I>(line, line_out, g1, g, total, line_bits);
          std::swap(g, g1); // g1: the final permutation
        }
        if constexpr (indices) {
          write_positions_kernel<I><<<blocks, kThreads, 0, st>>>(
              g1, static_cast<uint32_t*>(dst), ox, total, n);
          cu::check_launch("write_positions_kernel");
        } else {
          static_assert(sizeof(T) == 8);
          gather_sorted_kernel<uint64_t, I><<<blocks, kThreads, 0, st>>>(
              g1, reinterpret_cast<const uint64_t*>(src), ix,
              static_cast<uint64_t*>(dst), ox, total);
          cu::check_launch("gather_sorted_kernel");
        }
      };
      if (static_cast<uint64_t>(total) <= std::numeric_limits<uint32_t>::max()) {
        run.template operator()<uint32_t>();
      } else {
        run.template operator()<uint64_t>();
      }
    }
  });
}

} // namespace

void Sort::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  sort_lines<false>(inputs[0], outputs[0], axis_, "sort");
}

void ArgSort::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  sort_lines<true>(inputs[0], outputs[0], axis_, "argsort");
}

// Any arrangement with the kth element in place is a partition; the fully sorted one is
// the CPU's (value, index) order, so partition and argpartition agree element for element.
void Partition::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  sort_lines<false>(inputs[0], outputs[0], axis_, "partition");
}

void ArgPartition::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  sort_lines<true>(inputs[0], outputs[0], axis_, "argpartition");
}

} // namespace nuvec
