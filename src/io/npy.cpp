// nuvec io: NumPy .npy files (format: NumPy's NEP 1: magic "\x93NUMPY", version, header
// length, a Python dict literal with descr/fortran_order/shape padded to 64 bytes, the data).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "io/io_common.h"
#include "io/stream.h"
#include "nuvec/io.h"

namespace nuvec {

namespace {

using io_detail::throw_file_error;

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// What the header dict says.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// A parser for the one Python literal form NumPy writes (and hand-made variants: either
// quote, any spacing, trailing commas, Python 2's "3L"). Every error names the file.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const char* op, const std::string& file)
      : t_(text), op_(op), file_(file) {}

  NpyHeader parse() {
    NpyHeader h;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        h.descr = string_literal();
        has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        has_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        has_shape = true;
      } else {
        fail("unexpected key '" + key + "' (a .npy header has only 'descr', "
             "'fortran_order' and 'shape'; structured or object arrays are not supported)");
      }
      skip_space();
      if (peek() == ',') ++pos_;
    }
    if (!has_descr || !has_order || !has_shape) {
      fail(std::string("the header lacks the key '") +
           (!has_descr ? "descr" : !has_order ? "fortran_order" : "shape") + "'");
    }
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw_file_error(op_, file_, "malformed .npy header: ", what, " (header: \"",
                     std::string(t_.substr(0, 200)), "\").");
  }
  void skip_space() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
  }
  char peek() {
    if (pos_ >= t_.size()) fail("it ends early");
    return t_[pos_];
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string at offset " + std::to_string(pos_));
    const size_t end = t_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string s(t_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    if (t_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (t_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (true) {
      skip_space();
      if (peek() == ')') {
        ++pos_;
        return shape;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) {
        fail("a shape entry must be a non-negative integer");
      }
      uint64_t v = 0;
      while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) {
        v = v * 10 + static_cast<uint64_t>(t_[pos_] - '0');
        if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
          fail("a dimension is over the limit of 2^31 - 1");
        }
        ++pos_;
      }
      if (pos_ < t_.size() && t_[pos_] == 'L') ++pos_;
      shape.push_back(static_cast<int32_t>(v));
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in the shape");
      }
    }
  }

  std::string_view t_;
  const char* op_;
  const std::string& file_;
  size_t pos_ = 0;
};

// The dtype of a descr string and whether its data must be byte-swapped to host order.
Dtype parse_descr(const std::string& descr, const char* op, const std::string& file, bool& swap) {
  std::string body = descr;
  char order = '|';
  if (!body.empty() && (body[0] == '<' || body[0] == '>' || body[0] == '|' || body[0] == '=')) {
    order = body[0];
    body.erase(0, 1);
  }
  struct Code {
    const char* code;
    Dtype dtype;
  };
  // bfloat16 travels as the 2-byte void "V2", as MLX writes it.
  static const Code codes[] = {
      {"b1", bool_}, {"u1", uint8}, {"u2", uint16}, {"u4", uint32}, {"u8", uint64},
      {"i1", int8}, {"i2", int16}, {"i4", int32}, {"i8", int64}, {"f2", float16},
      {"f4", float32}, {"f8", float64}, {"V2", bfloat16}, {"c8", complex64}};
  for (const auto& c : codes) {
    if (body == c.code) {
      const bool file_little = order != '>';
      swap = file_little != io_detail::host_is_little_endian();
      return c.dtype;
    }
  }
  throw_file_error(op, file, "unsupported dtype '", descr, "' (nuvec reads bool, "
                   "(u)int8-64, float16/32/64, bfloat16 ('V2') and complex64; not object, "
                   "string, structured or complex128 data).");
}

} // namespace

namespace io_detail {

std::vector<char> npy_encode(const array& a) {
  std::vector<char> data = row_major_bytes(a);
  std::string descr = dtype_to_array_protocol(a.dtype());
  if (!host_is_little_endian()) {
    const size_t width = a.dtype() == complex64 ? 4 : a.itemsize();
    byteswap_elements(data.data(), data.size() / width, width);
  }

  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.ndim(); ++i) {
    dict += std::to_string(a.shape()[i]);
    if (a.ndim() == 1 || i + 1 < a.ndim()) dict += ",";
    if (i + 1 < a.ndim()) dict += " ";
  }
  dict += "), }";
  // Version 1.0 stores the header length in 2 bytes; longer headers need 2.0 (4 bytes).
  // The whole preamble is padded with spaces to a multiple of 64 and ends in '\n'.
  const bool v2 = dict.size() + 1 + kMagicLen + 4 > 65535;
  const size_t prefix = kMagicLen + 2 + (v2 ? 4 : 2);
  size_t total = prefix + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';

