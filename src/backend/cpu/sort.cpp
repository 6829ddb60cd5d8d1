// nuvec: CPU kernels of Sort and ArgSort along one axis. NaNs sort last (NumPy); complex
// values sort lexicographically; argsort is stable (equal values keep their order). Long
// float32/int32/uint32 lines use an LSD radix sort (argsort: on (key, position) pairs).
#include <cstring>
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/strided.h"
#include "backend/cpu/thread_pool.h"
#include "primitives/primitives.h"

namespace nuvec {

namespace {


// Calls f(in_offset, out_offset) for every position of the non-axis dims; the output is
// row-contiguous with the input's shape.
template <typename F>
void for_each_line(const array& in, int axis, F&& f) {
  Shape shape;
  Strides in_strides, out_strides;
  auto rs = row_strides(in.shape());
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    if (d == axis) continue;
    shape.push_back(in.shape()[d]);
    in_strides.push_back(in.strides()[d]);
    out_strides.push_back(rs[d]);
  }
  auto plan = collapse_dims(shape, {in_strides, out_strides});
  for_each_run<2>(plan, [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) f(off[0] + i * st[0], off[1] + i * st[1]);
  });
}

// LSD radix sort for 32-bit keys (float32, int32, uint32 lines of at least kRadixMin
// elements): an order-preserving map to uint32, four 8-bit counting passes (skipping digits
// all keys share), and the map back. About 10x faster than comparison sorting at 10^6.
// Argsort sorts (key << 32 | position) words on their upper half: counting passes are
// stable, so equal keys keep ascending positions, as std::stable_sort does.
constexpr int64_t kRadixMin = 2048;

template <typename T>
inline constexpr bool radix_sortable_v =
    std::is_same_v<T, float> || std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>;

template <typename T>
uint32_t to_radix_key(T v) {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t u;
    if (v != v) {
      u = 0x7fc00000u; // every NaN as the positive quiet NaN: above +inf, so last (NumPy)
    } else {
      std::memcpy(&u, &v, 4);
    }
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return static_cast<uint32_t>(v) ^ 0x80000000u;
  } else {
    return v;
  }
}

template <typename T>
T from_radix_key(uint32_t k) {
  if constexpr (std::is_same_v<T, float>) {
    uint32_t u = (k & 0x80000000u) ? (k ^ 0x80000000u) : ~k;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return static_cast<int32_t>(k ^ 0x80000000u);
  } else {
    return k;
  }
}

// Lines at least this long sort with the radix passes split over the thread pool.
constexpr size_t kParallelRadixMin = 16384;

// Sorts words (uint32 keys, or uint64 pairs with the key in bits 32-63) by the 32-bit key
// starting at bit `shift`; `scratch` holds n words. One thread counts all four digits in one
// read, then scatters four times (skipping digits all keys share). With `split` (a long line
// and a free pool) each pass is cut into contiguous parts over the pool instead: every part
// counts its digits, part t's words of digit d go after those of parts < t (so the passes
// stay stable), and the parts scatter at once.
template <typename W>
void radix_sort_words(W* words, W* scratch, size_t n, int shift, bool split) {
  const size_t parts = split && n >= kParallelRadixMin
                           ? std::min<size_t>(cpu::num_threads(), n / (kParallelRadixMin / 2))
                           : 1;
  const auto begin = [&](size_t t) { return n * t / parts; };
  // count[(p * parts + t) * 256 + d]: words of part t whose digit p is d.
  std::vector<size_t> count(4 * parts * 256, 0);
  if (parts == 1) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t k = static_cast<uint32_t>(words[i] >> shift);
      for (int p = 0; p < 4; ++p) count[p * 256 + ((k >> (8 * p)) & 255u)]++;
    }
  }
  W* src = words;
  W* dst = scratch;
  for (int p = 0; p < 4; ++p) {
    const int sh = shift + 8 * p;
    size_t* c = &count[p * parts * 256];
    if (parts > 1) {
      cpu::run_tasks(parts, [&](size_t t) {
        size_t* ct = c + t * 256;
        for (size_t i = begin(t), e = begin(t + 1); i < e; ++i) ct[(src[i] >> sh) & 255u]++;
      });
    }
    // Exclusive offsets, digit-major then part; a digit all keys share moves nothing.
    size_t sum = 0;
    bool shared = false;
    for (int d = 0; d < 256; ++d) {
      const size_t before = sum;
      for (size_t t = 0; t < parts; ++t) {
        const size_t k = c[t * 256 + d];
        c[t * 256 + d] = sum;
        sum += k;
      }
      shared = shared || sum - before == n;
    }
    if (shared) continue;
    const auto scatter = [&](size_t t) {
      size_t* ct = c + t * 256;
      for (size_t i = begin(t), e = begin(t + 1); i < e; ++i) dst[ct[(src[i] >> sh) & 255u]++] = src[i];
    };
    if (parts > 1) {
      cpu::run_tasks(parts, scatter);
    } else {
      scatter(0);
    }
    std::swap(src, dst);
  }
  if (src != words) std::memcpy(words, src, n * sizeof(W));
}

