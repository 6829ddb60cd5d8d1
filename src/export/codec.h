// nuvec export: the byte encoding of the .nuvecfn format (docs/EXPORT.md): little-endian
// fixed-width numbers, length-prefixed strings and lists, dtypes by a fixed code table, and
// tuples field by field, so a primitive's state() tuple encodes with no per-type code (the
// scheme of MLX's export.cpp serialize/deserialize templates).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <istream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "nuvec/array.h"
#include "quantized/quant_spec.h"

namespace nuvec::export_detail {

static_assert(std::endian::native == std::endian::little,
              "the .nuvecfn encoder writes host-order numbers; add byte swaps for big-endian hosts");

/// The dtype codes of the format (the index in this table), fixed whatever Dtype::Val's order.
inline constexpr Dtype kDtypeCodes[] = {
    bool_, uint8, uint16, uint32, uint64, int8, int16,
    int32, int64, float16, float32, float64, bfloat16, complex64};

uint8_t dtype_code(Dtype t);
/// Throws std::runtime_error for a code outside the table.
Dtype dtype_from_code(uint8_t code);

/// A pointer that outlives the reader for a string read from a file (Gather keeps its op
/// name as a string literal).
const char* intern(const std::string& s);

template <typename T>
constexpr bool is_vector = false;
template <typename T, typename A>
constexpr bool is_vector<std::vector<T, A>> = true;
template <typename T>
constexpr bool is_tuple_like = false;
template <typename... Ts>
constexpr bool is_tuple_like<std::tuple<Ts...>> = true;
template <typename A, typename B>
constexpr bool is_tuple_like<std::pair<A, B>> = true;
template <typename>
constexpr bool dependent_false = false;

/// Appends encoded values to a byte string.
class Encoder {
 public:
  explicit Encoder(std::string& out) : out_(out) {}

  template <typename T>
  void put(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      put<uint8_t>(v ? 1 : 0);
    } else if constexpr (std::is_enum_v<T>) {
      put<int32_t>(static_cast<int32_t>(v));
    } else if constexpr (std::is_arithmetic_v<T>) {
      out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
    } else if constexpr (std::is_same_v<T, Dtype>) {
      put<uint8_t>(dtype_code(v));
    } else if constexpr (std::is_same_v<T, std::string>) {
      put<uint64_t>(v.size());
      out_.append(v);
    } else if constexpr (std::is_same_v<T, const char*>) {
      put(std::string(v));
    } else if constexpr (is_vector<T>) {
      put<uint64_t>(v.size());
      for (const auto& e : v) put(static_cast<const typename T::value_type&>(e));
    } else if constexpr (is_tuple_like<T>) {
      std::apply([this](const auto&... e) { (put(e), ...); }, v);
    } else if constexpr (std::is_same_v<T, QuantSpec>) {
      put(std::tuple{v.mode, v.group_size, v.bits});
    } else {
      static_assert(dependent_false<T>, "no .nuvecfn encoding for this type");
    }
  }

  /// Raw bytes (constant data).
  void put_bytes(const char* p, size_t n) { out_.append(p, n); }
  std::string& bytes() { return out_; }

 private:
  std::string& out_;
};

/// Reads encoded values from a stream; a short read throws std::runtime_error naming `what`
/// (the file).
class Decoder {
 public:
  Decoder(std::istream& in, std::string what);

  template <typename T>
  T get() {
    if constexpr (std::is_same_v<T, bool>) {
      return get<uint8_t>() != 0;
    } else if constexpr (std::is_enum_v<T>) {
      return static_cast<T>(get<int32_t>());
    } else if constexpr (std::is_arithmetic_v<T>) {
      T v;
      get_bytes(reinterpret_cast<char*>(&v), sizeof(T));
      return v;
    } else if constexpr (std::is_same_v<T, Dtype>) {
      return dtype_from_code(get<uint8_t>());
    } else if constexpr (std::is_same_v<T, std::string>) {
      std::string s(checked_count(get<uint64_t>(), 1), '\0');
      get_bytes(s.data(), s.size());
      return s;
    } else if constexpr (std::is_same_v<T, const char*>) {
      return intern(get<std::string>());
    } else if constexpr (is_vector<T>) {
      using E = typename T::value_type;
      T v;
      auto n = checked_count(get<uint64_t>(), std::is_arithmetic_v<E> ? sizeof(E) : 1);
      v.reserve(n);
      for (size_t i = 0; i < n; ++i) v.push_back(get<E>());
      return v;
    } else if constexpr (is_tuple_like<T>) {
      return get_tuple<T>(std::make_index_sequence<std::tuple_size_v<T>>{});
    } else if constexpr (std::is_same_v<T, QuantSpec>) {
      auto [mode, group_size, bits] = get<std::tuple<QuantMode, int, int>>();
      return QuantSpec{mode, group_size, bits};
    } else {
      static_assert(dependent_false<T>, "no .nuvecfn decoding for this type");
    }
  }

  void get_bytes(char* p, size_t n);
  const std::string& what() const { return what_; }
  std::istream& stream() { return in_; }

 private:
  template <typename T, size_t... I>
  T get_tuple(std::index_sequence<I...>) {
    // Braced initialisation evaluates the fields left to right.
    return T{get<std::tuple_element_t<I, T>>()...};
  }
  // Rejects counts that cannot fit in what is left of the file (a corrupt length would
  // otherwise reserve gigabytes).
  size_t checked_count(uint64_t n, size_t min_item_bytes);

  std::istream& in_;
  std::string what_;
  uint64_t end_; // the stream's length
};

} // namespace nuvec::export_detail
