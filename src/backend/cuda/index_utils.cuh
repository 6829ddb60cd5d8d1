// nuvec: device helpers shared by the GPU indexing families (gather/scatter, take/put along
// an axis, dynamic slice updates): index elements of any integer dtype read as int64 with the
// CPU's rules (src/backend/cpu/index_range.h), element moves by size, and the atomic
// read-modify-write of every element type that the scatter reductions need (the combine
// rules of src/backend/cpu/gather_scatter.cpp; the generic compare-and-swap loop is the device
// library's, device/atomics.cuh). Included by .cu files only.
#pragma once

#include <cuda/std/bit>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/common/strided.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device/atomics.cuh"
#include "backend/cuda/kernel_utils.cuh"

namespace nuvec::cu {

// ---------------------------------------------------------------------------------------
// Index elements

/// Most indexed axes (or window dimensions) a kernel parameter struct carries; primitives
/// with more run on the host (cu::eval_on_host), as they are rare.
constexpr int kMaxIndexAxes = 16;

/// The integer dtype of an index array, as a kernel parameter (read with load_index): one
/// kernel serves every index dtype instead of one instantiation per dtype.
enum class IndexType : int { i8, i16, i32, i64, u8, u16, u32, u64 };

/// IndexType of dtype; throws std::invalid_argument naming op for non-integer dtypes (the
/// CPU kernels' rule).
inline IndexType index_type(Dtype dtype, const char* op) {
  switch (dtype.val()) {
    case Dtype::Val::int8: return IndexType::i8;
    case Dtype::Val::int16: return IndexType::i16;
    case Dtype::Val::int32: return IndexType::i32;
    case Dtype::Val::int64: return IndexType::i64;
    case Dtype::Val::uint8: return IndexType::u8;
    case Dtype::Val::uint16: return IndexType::u16;
    case Dtype::Val::uint32: return IndexType::u32;
    case Dtype::Val::uint64: return IndexType::u64;
    default: break;
  }
  throw std::invalid_argument(std::string("[") + op + "] indices must have an integer dtype.");
}

/// The index element at element offset `off` of p as int64. uint64 values above int64's
/// range become its maximum (out of range for any axis), as cpu::index_value does.
__device__ __forceinline__ int64_t load_index(const void* p, int64_t off, IndexType t) {
  switch (t) {
    case IndexType::i8: return static_cast<const int8_t*>(p)[off];
    case IndexType::i16: return static_cast<const int16_t*>(p)[off];
    case IndexType::i32: return static_cast<const int32_t*>(p)[off];
    case IndexType::i64: return static_cast<const int64_t*>(p)[off];
    case IndexType::u8: return static_cast<const uint8_t*>(p)[off];
    case IndexType::u16: return static_cast<const uint16_t*>(p)[off];
    case IndexType::u32: return static_cast<const uint32_t*>(p)[off];
    case IndexType::u64: {
      uint64_t v = static_cast<const uint64_t*>(p)[off];
      return v > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
    }
  }
  return 0;
}

/// Makes an index on an axis of size n non-negative (v + n for negative v) and says whether
/// it lies in [-n, n). Where it returns false the CPU throws std::out_of_range; the GPU
/// cannot throw from a kernel without synchronising, so callers clamp reads and skip writes
/// instead (never touching memory outside the array).
__device__ __forceinline__ bool wrap_index(int64_t& v, int64_t n) {
  if (v < -n || v >= n) return false;
  if (v < 0) v += n;
  return true;
}

namespace detail {

// Writes idx (any integer dtype, any layout, walked by ix) as row-major int64 values. (A
// template only so that every .cu file including this header can share one definition.)
template <typename Out>
__global__ void load_indices_kernel(
    const void* idx,
    IndexType type,
    StridedIndexer<1> ix,
    Out* out,
    int64_t n) {
  NUVEC_CUDA_KERNEL_LOOP(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    out[i] = load_index(idx, off[0], type);
  }
}

} // namespace detail

/// The elements of inputs[first], ..., inputs[first + count - 1] (integer index arrays of
/// one size n, any dtypes and layouts) as one scratch buffer of count * n int64 values, array
/// j's in row-major order at [j * n, (j + 1) * n). Null when count or n is 0. Throws
/// std::invalid_argument naming op for a non-integer dtype.
inline const int64_t* load_indices(
    const std::vector<array>& inputs,
    size_t first,
    size_t count,
    const char* op) {
  if (count == 0) return nullptr;
  const int64_t n = static_cast<int64_t>(inputs[first].size());
  for (size_t j = 0; j < count; ++j) index_type(inputs[first + j].dtype(), op);
  if (n == 0) return nullptr;
  auto* out = static_cast<int64_t*>(scratch(sizeof(int64_t) * count * size_t(n)));
  for (size_t j = 0; j < count; ++j) {
    array idx = inputs[first + j];
    auto plan = collapse_dims(idx.shape(), {idx.strides()});
    if (plan.shape.size() > size_t(kMaxDims)) {
      // Too many unmergeable dimensions for the indexer: read a row-major copy instead.
      idx = contiguous_copy(idx);
      retain(idx);
      plan = collapse_dims(idx.shape(), {idx.strides()});
    }
    detail::load_indices_kernel<int64_t><<<grid_for(size_t(n), 256), 256, 0, stream()>>>(
        device_ptr(idx), index_type(idx.dtype(), op), make_indexer<1>(plan, op), out + j * n, n);
    check_launch("load_indices_kernel");
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Moving elements by size

/// The unsigned integer type of B bytes: kernels that only move elements (gathers,
/// overwriting scatters, slice updates) are instantiated per element size, not per dtype.
template <int B>
using bits_t = std::conditional_t<
    B == 1,
    uint8_t,
    std::conditional_t<B == 2, uint16_t, std::conditional_t<B == 4, uint32_t, uint64_t>>>;

/// Calls f.template operator()<U>() with U = bits_t<itemsize> (itemsize 1, 2, 4 or 8).
template <typename F>
decltype(auto) dispatch_bits(size_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 8: return f.template operator()<uint64_t>();
  }
  throw std::invalid_argument("[cuda] element size must be 1, 2, 4 or 8 bytes.");
}

// ---------------------------------------------------------------------------------------
// Scatter reductions

/// How a reducing scatter combines an update u with the value already at its position.
enum class ScatterOp : int { Sum, Prod, Max, Min };

/// Whether v is NaN (either part for complex; never for integers and bool), as the CPU's
/// is_nan_element.
template <typename T>
__device__ __forceinline__ bool is_nan_dev(const T& v) {
  if constexpr (is_complex_device_v<T>) {
    return v.real() != v.real() || v.imag() != v.imag();
  } else if constexpr (is_half_device_v<T>) {
    float f = static_cast<float>(v);
    return f != f;
  } else if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}

/// a < b as the CPU compares elements: complex lexicographically (include/nuvec/types/
/// complex.h), half types through float.
template <typename T>
__device__ __forceinline__ bool less_dev(const T& a, const T& b) {
  if constexpr (is_complex_device_v<T>) {
    return a.real() < b.real() || (a.real() == b.real() && a.imag() < b.imag());
  } else if constexpr (is_half_device_v<T>) {
    return static_cast<float>(a) < static_cast<float>(b);
  } else {
    return a < b;
  }
}

/// slot combined with u by op, exactly as the CPU's combine(): sums and products wrap in
/// the element type (integers) or round to it (half types compute in float); bool sums are
/// "or", products "and"; max/min let a NaN update win and keep a NaN slot.
template <typename T>
__device__ __forceinline__ T combine_dev(ScatterOp op, T slot, T u) {
  switch (op) {
    case ScatterOp::Sum:
      if constexpr (std::is_same_v<T, bool>) {
        return slot || u;
      } else if constexpr (is_complex_device_v<T>) {
        return T(slot.real() + u.real(), slot.imag() + u.imag());
      } else if constexpr (is_half_device_v<T>) {
        return T(static_cast<float>(slot) + static_cast<float>(u));
      } else {
        return static_cast<T>(slot + u);
      }
    case ScatterOp::Prod:
      if constexpr (std::is_same_v<T, bool>) {
        return slot && u;
      } else if constexpr (is_complex_device_v<T>) {
        // The textbook product (the host's std::complex differs only for infinities).
        return T(slot.real() * u.real() - slot.imag() * u.imag(),
                 slot.real() * u.imag() + slot.imag() * u.real());
      } else if constexpr (is_half_device_v<T>) {
        return T(static_cast<float>(slot) * static_cast<float>(u));
      } else {
        return static_cast<T>(slot * u);
      }
    case ScatterOp::Max:
      return (is_nan_dev(u) || (!is_nan_dev(slot) && less_dev(slot, u))) ? u : slot;
    case ScatterOp::Min:
      return (is_nan_dev(u) || (!is_nan_dev(slot) && less_dev(u, slot))) ? u : slot;
  }
  return slot;
}

// bfloat16 atomicAdd exists from sm_80 on (the CAS loop serves older targets).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
inline constexpr bool kNativeBf16Add = false;
#else
inline constexpr bool kNativeBf16Add = true;
#endif

/// *addr = combine_dev(op, *addr, u), atomically. Uses the hardware's atomics where they
/// compute the same result (sums of 32/64-bit integers, float, double and the half types;
/// max/min of 32/64-bit integers; complex sums part by part) and CAS loops otherwise.
template <typename T>
__device__ __forceinline__ void atomic_combine(T* addr, T u, ScatterOp op) {
  if (op == ScatterOp::Sum) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t> ||
                  std::is_same_v<T, __half> ||
                  (std::is_same_v<T, __nv_bfloat16> && kNativeBf16Add)) {
      atomicAdd(addr, u);
      return;
    } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
      // Two's complement: the unsigned sum wraps exactly as the signed one.
      atomicAdd(reinterpret_cast<unsigned long long*>(addr), static_cast<unsigned long long>(u));
      return;
    } else if constexpr (is_complex_device_v<T>) {
      float* parts = reinterpret_cast<float*>(addr);
      atomicAdd(parts, u.real());
      atomicAdd(parts + 1, u.imag());
      return;
    }
  } else if (op == ScatterOp::Max || op == ScatterOp::Min) {
    const bool mx = op == ScatterOp::Max;
    if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>) {
      mx ? atomicMax(addr, u) : atomicMin(addr, u);
      return;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      auto* p = reinterpret_cast<long long*>(addr);
      mx ? atomicMax(p, static_cast<long long>(u)) : atomicMin(p, static_cast<long long>(u));
      return;
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      auto* p = reinterpret_cast<unsigned long long*>(addr);
      auto v = static_cast<unsigned long long>(u);
      mx ? atomicMax(p, v) : atomicMin(p, v);
      return;
    }
  }
  atomic_update(addr, [&](T slot) { return combine_dev(op, slot, u); });
}

} // namespace nuvec::cu
