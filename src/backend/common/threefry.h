// nuvec: the Threefry-2x32 block cipher with 20 rounds (Salmon et al., "Parallel random
// numbers: as easy as 1, 2, 3", SC'11; Random123's threefry2x32_20), and the counter layout
// MLX's RandomBits uses (the one JAX uses), so that a key gives MLX's bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

// Host and device: the CUDA RandomBits kernel hashes with the same function.
#ifdef __CUDACC__
#define NUVEC_THREEFRY_HD __host__ __device__
#else
#define NUVEC_THREEFRY_HD
#endif

namespace nuvec::threefry {

/// Two 32-bit words: a key or a counter block.
struct Words {
  uint32_t x0, x1;
};

/// threefry2x32_20(key, counter): 5 groups of 4 rounds with rotations (13, 15, 26, 6) and
/// (17, 29, 16, 24) alternating, and a key injection (ks[(g+1)%3], ks[(g+2)%3] + g + 1) after
/// group g, where ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA) (Random123's parity constant).
NUVEC_THREEFRY_HD inline Words hash(Words key, Words ctr) {
  constexpr uint32_t rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {key.x0, key.x1, key.x0 ^ key.x1 ^ 0x1BD11BDAu};
  uint32_t x0 = ctr.x0 + ks[0];
  uint32_t x1 = ctr.x1 + ks[1];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (uint32_t g = 0; g < 5; ++g) {
    for (uint32_t r : rot[g % 2]) {
      x0 += x1;
      x1 = (x1 << r) | (x1 >> (32 - r));
      x1 ^= x0;
    }
    x0 += ks[(g + 1) % 3];
    x1 += ks[(g + 2) % 3] + g + 1;
  }
  return {x0, x1};
}

/// Fills `nbytes` bytes at `out` with the bits of one key, in MLX's (and JAX's) layout: the
/// output is m = ceil(nbytes / 4) little-endian 32-bit words; with h = m / 2 and odd = m % 2,
/// the pair (w[j], w[j + h + odd]) = hash(key, (j, j + h + odd)) for j < h, and when m is odd
/// the middle word w[h] = hash(key, (h, 0)).x0. A last partial word keeps its low bytes.
inline void fill_bits(Words key, void* out, size_t nbytes) {
  auto* bytes = static_cast<unsigned char*>(out);
  const size_t m = (nbytes + 3) / 4;
  const size_t h = m / 2;
  const size_t odd = m % 2;
  auto put = [&](size_t word, uint32_t v) {
    size_t n = (4 * word + 4 <= nbytes) ? 4 : nbytes - 4 * word;
    std::memcpy(bytes + 4 * word, &v, n); // little-endian hosts (x86-64, aarch64)
  };
  for (size_t j = 0; j < h; ++j) {
    const size_t hi = j + h + odd;
    Words r = hash(key, {static_cast<uint32_t>(j), static_cast<uint32_t>(hi)});
    put(j, r.x0);
    put(hi, r.x1);
  }
  if (odd) put(h, hash(key, {static_cast<uint32_t>(h), 0u}).x0);
}

/// MLX's split(key) computed on the host: bits of shape (2, 2) from key; row 0 is the
/// carried key, row 1 the subkey handed out (KeySequence::next).
inline std::pair<Words, Words> split2(Words key) {
  uint32_t w[4];
  fill_bits(key, w, sizeof(w));
  return {{w[0], w[1]}, {w[2], w[3]}};
}

} // namespace nuvec::threefry
