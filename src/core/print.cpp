// nuvec: printing (the layout of MLX's and NumPy's array repr) and small public utilities.
#include <climits>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <sstream>

#include "backend/common/dispatch.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"
#include "nuvec/utils.h"
#include "nuvec/version.h"

namespace nuvec {

namespace {
int print_precision = 6;

template <typename T>
void print_element(std::ostream& os, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (get_global_formatter().capitalize_bool) {
      os << (v ? "True" : "False");
    } else {
      os << (v ? "true" : "false");
    }
  } else if constexpr (is_complex_v<T>) {
    os << v.real() << (v.imag() < 0 ? "-" : "+") << std::abs(v.imag()) << "j";
  } else if constexpr (is_float_v<T>) {
    os << static_cast<double>(static_cast<float>(v));
  } else if constexpr (sizeof(T) == 1) {
    os << static_cast<int>(v);
  } else {
    os << v;
  }
}

template <typename T>
void print_rec(std::ostream& os, const array& a, const T* base, int dim, int64_t offset) {
  if (dim == static_cast<int>(a.ndim())) {
    print_element(os, base[offset]);
    return;
  }
  os << "[";
  for (int i = 0; i < a.shape(dim); ++i) {
    if (i > 0) {
      os << ",";
      if (dim + 1 < static_cast<int>(a.ndim())) {
        os << "\n" << std::string(6 + dim + 1, ' '); // "array(" then the brackets
      } else {
        os << " ";
      }
    }
    print_rec(os, a, base, dim + 1, offset + i * a.strides(dim));
  }
  os << "]";
}
} // namespace

void set_printoptions_precision(int precision) {
  if (precision < 0) {
    throw std::invalid_argument(
        "[set_printoptions] precision must be non-negative; got " + std::to_string(precision) +
        ".");
  }
  print_precision = precision;
}

void set_printoptions(std::optional<int> precision) {
  set_printoptions_precision(precision.value_or(6));
}

PrintFormatter& get_global_formatter() {
  static PrintFormatter formatter;
  return formatter;
}

finfo::finfo(Dtype t) : dtype(t == complex64 ? float32 : t) {
  auto fill = [this](double mn, double mx, double e, double sn) {
    min = mn;
    max = mx;
    eps = e;
    smallest_normal = sn;
    bits = static_cast<int>(8 * size_of(dtype));
  };
  switch (dtype.val()) {
    case Dtype::Val::float16:
      fill(-65504.0, 65504.0, 0x1p-10, 0x1p-14);
      break;
    case Dtype::Val::bfloat16:
      fill(-0x1.fep127, 0x1.fep127, 0x1p-7, 0x1p-126);
      break;
    case Dtype::Val::float32:
      fill(
          std::numeric_limits<float>::lowest(), std::numeric_limits<float>::max(),
          std::numeric_limits<float>::epsilon(), std::numeric_limits<float>::min());
      break;
    case Dtype::Val::float64:
      fill(
          std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max(),
          std::numeric_limits<double>::epsilon(), std::numeric_limits<double>::min());
      break;
    default: {
      std::ostringstream msg;
      msg << "[finfo] dtype must be floating or complex; got " << t << ".";
      throw std::invalid_argument(msg.str());
    }
  }
}

iinfo::iinfo(Dtype t) : dtype(t) {
  bits = static_cast<int>(8 * size_of(t));
  switch (t.val()) {
    case Dtype::Val::int8: min = INT8_MIN; max = INT8_MAX; break;
    case Dtype::Val::int16: min = INT16_MIN; max = INT16_MAX; break;
    case Dtype::Val::int32: min = INT32_MIN; max = INT32_MAX; break;
    case Dtype::Val::int64: min = INT64_MIN; max = INT64_MAX; break;
    case Dtype::Val::uint8: min = 0; max = UINT8_MAX; break;
    case Dtype::Val::uint16: min = 0; max = UINT16_MAX; break;
    case Dtype::Val::uint32: min = 0; max = UINT32_MAX; break;
    case Dtype::Val::uint64: min = 0; max = UINT64_MAX; break;
    default: {
      std::ostringstream msg;
      msg << "[iinfo] dtype must be an integer type; got " << t << ".";
      throw std::invalid_argument(msg.str());
    }
  }
}

std::string version() {
  return std::to_string(NUVEC_VERSION_MAJOR) + "." + std::to_string(NUVEC_VERSION_MINOR) + "." +
      std::to_string(NUVEC_VERSION_PATCH);
}

std::ostream& operator<<(std::ostream& os, array a) {
  a.eval();
  std::ostringstream body;
  body << std::setprecision(print_precision);
  dispatch_all_types(a.dtype(), [&]<typename T>() {
    print_rec(body, a, static_cast<const T*>(a.raw_data()), 0, 0);
  });
  return os << "array(" << body.str() << ", dtype=" << a.dtype() << ")";
}

template <typename V>
static std::ostream& print_tuple(std::ostream& os, const V& v) {
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) {
    os << (i ? ", " : "") << v[i];
  }
  if (v.size() == 1) os << ",";
  return os << ")";
}

std::ostream& operator<<(std::ostream& os, const Shape& v) {
  return print_tuple(os, v);
}
std::ostream& operator<<(std::ostream& os, const Strides& v) {
  return print_tuple(os, v);
}
std::ostream& operator<<(std::ostream& os, const std::vector<size_t>& v) {
  return print_tuple(os, v);
}

Dtype result_type(const std::vector<array>& arrays) {
  if (arrays.empty()) {
    throw std::invalid_argument("[result_type] needs at least one array; got none.");
  }
  Dtype t = arrays[0].dtype();
  for (auto& a : arrays) t = promote_types(t, a.dtype());
  return t;
}

int normalize_axis_index(int axis, int ndim, const std::string& msg_prefix) {
  int ax = axis < 0 ? axis + ndim : axis;
  if (ax < 0 || ax >= ndim) {
    std::ostringstream msg;
    // An op name becomes "[op] "; a prefix that is already a sentence is kept as given.
    if (!msg_prefix.empty() && msg_prefix.front() != '[') {
      msg << "[" << msg_prefix << "] ";
    } else if (!msg_prefix.empty()) {
      msg << msg_prefix << " ";
    }
    msg << "axis " << axis << " is out of bounds for an array with " << ndim << " dimensions.";
    throw std::invalid_argument(msg.str());
  }
  return ax;
}

} // namespace nuvec
