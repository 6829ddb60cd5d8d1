// nuvec: how the math layer is compiled. Every header of src/backend/common/math/ is one
// text for g++ (the CPU kernels), nvcc (the CUDA kernels) and NVRTC (generated kernels):
// functions are marked NUVEC_HD, which is __host__ __device__ under a CUDA compiler and
// nothing otherwise, and the headers include only the freestanding parts of the standard
// library (type traits, limits, cstdint) plus the target's math and complex functions.
//
// The few things that differ by target live in functions.h and types.h behind
// NUVEC_MATH_DEVICE: the math library calls (expf/erfinvf on the device, exp_f32 and a
// libm-free erfinv on the host) and the complex library (cuda::std::complex or std::complex).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define NUVEC_HD __host__ __device__
#define NUVEC_MATH_CUDA 1
#else
#define NUVEC_HD
#define NUVEC_MATH_CUDA 0
#endif

// Inside a NUVEC_HD function: whether this pass compiles device code.
#if defined(__CUDA_ARCH__) || defined(__CUDACC_RTC__)
#define NUVEC_MATH_DEVICE 1
#else
#define NUVEC_MATH_DEVICE 0
#endif

// The math layer's entities live in an inline namespace named after the compiler family,
// so that a CUDA translation unit's instantiations (device element types, cuda::std
// complex) and a host one's never meet under one name (no ODR clash at link time).
#if NUVEC_MATH_CUDA
#define NUVEC_MATH_BEGIN namespace nuvec::math { inline namespace cuda_abi {
#else
#define NUVEC_MATH_BEGIN namespace nuvec::math { inline namespace host_abi {
#endif
#define NUVEC_MATH_END } }