// Sorts (values) or argsorts (indices) every line along axis into out.
template <bool indices>
void sort_lines(const array& in, array& out, int axis) {
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t n = in.shape()[axis];
  const int64_t in_stride = in.strides()[axis];
  const int64_t out_stride = row_strides(in.shape())[axis];
  dispatch_all_types(in.dtype(), [&]<typename T>() {
    const T* src = static_cast<const T*>(in.raw_data());
    std::vector<std::pair<int64_t, int64_t>> lines; // (input offset, output offset)
    for_each_line(in, axis, [&](int64_t ioff, int64_t ooff) { lines.emplace_back(ioff, ooff); });
    // Lines split over the pool when there are several and enough work (a long line alone
    // splits its radix passes instead); each part has its own buffers.
    const size_t nl = lines.size();
    const size_t parts = nl > 1 && static_cast<int64_t>(nl) * n >= (int64_t{1} << 15)
                             ? std::min<size_t>(cpu::num_threads(), nl) : 1;
    const auto sort_part = [&](size_t part) {
      // A plain buffer: std::vector<bool> has proxy elements.
      std::unique_ptr<T[]> line(new T[std::max<int64_t>(n, 1)]);
      std::vector<uint32_t> order(n);
      std::vector<uint32_t> keys; // radix keys and their scratch half, for long lines
      std::vector<uint64_t> pairs; // the same for argsort: (key << 32 | position)
      const auto sort_one = [&](int64_t ioff, int64_t ooff) {
        for (int64_t i = 0; i < n; ++i) line[i] = src[ioff + i * in_stride];
        if constexpr (indices) {
          if constexpr (radix_sortable_v<T>) {
            if (n >= kRadixMin) {
              pairs.resize(2 * n);
              for (int64_t i = 0; i < n; ++i) {
                T v = line[i];
                // -0 and +0 compare equal, so they must tie (keep positions) here too.
                if constexpr (std::is_same_v<T, float>) v = v == 0.0f ? 0.0f : v;
                pairs[i] = (static_cast<uint64_t>(to_radix_key(v)) << 32) | static_cast<uint64_t>(i);
              }
              radix_sort_words(pairs.data(), pairs.data() + n, static_cast<size_t>(n), 32, parts == 1);
              auto* dst = static_cast<uint32_t*>(out.raw_data()) + ooff;
              for (int64_t i = 0; i < n; ++i) dst[i * out_stride] = static_cast<uint32_t>(pairs[i]);
              return;
            }
          }
          std::iota(order.begin(), order.end(), 0u);
          std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
            return nan_last_less<T>(line[a], line[b]);
          });
          auto* dst = static_cast<uint32_t*>(out.raw_data()) + ooff;
          for (int64_t i = 0; i < n; ++i) dst[i * out_stride] = order[i];
        } else {
          if constexpr (radix_sortable_v<T>) {
            if (n >= kRadixMin) {
              keys.resize(2 * n);
              for (int64_t i = 0; i < n; ++i) keys[i] = to_radix_key(line[i]);
              radix_sort_words(keys.data(), keys.data() + n, static_cast<size_t>(n), 0, parts == 1);
              T* dst = static_cast<T*>(out.raw_data()) + ooff;
              for (int64_t i = 0; i < n; ++i) dst[i * out_stride] = from_radix_key<T>(keys[i]);
              return;
            }
          }
          // NaNs moved last (NumPy's order) first, so the sort itself uses the plain `<`,
          // which inlines; a comparator through a function pointer was ~10x slower.
          T* last = line.get() + n;
          if constexpr (is_float_v<T> || is_complex_v<T>) {
            last = std::partition(line.get(), last, [](const T& v) { return !is_nan_element(v); });
          }
          std::sort(line.get(), last, [](const T& a, const T& b) { return a < b; });
          T* dst = static_cast<T*>(out.raw_data()) + ooff;
          for (int64_t i = 0; i < n; ++i) dst[i * out_stride] = line[i];
        }
      };
      for (size_t li = nl * part / parts; li < nl * (part + 1) / parts; ++li) {
        sort_one(lines[li].first, lines[li].second);
      }
    };
    // One part runs here, not as a pool task: a long line's radix passes then split over
    // the pool themselves (a call from inside a task would run inline).
    if (parts == 1) {
      sort_part(0);
    } else {
      cpu::run_tasks(parts, sort_part);
    }
  });
}

} // namespace

void Sort::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  sort_lines<false>(inputs[0], outputs[0], axis_);
}

void ArgSort::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  sort_lines<true>(inputs[0], outputs[0], axis_);
}

} // namespace nuvec
