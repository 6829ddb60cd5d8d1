// nuvec: dtype metadata and MLX's type-promotion table (mlx/dtype.cpp gives the table; the
// rules below reproduce it: NumPy's lattice, except uint64 with a signed integer gives
// float32, half types absorb integers, and float64 with complex64 gives complex64).
#include "nuvec/dtype.h"

#include <array>
#include <sstream>
#include <stdexcept>

namespace nuvec {

namespace {

constexpr int kNumDtypes = 14;

// Built once from the rules; indexed by Dtype::Val.
std::array<std::array<Dtype::Val, kNumDtypes>, kNumDtypes> make_promotion_table() {
  auto promote = [](Dtype a, Dtype b) -> Dtype {
    if (a == b) return a;
    auto k = [](Dtype t) { return kindof(t); };
    // Put the "larger" kind second: b < u,i < f,V < c.
    auto rank = [&](Dtype t) {
      switch (k(t)) {
        case Dtype::Kind::b: return 0;
        case Dtype::Kind::u:
        case Dtype::Kind::i: return 1;
        case Dtype::Kind::f:
        case Dtype::Kind::V: return 2;
        case Dtype::Kind::c: return 3;
      }
      return 0;
    };
    if (rank(a) > rank(b)) std::swap(a, b);
    if (k(a) == Dtype::Kind::b) return b;
    if (k(b) == Dtype::Kind::c) return complex64;
    if (rank(a) == 1 && rank(b) == 1) {
      bool ua = k(a) == Dtype::Kind::u, ub = k(b) == Dtype::Kind::u;
      if (ua == ub) return a.size() >= b.size() ? a : b;
      Dtype u = ua ? a : b, s = ua ? b : a;
      if (u == uint64) return float32;
      if (s.size() > u.size()) return s;
      // Smallest signed type strictly wider than the unsigned one.
      switch (u.size()) {
        case 1: return int16;
        case 2: return int32;
        default: return int64;
      }
    }
    if (rank(a) == 1) return b; // integer with a float: the float
    // Both floating.
    if (a == float64 || b == float64) return float64;
    if (a == float32 || b == float32) return float32;
    return float32; // float16 with bfloat16
  };
  std::array<std::array<Dtype::Val, kNumDtypes>, kNumDtypes> t{};
  for (int i = 0; i < kNumDtypes; ++i) {
    for (int j = 0; j < kNumDtypes; ++j) {
      t[i][j] = promote(all_dtypes[i], all_dtypes[j]).val();
    }
  }
  return t;
}

} // namespace

Dtype promote_types(const Dtype& t1, const Dtype& t2) {
  static const auto table = make_promotion_table();
  return all_dtypes[static_cast<int>(table[static_cast<int>(t1.val())][static_cast<int>(t2.val())])];
}

Dtype::Kind kindof(const Dtype& t) {
  switch (t.val()) {
    case Dtype::Val::bool_: return Dtype::Kind::b;
    case Dtype::Val::uint8:
    case Dtype::Val::uint16:
    case Dtype::Val::uint32:
    case Dtype::Val::uint64: return Dtype::Kind::u;
    case Dtype::Val::int8:
    case Dtype::Val::int16:
    case Dtype::Val::int32:
    case Dtype::Val::int64: return Dtype::Kind::i;
    case Dtype::Val::float16:
    case Dtype::Val::float32:
    case Dtype::Val::float64: return Dtype::Kind::f;
    case Dtype::Val::bfloat16: return Dtype::Kind::V;
    case Dtype::Val::complex64: return Dtype::Kind::c;
  }
  throw std::invalid_argument("[kindof] unknown dtype.");
}

namespace {
Dtype::Category category_of(const Dtype& t) {
  switch (kindof(t)) {
    case Dtype::Kind::b: return Dtype::Category::generic;
    case Dtype::Kind::u: return Dtype::Category::unsignedinteger;
    case Dtype::Kind::i: return Dtype::Category::signedinteger;
    case Dtype::Kind::f:
    case Dtype::Kind::V: return Dtype::Category::floating;
    case Dtype::Kind::c: return Dtype::Category::complexfloating;
  }
  return Dtype::Category::generic;
}
} // namespace

bool issubdtype(const Dtype::Category& a, const Dtype::Category& b) {
  using C = Dtype::Category;
  if (a == b || b == C::generic) return true;
  switch (b) {
    case C::number:
      return a != C::generic;
    case C::integer:
      return a == C::signedinteger || a == C::unsignedinteger;
    case C::inexact:
      return a == C::floating || a == C::complexfloating;
    default:
      return false;
  }
}

bool issubdtype(const Dtype& a, const Dtype& b) {
  return a == b;
}

bool issubdtype(const Dtype::Category& a, const Dtype&) {
  (void)a;
  return false; // an abstract category never lies under a concrete dtype
}

bool issubdtype(const Dtype& a, const Dtype::Category& b) {
  if (a == bool_) return b == Dtype::Category::generic;
  return issubdtype(category_of(a), b);
}

std::string dtype_to_array_protocol(const Dtype& t) {
  std::ostringstream r;
  r << (t.size() == 1 ? "|" : "<");
  switch (kindof(t)) {
    case Dtype::Kind::b: r << "b"; break;
    case Dtype::Kind::u: r << "u"; break;
    case Dtype::Kind::i: r << "i"; break;
    case Dtype::Kind::f: r << "f"; break;
    case Dtype::Kind::V: r << "V"; break;
    case Dtype::Kind::c: r << "c"; break;
  }
  r << int(t.size());
  return r.str();
}

Dtype dtype_from_array_protocol(std::string_view t) {
  // Accept the byte-order prefix NumPy writes ('<', '|', '=') or none.
  std::string_view body = t;
  if (!body.empty() && (body[0] == '<' || body[0] == '|' || body[0] == '=')) {
    body.remove_prefix(1);
  }
  for (auto d : all_dtypes) {
    if (std::string_view(dtype_to_array_protocol(d)).substr(1) == body) {
      return d;
    }
  }
  std::ostringstream msg;
  msg << "[dtype_from_array_protocol] unknown type string; got '" << t << "'.";
  throw std::invalid_argument(msg.str());
}

std::string dtype_name(const Dtype& t) {
  switch (t.val()) {
    case Dtype::Val::bool_: return "bool";
    case Dtype::Val::uint8: return "uint8";
    case Dtype::Val::uint16: return "uint16";
    case Dtype::Val::uint32: return "uint32";
    case Dtype::Val::uint64: return "uint64";
    case Dtype::Val::int8: return "int8";
    case Dtype::Val::int16: return "int16";
    case Dtype::Val::int32: return "int32";
    case Dtype::Val::int64: return "int64";
    case Dtype::Val::float16: return "float16";
    case Dtype::Val::float32: return "float32";
    case Dtype::Val::float64: return "float64";
    case Dtype::Val::bfloat16: return "bfloat16";
    case Dtype::Val::complex64: return "complex64";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, const Dtype& d) {
  return os << dtype_name(d);
}

std::ostream& operator<<(std::ostream& os, const Dtype::Category& c) {
  switch (c) {
    case Dtype::Category::complexfloating: return os << "complexfloating";
    case Dtype::Category::floating: return os << "floating";
    case Dtype::Category::inexact: return os << "inexact";
    case Dtype::Category::signedinteger: return os << "signedinteger";
    case Dtype::Category::unsignedinteger: return os << "unsignedinteger";
    case Dtype::Category::integer: return os << "integer";
    case Dtype::Category::number: return os << "number";
    case Dtype::Category::generic: return os << "generic";
  }
  return os;
}

template <> TypeToDtype<bool>::operator Dtype() { return bool_; }
template <> TypeToDtype<uint8_t>::operator Dtype() { return uint8; }
template <> TypeToDtype<uint16_t>::operator Dtype() { return uint16; }
template <> TypeToDtype<uint32_t>::operator Dtype() { return uint32; }
template <> TypeToDtype<uint64_t>::operator Dtype() { return uint64; }
template <> TypeToDtype<int8_t>::operator Dtype() { return int8; }
template <> TypeToDtype<int16_t>::operator Dtype() { return int16; }
template <> TypeToDtype<int32_t>::operator Dtype() { return int32; }
template <> TypeToDtype<int64_t>::operator Dtype() { return int64; }
template <> TypeToDtype<float16_t>::operator Dtype() { return float16; }
template <> TypeToDtype<float>::operator Dtype() { return float32; }
template <> TypeToDtype<double>::operator Dtype() { return float32; } // MLX's choice
template <> TypeToDtype<bfloat16_t>::operator Dtype() { return bfloat16; }
template <> TypeToDtype<complex64_t>::operator Dtype() { return complex64; }
template <> TypeToDtype<std::complex<float>>::operator Dtype() { return complex64; }

} // namespace nuvec