  std::vector<char> out(kMagic, kMagic + kMagicLen);
  out.reserve(total + data.size());
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  const uint32_t hlen = static_cast<uint32_t>(dict.size());
  if (v2) {
    append_le<uint32_t>(out, hlen);
  } else {
    append_le<uint16_t>(out, static_cast<uint16_t>(hlen));
  }
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

array npy_read(const SizedReader& in) {
  const char* op = in.op();
  const std::string& file = in.where();
  const uint64_t size = in.size();
  // The preamble: magic, version, and a 2-byte (1.0) or 4-byte (2.0, 3.0) header length.
  char raw[kMagicLen + 6] = {};
  in.read_at(0, raw, std::min<uint64_t>(size, sizeof(raw)));
  if (size < kMagicLen + 4 || std::memcmp(raw, kMagic, kMagicLen) != 0) {
    if (size >= kMagicLen && std::memcmp(raw, kMagic, kMagicLen) == 0) {
      throw_file_error(op, file, "truncated .npy preamble (", size, " bytes).");
    }
    throw_file_error(op, file, "not a .npy file (no \\x93NUMPY magic string; ", size, " bytes).");
  }
  const auto* u = reinterpret_cast<const unsigned char*>(raw);
  const int major = u[kMagicLen];
  if (major < 1 || major > 3) {
    throw_file_error(op, file, "unsupported .npy version ", major, ".", int(u[kMagicLen + 1]),
                     " (1.0 to 3.0 are read).");
  }
  uint64_t pos = kMagicLen + 2;
  uint64_t hlen = 0;
  if (major == 1) {
    hlen = read_le<uint16_t>(raw + pos);
    pos += 2;
  } else {
    if (size < pos + 4) throw_file_error(op, file, "truncated .npy preamble.");
    hlen = read_le<uint32_t>(raw + pos);
    pos += 4;
  }
  if (hlen > size - pos) {
    throw_file_error(op, file, "truncated header: it claims ", hlen, " bytes but the file has ",
                     size - pos, " after the preamble.");
  }
  std::string text(hlen, '\0');
  in.read_at(pos, text.data(), hlen);
  NpyHeader h = HeaderParser(text, op, file).parse();
  pos += hlen;

  bool swap = false;
  const Dtype dtype = parse_descr(h.descr, op, file, swap);
  size_t count = 1;
  for (auto d : h.shape) {
    if (d != 0 && count > std::numeric_limits<size_t>::max() / 16 / static_cast<size_t>(d)) {
      throw_file_error(op, file, "the shape ", h.shape, " is too large.");
    }
    count *= static_cast<size_t>(d);
  }
  const uint64_t nbytes = count * size_of(dtype);
  const uint64_t have = size - pos;
  if (have != nbytes) {
    throw_file_error(op, file, have < nbytes ? "truncated data" : "unexpected trailing data",
                     ": shape ", h.shape, " of ", dtype, " needs ", nbytes, " bytes; the file has ",
                     have, ".");
  }

  // Column-major data is read with the shape reversed, then transposed into row-major order.
  Shape stored = h.shape;
  const bool fortran = h.fortran_order && h.shape.size() > 1;
  if (fortran) std::reverse(stored.begin(), stored.end());
  array a = in.read_array_at(pos, stored, dtype, [&](char* data, size_t n) {
    if (swap) {
      const size_t width = dtype == complex64 ? 4 : size_of(dtype);
      byteswap_elements(data, n / width, width);
    }
    // Any byte other than 0/1 in a bool is undefined behaviour once read as bool.
    if (dtype == bool_) {
      for (size_t i = 0; i < n; ++i) data[i] = data[i] != 0 ? 1 : 0;
    }
  });
  if (!fortran) return a;
  Strides strides(h.shape.size());
  int64_t st = 1;
  for (size_t i = 0; i < h.shape.size(); ++i) {
    strides[i] = st;
    st *= h.shape[i];
  }
  const std::vector<char> rows =
      gather_row_major(static_cast<const char*>(a.raw_data()), h.shape, strides, size_of(dtype));
  return array_from_bytes(rows.data(), h.shape, dtype);
}

} // namespace io_detail

void save(std::shared_ptr<io::Writer> out_stream, array a) {
  io_detail::check_writer(out_stream, "save");
  const std::vector<char> bytes = io_detail::npy_encode(a);
  io_detail::write_parts(*out_stream, "save", {{bytes.data(), bytes.size()}});
}

void save(std::string file, array a) {
  if (file.size() < 4 || file.compare(file.size() - 4, 4, ".npy") != 0) file += ".npy";
  // Encoded before the file is opened, so a failing evaluation leaves no empty file behind.
  const std::vector<char> bytes = io_detail::npy_encode(a);
  auto out = io_detail::open_file_writer(file, "save");
  io_detail::write_parts(*out, "save", {{bytes.data(), bytes.size()}});
}

array load(std::shared_ptr<io::Reader> in_stream, StreamOrDevice /*s*/) {
  return io_detail::npy_read(io_detail::SizedReader(std::move(in_stream), "load"));
}

array load(std::string file, StreamOrDevice s) {
  return load(io_detail::open_file_reader(file, "load"), s);
}

} // namespace nuvec
