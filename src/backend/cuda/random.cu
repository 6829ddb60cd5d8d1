// nuvec: GPU kernel of RandomBits: Threefry-2x32 (20 rounds) in MLX's counter layout, bit for
// bit the CPU's src/backend/cpu/random.cpp (both hash with backend/common/threefry.h), so a key gives
// the same bits on either device. One thread per counter block (a pair of output words).
#include <cstdint>

#include "backend/common/strided.h"
#include "backend/common/threefry.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/runtime/runtime.h"
#include "backend/cuda/kernel_utils.cuh"
#include "primitives/random.h"

namespace nuvec {

namespace {

using cu::StridedIndexer;

constexpr unsigned kThreads = 256;

/// Word `word` (little-endian) of one key's block of `nbytes` bytes at base: a whole word
/// when it fits (aligned: every block starts at a multiple of 4 bytes), else its low bytes.
__device__ __forceinline__ void put_word(
    unsigned char* base,
    int64_t nbytes,
    int64_t word,
    uint32_t v,
    bool aligned) {
  const int64_t at = 4 * word;
  const int64_t n = nbytes - at < 4 ? nbytes - at : 4;
  if (aligned && n == 4) {
    *reinterpret_cast<uint32_t*>(base + at) = v;
  } else {
    for (int64_t b = 0; b < n; ++b) base[at + b] = static_cast<unsigned char>(v >> (8 * b));
  }
}

/// Fills num_keys blocks of bytes_per_key bytes: with m = ceil(bytes_per_key / 4) words,
/// h = m / 2 and odd = m % 2, block item j < h writes the pair (w[j], w[j + h + odd]) =
/// hash(key, (j, j + h + odd)); item h (when m is odd) writes w[h] = hash(key, (h, 0)).x0.
/// Key i is (keys[2i], keys[2i + 1]) in the keys' row-major order (kx gives offsets).
__global__ void random_bits_kernel(
    const uint32_t* keys,
    StridedIndexer<1> kx,
    unsigned char* out,
    int64_t num_keys,
    int64_t bytes_per_key,
    int64_t h,
    int64_t odd,
    bool aligned) {
  const int64_t per_key = h + odd;
  NUVEC_CUDA_KERNEL_LOOP(t, num_keys * per_key) {
    const int64_t i = t / per_key;
    const int64_t j = t - i * per_key;
    int64_t o0[1], o1[1];
    kx.offsets(2 * i, o0);
    kx.offsets(2 * i + 1, o1);
    const uint32_t k0 = keys[o0[0]], k1 = keys[o1[0]];
    unsigned char* base = out + i * bytes_per_key;
    if (j < h) {
      const int64_t hi = j + h + odd;
      threefry::Words r = threefry::hash({k0, k1}, {static_cast<uint32_t>(j), static_cast<uint32_t>(hi)});
      put_word(base, bytes_per_key, j, r.x0, aligned);
      put_word(base, bytes_per_key, hi, r.x1, aligned);
    } else {
      threefry::Words r = threefry::hash({k0, k1}, {static_cast<uint32_t>(h), 0u});
      put_word(base, bytes_per_key, h, r.x0, aligned);
    }
  }
}

} // namespace

/// Random bits of shape (K..., shape...) from keys (K..., 2) uint32 (any layout): each key
/// fills out.nbytes() / num_keys bytes with MLX's counter layout.
void RandomBits::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array keys = inputs[0];
  array& out = outputs[0];
  auto* dst = static_cast<unsigned char*>(cu::alloc_output(out));
  const int64_t num_keys = static_cast<int64_t>(keys.size() / 2);
  if (out.size() == 0 || num_keys == 0) return;
  const int64_t bytes_per_key = static_cast<int64_t>(out.nbytes()) / num_keys;
  if (bytes_per_key == 0) return;
  auto plan = collapse_dims(keys.shape(), {keys.strides()});
  if (plan.shape.size() > size_t(cu::kMaxDims)) {
    keys = cu::contiguous_copy(keys);
    cu::retain(keys);
    plan = collapse_dims(keys.shape(), {keys.strides()});
  }
  const int64_t m = (bytes_per_key + 3) / 4;
  const int64_t h = m / 2, odd = m % 2;
  const int64_t items = num_keys * (h + odd);
  random_bits_kernel<<<cu::grid_for(static_cast<size_t>(items), kThreads), kThreads, 0, cu::stream()>>>(
      cu::device_ptr<uint32_t>(keys), cu::make_indexer<1>(plan, "random_bits"), dst, num_keys,
      bytes_per_key, h, odd, bytes_per_key % 4 == 0);
  cu::check_launch("random_bits_kernel");
}

} // namespace nuvec
