// nuvec: vector loads and stores of the CUDA kernels: N elements moved by one instruction
// (up to 16 bytes), the unit every memory-bound kernel (element-wise, reduce, softmax and the
// fused row kernels) is written in. Host-free device code.
#pragma once

#include <cstdint>
#include <cstring>

namespace nuvec::cu {

/// The unsigned integer type of `Bytes` bytes (uint4 for 16), the unit one load moves.
template <int Bytes>
struct RawWord;
template <>
struct RawWord<1> { using type = uint8_t; };
template <>
struct RawWord<2> { using type = uint16_t; };
template <>
struct RawWord<4> { using type = uint32_t; };
template <>
struct RawWord<8> { using type = uint2; };
template <>
struct RawWord<16> { using type = uint4; };

/// N elements of T moved by one load or store (element k is v[k]).
template <typename T, int N>
struct Vec {
  T v[N];
  __device__ __forceinline__ T& operator[](int k) { return v[k]; }
  __device__ __forceinline__ const T& operator[](int k) const { return v[k]; }
};

/// Elements of one 16-byte vector of the widest of the given element types (4 float32, 8
/// halves, 2 float64 or complex64, 16 bytes or bools): a kernel reading and writing these
/// types moves vectors of this many elements.
template <typename... Ts>
constexpr int vec_elems() {
  size_t widest = 0;
  ((widest = sizeof(Ts) > widest ? sizeof(Ts) : widest), ...);
  return widest >= 16 ? 1 : static_cast<int>(16 / widest);
}

/// Elements of T in one 16-byte vector (vec_elems<T>()).
template <typename T>
inline constexpr int kVec = vec_elems<T>();

/// Which cache path a load takes: `Default` (coherent), or `ReadOnly` (ld.global.nc, the
/// read-only data cache; only for data no thread of the kernel writes).
enum class Load { Default, ReadOnly };

/// Loads N elements at p, which must be aligned to N * sizeof(T) bytes, as one instruction.
template <int N, Load kLoad = Load::Default, typename T>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  using W = typename RawWord<int(N * sizeof(T))>::type;
  W w;
  if constexpr (kLoad == Load::ReadOnly) w = __ldg(reinterpret_cast<const W*>(p));
  else w = *reinterpret_cast<const W*>(p);
  Vec<T, N> r;
  memcpy(&r, &w, sizeof(W)); // register moves only
  return r;
}

/// Stores N elements at p (aligned to N * sizeof(T) bytes) as one instruction.
template <int N, typename T>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  using W = typename RawWord<int(N * sizeof(T))>::type;
  W w;
  memcpy(&w, &v, sizeof(W));
  *reinterpret_cast<W*>(p) = w;
}

/// N elements of T held as the raw words one load moves, so that two 16-bit elements share a
/// 32-bit register (a Vec<T, N> of halves may give each element its own register: a row of
/// 4 bf16 vectors then takes 32 registers instead of 16, which spills in the 32-40 register
/// budgets of the full-occupancy row kernels). Read element j with element(); j must be a
/// compile-time constant after unrolling, so the read is a register extract.
template <typename T, int N>
struct Packed {
  typename RawWord<int(N * sizeof(T))>::type w;
};

/// Loads N elements at p (aligned to N * sizeof(T) bytes) as one instruction, kept packed.
template <int N, Load kLoad = Load::Default, typename T>
__device__ __forceinline__ Packed<T, N> load_packed(const T* p) {
  using W = typename RawWord<int(N * sizeof(T))>::type;
  Packed<T, N> r;
  if constexpr (kLoad == Load::ReadOnly) r.w = __ldg(reinterpret_cast<const W*>(p));
  else r.w = *reinterpret_cast<const W*>(p);
  return r;
}

/// Element j of a packed vector.
template <typename T, int N>
__device__ __forceinline__ T element(const Packed<T, N>& v, int j) {
  T r;
  memcpy(&r, reinterpret_cast<const char*>(&v.w) + j * sizeof(T), sizeof(T));
  return r;
}

/// Whether p is aligned for `bytes`-wide vectors (host or device).
__host__ __device__ __forceinline__ bool is_aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

} // namespace nuvec::cu
