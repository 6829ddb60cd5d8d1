// nuvec io: helpers shared by the .npy, .npz, GGUF and IDX readers and writers (error
// messages, byte order, little-endian fields, host arrays from bytes, row-major bytes of any
// array layout, the .npy encoder and reader that .npz reuses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nuvec/array.h"
#include "nuvec/transforms.h"
#include "nuvec/utils.h"

namespace nuvec::io_detail {

/// Throws std::runtime_error "[op] <file>: <parts>". File problems are runtime errors (the
/// caller's code is fine, the data is not), as MLX's readers throw them.
template <typename... Parts>
[[noreturn]] void throw_file_error(const char* op, const std::string& file, const Parts&... parts) {
  std::ostringstream msg;
  msg << "[" << op << "] " << file << ": ";
  (msg << ... << parts);
  throw std::runtime_error(msg.str());
}

/// Reverses the bytes of each of the n elements of `width` bytes at data.
inline void byteswap_elements(char* data, size_t n, size_t width) {
  if (width <= 1) return;
  for (size_t i = 0; i < n; ++i) {
    char* e = data + i * width;
    for (size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(e[a], e[b]);
  }
}

/// Whether this machine stores integers little-endian (the order of the .npy files we write).
inline bool host_is_little_endian() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

/// An evaluated array of `shape` and `dtype` holding a copy of `bytes` (row-major, host order).
inline array array_from_bytes(const char* bytes, const Shape& shape, Dtype dtype) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  const size_t nbytes = n * size_of(dtype);
  // The allocator may reject 0 bytes; every array gets at least one byte of buffer.
  auto buf = allocator::malloc(nbytes == 0 ? 1 : nbytes);
  if (nbytes > 0) std::memcpy(buf.raw_ptr(), bytes, nbytes);
  return array(buf, shape, dtype);
}

/// The elements at base laid out with `shape` and element `strides`, copied in row-major
/// order (an odometer over the multi-index, so any view layout works, negative strides too).
inline std::vector<char> gather_row_major(
    const char* base, const Shape& shape, const Strides& strides, size_t item) {
  size_t n = 1;
  for (auto d : shape) n *= static_cast<size_t>(d);
  std::vector<char> out(n * item);
  if (n == 0) return out;
  const size_t nd = shape.size();
  std::vector<int32_t> idx(nd, 0);
  int64_t off = 0; // element offset of idx from the first element
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + i * item, base + off * static_cast<int64_t>(item), item);
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
  return out;
}

/// The elements of `a` (evaluated here) in row-major order, as raw bytes in host order.
/// Walks shape and strides, so views (transposed, broadcast, sliced) need no extra op.
inline std::vector<char> row_major_bytes(array a) {
  a.eval();
  const char* base = static_cast<const char*>(a.raw_data());
  if (a.size() > 0 && a.flags().row_contiguous) {
    return std::vector<char>(base, base + a.nbytes());
  }
  return gather_row_major(base, a.shape(), a.strides(), a.itemsize());
}

/// The unsigned little-endian integer of sizeof(T) bytes at p (the caller checked bounds).
template <typename T>
T read_le(const char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v = static_cast<T>(v | (static_cast<T>(static_cast<unsigned char>(p[i])) << (8 * i)));
  }
  return v;
}

/// Appends the unsigned integer v as sizeof(T) little-endian bytes.
template <typename T, typename Bytes>
void append_le(Bytes& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

/// The complete .npy file (NEP 1, version 1.0 or 2.0, little-endian, C order) holding `a`.
/// Defined in npy.cpp; `save` and `savez` write it.
std::vector<char> npy_encode(const array& a);

class SizedReader;

/// Reads the .npy file that is the whole of `in` into an evaluated array, the data straight
/// into the array's buffer. Errors are std::runtime_error "[op] <label>: ..." (the label
/// names the file, or the archive and member). Defined in npy.cpp; `load` and `load_npz`
/// read through it.
array npy_read(const SizedReader& in);

} // namespace nuvec::io_detail
