// nuvec: warp-level tensor-core building blocks of the CUDA attention kernels (the tiled
// forward, attention_tiled.cu, and the backward, attention_backward.cu): asynchronous
// global -> shared copies (cp.async, sm_80+), ldmatrix loads of 8x8 b16 matrices from shared
// memory, and mma.sync m16n8k16 with float32 accumulators for float16 and bfloat16 operands.
// Thin PTX wrappers; the fragment layouts they produce are stated here once so the kernels
// can index their registers without re-deriving them (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type" and "ldmatrix").
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, t = lane % 4; each .b32 register holds two
// consecutive 16-bit elements, the lower column in the low half):
//   A (16 x 16, row-major), 4 registers:  a[0] = A[g][2t..2t+1],    a[1] = A[g+8][2t..2t+1],
//                                         a[2] = A[g][2t+8..2t+9],  a[3] = A[g+8][2t+8..2t+9].
//   B (16 x 8, "col": B[k][n] with k contiguous), 2 registers: b[0] = B[2t..2t+1][g],
//                                         b[1] = B[2t+8..2t+9][g].
//   C, D (16 x 8 float32), 4 registers:   c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1].
// ldmatrix .x4: lanes 8i..8i+7 give the row addresses (16 bytes each) of matrix i; register
// i of lane l receives matrix i's row l / 4, elements 2(l % 4) and 2(l % 4) + 1. With .trans
// it receives the transposed matrix's: stored rows 2(l % 4) and 2(l % 4) + 1 of column l / 4.
// So a row-major 16x16 tile loaded with lane l addressing row l % 16, column 8 (l / 16) gives
// exactly an A fragment (or, .trans, two B fragments of a [k][n] row-major tile: registers
// {0, 1} for columns 0..7 and {2, 3} for 8..15), and a [n][k] row-major tile (keys x head
// dims) loaded with lane l addressing row 8 (l / 16) + l % 8, column 8 ((l / 8) % 2) gives
// B fragments of two 8-column blocks: registers {0, 1} for rows 0..7, {2, 3} for rows 8..15.
// Host-free device code; sm_80 or newer.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace nuvec::cu {

/// The 32-bit shared-memory address of a generic pointer into shared memory (what
/// cp.async and ldmatrix take).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Copies 16 bytes from global `src` to shared `dst` (a pointer or a shared address) asynchronously (cp.async.cg: L2 only,
/// the tiles are read once per block). When `valid` is false nothing is read and the 16
/// bytes are zero-filled (src-size 0), so out-of-range rows need no branch around the copy;
/// `src` must still be a valid address expression (pass any in-bounds pointer). Both
/// addresses 16-byte aligned.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  cp_async_16(smem_addr(dst), src, valid);
}

/// Closes the group of cp.async copies issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/// Waits until at most N of this thread's committed cp.async groups are still in flight.
/// Other threads' copies are visible only after a __syncthreads() that follows.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// ldmatrix .x4: four 8x8 b16 matrices; `addr` is this lane's row address (a shared-memory
/// address, smem_addr; see the header). Kernels that keep 32-bit base addresses and add
/// constant offsets save the registers of generic pointers.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  ldmatrix_x4(r, smem_addr(p));
}

/// ldmatrix .x4 .trans: four 8x8 b16 matrices, each transposed on the way (see the header).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  ldmatrix_x4_trans(r, smem_addr(p));
}

/// ldmatrix .x2: two 8x8 b16 matrices; lanes 0..15 give the row addresses (lanes 16..31
/// must still pass valid shared addresses; any of the tile's will do).
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}

/// ldmatrix .x2 .trans.
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(p)));
}

/// d += A B for one m16n8k16 tile, A and B of element type T (__half or __nv_bfloat16),
/// float32 accumulators; fragment layouts in the header.
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "mma_m16n8k16: f16 or bf16");
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

/// d += A B for one m16n8k8 tile of tf32 operands (float32 registers whose low 13 mantissa
/// bits the tensor core ignores), float32 accumulators. Fragment layouts (g = lane / 4,
/// t = lane % 4; PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32):
///   A (16 x 8, row-major), 4 registers: a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4],
///                                       a[3] = A[g+8][t+4].
///   B (8 x 8, B[k][n]), 2 registers:    b[0] = B[t][g], b[1] = B[t+4][g].
///   C, D: as m16n8k16's.
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// x as tf32 rounded to nearest (ties away from zero), the bits the tensor core reads.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

/// x split for float32-accurate products on tf32 tensor cores ("3xTF32"): hi = x rounded to
/// tf32 (11 significant bits), lo = x − hi (exact in float32, at most 2^-11 |x|) rounded to
/// tf32 in turn. a·b ≈ hi_a·hi_b + hi_a·lo_b + lo_a·hi_b misses lo_a·lo_b and lo's rounding:
/// about 2^-22 relative, unbiased, float32's accuracy for sums of a few hundred terms.
/// Source: NVIDIA CUTLASS's OpMultiplyAddFastF32 ("big + small" tf32 emulation).
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = to_tf32(x);
  lo = to_tf32(x - __uint_as_float(hi));
}

/// Two float32 values rounded to nearest even into a packed pair of T (`lo` in the low
/// half): the register form of an A or B fragment element pair.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

/// 2^x by the special-function unit (ex2.approx.ftz: relative error about 2^-22, -inf -> 0,
/// denormal results flushed to 0), the exponential of the online softmaxes, which fold
/// log2(e) into their scale.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

} // namespace nuvec::cu
