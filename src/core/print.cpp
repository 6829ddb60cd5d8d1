// nuvec: printing (the layout of MLX's and NumPy's array repr) and small public utilities.
#include <iomanip>
#include <sstream>

#include "backend/common/dispatch.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"
#include "nuvec/utils.h"

namespace nuvec {

namespace {
int print_precision = 6;

template <typename T>
void print_element(std::ostream& os, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
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
  print_precision = precision;
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

int normalize_axis_index(int axis, int ndim, const char* op) {
  int ax = axis < 0 ? axis + ndim : axis;
  if (ax < 0 || ax >= ndim) {
    std::ostringstream msg;
    msg << "[" << op << "] axis " << axis << " is out of bounds for an array with " << ndim
        << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  return ax;
}

} // namespace nuvec
