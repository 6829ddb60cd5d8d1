// nuvec io: GGUF reader and writer, from the GGUF specification (ggml docs/gguf.md, v3):
// "GGUF", u32 version, u64 tensor count, u64 kv count, typed key-values, tensor infos (name,
// n_dims, u64 dims fastest-first, ggml type, u64 offset), padding to the alignment, data.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "io/io_common.h"
#include "io/stream.h"
#include "nuvec/io.h"

namespace nuvec {

namespace {

using io_detail::throw_file_error;

constexpr const char* kLoad = "load_gguf";
constexpr const char* kSave = "save_gguf";
constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr const char* kAlignmentKey = "general.alignment";
constexpr uint32_t kMaxDims = 16; // ggml uses 4; the spec allows more in future versions

// Metadata value types (the spec's gguf_metadata_value_type).
enum ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// The dtype of a numeric or bool metadata type; false for STRING, ARRAY and unknown codes.
bool value_dtype(uint32_t t, Dtype& out) {
  switch (t) {
    case kU8: out = uint8; return true;
    case kI8: out = int8; return true;
    case kU16: out = uint16; return true;
    case kI16: out = int16; return true;
    case kU32: out = uint32; return true;
    case kI32: out = int32; return true;
    case kF32: out = float32; return true;
    case kBool: out = bool_; return true;
    case kU64: out = uint64; return true;
    case kI64: out = int64; return true;
    case kF64: out = float64; return true;
    default: return false;
  }
}

bool value_type_of(Dtype d, uint32_t& out) {
  switch (d.val()) {
    case Dtype::Val::bool_: out = kBool; return true;
    case Dtype::Val::uint8: out = kU8; return true;
    case Dtype::Val::uint16: out = kU16; return true;
    case Dtype::Val::uint32: out = kU32; return true;
    case Dtype::Val::uint64: out = kU64; return true;
    case Dtype::Val::int8: out = kI8; return true;
    case Dtype::Val::int16: out = kI16; return true;
    case Dtype::Val::int32: out = kI32; return true;
    case Dtype::Val::int64: out = kI64; return true;
    case Dtype::Val::float32: out = kF32; return true;
    case Dtype::Val::float64: out = kF64; return true;
    case Dtype::Val::float16:
    case Dtype::Val::bfloat16:
    case Dtype::Val::complex64: return false;
  }
  return false;
}

// ggml tensor types nuvec stores without conversion (the spec's ggml_type enum).
struct PlainType {
  uint32_t code;
  Dtype dtype;
};
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlI8 = 24, kGgmlI16 = 25, kGgmlI32 = 26,
                   kGgmlI64 = 27, kGgmlF64 = 28, kGgmlBF16 = 30;
const PlainType kPlainTypes[] = {
    {kGgmlF32, float32}, {kGgmlF16, float16}, {kGgmlBF16, bfloat16}, {kGgmlF64, float64},
    {kGgmlI8, int8}, {kGgmlI16, int16}, {kGgmlI32, int32}, {kGgmlI64, int64}};

// Names of the block-quantized ggml types, for the "not supported yet" message.
const char* quantized_name(uint32_t t) {
  static const char* const names[] = {
      nullptr, nullptr, "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1", "Q8_0", "Q8_1",
      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", nullptr, nullptr, nullptr, nullptr, nullptr, "IQ1_M",
      nullptr, "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0"};
  return t < std::size(names) ? names[t] : nullptr;
}

// Every read goes through a Cursor (src/io/stream.h), checked against the file's size first,
// so lengths and counts from a hostile header fail with a message instead of reading or
// allocating past the end.
using io_detail::Cursor;

// An evaluated array of `count` little-endian elements of `dtype` read from r.
array read_elements(Cursor& r, Dtype dtype, uint64_t count, const Shape& shape, const std::string& what) {
  const size_t width = size_of(dtype);
  if (count > r.left() / width) {
    throw_file_error(kLoad, r.where(), "truncated file: ", what, " at offset ", r.pos(), " claims ",
                     count, " elements of ", width, " bytes but only ", r.left(), " bytes remain.");
  }
  std::vector<char> data(count * width);
  r.bytes(data.data(), data.size(), what);
  if (!io_detail::host_is_little_endian()) io_detail::byteswap_elements(data.data(), count, width);
  if (dtype == bool_) {
    for (char c : data) {
      if (c != 0 && c != 1) {
        throw_file_error(kLoad, r.where(), what, " holds the byte ", int(static_cast<unsigned char>(c)),
                         " as a bool (the spec allows only 0 and 1).");
      }
    }
  }
  return io_detail::array_from_bytes(data.data(), shape, dtype);
}

GGUFMetaData read_value(Cursor& r, uint32_t type, const std::string& key) {
  const std::string what = "the value of '" + key + "'";
  Dtype dtype = float32;
  if (value_dtype(type, dtype)) return read_elements(r, dtype, 1, {}, what);
  if (type == kString) return r.string(what);
  if (type != kArray) {
    throw_file_error(kLoad, r.where(), "metadata key '", key, "' has unknown value type ", type,
                     " (0 to 12 are defined).");
  }
  const uint32_t elem = r.le<uint32_t>("the element type of " + what);
  const uint64_t count = r.le<uint64_t>("the length of " + what);
  if (elem == kString) {
    // Each string needs at least its 8-byte length.
    if (count > r.left() / 8) {
      throw_file_error(kLoad, r.where(), "truncated file: ", what, " claims ", count,
                       " strings but only ", r.left(), " bytes remain.");
    }
    std::vector<std::string> out;
    out.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      out.push_back(r.string("string " + std::to_string(i) + " of " + what));
    }
    return out;
  }
  if (elem == kArray) {
    throw_file_error(kLoad, r.where(), "metadata key '", key, "' holds nested arrays, which are "
                     "not supported.");
  }
  if (!value_dtype(elem, dtype)) {
    throw_file_error(kLoad, r.where(), "metadata key '", key, "' has arrays of unknown value type ",
                     elem, ".");
  }
  if (count > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    throw_file_error(kLoad, r.where(), "metadata key '", key, "' claims ", count,
                     " elements (over 2^31 - 1).");
  }
  return read_elements(r, dtype, count, {static_cast<int32_t>(count)}, what);
}

struct TensorInfo {
  std::string name;
  Shape shape;
  Dtype dtype = float32;
  uint64_t nbytes = 0;
  uint64_t offset = 0;
};

TensorInfo read_tensor_info(Cursor& r, uint64_t index) {
  TensorInfo t;
  const std::string which = "tensor info " + std::to_string(index);
  t.name = r.string("the name of " + which);
  const std::string what = "tensor '" + t.name + "'";
  const uint32_t ndim = r.le<uint32_t>("the dimension count of " + what);
  if (ndim > kMaxDims) {
    throw_file_error(kLoad, r.where(), what, " has ", ndim, " dimensions (at most ", kMaxDims,
                     " are read).");
  }
  std::vector<uint64_t> dims(ndim);
  uint64_t numel = 1;
  for (auto& d : dims) {
    d = r.le<uint64_t>("the dimensions of " + what);
    if (d > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      throw_file_error(kLoad, r.where(), what, " has dimension ", d, " (over 2^31 - 1).");
    }
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / d) {
      throw_file_error(kLoad, r.where(), what, " has a shape whose size overflows.");
    }
    numel *= d;
  }
  // GGUF lists the fastest-varying dimension first; row-major shapes list it last.
  for (size_t i = ndim; i-- > 0;) t.shape.push_back(static_cast<int32_t>(dims[i]));
  const uint32_t type = r.le<uint32_t>("the type of " + what);
  bool known = false;
  for (const auto& p : kPlainTypes) {
    if (p.code == type) {
      t.dtype = p.dtype;
      known = true;
    }
  }
  if (!known) {
    if (const char* q = quantized_name(type)) {
      throw_file_error(kLoad, r.where(), what, " has the quantized ggml type ", q, " (", type,
                       "); quantized tensors are not supported yet.");
    }
    throw_file_error(kLoad, r.where(), what, " has unknown or unsupported ggml type ", type,
                     " (F32, F16, BF16, F64, I8, I16, I32 and I64 are read).");
  }
  t.nbytes = numel * size_of(t.dtype);
  t.offset = r.le<uint64_t>("the offset of " + what);
  return t;
}

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

} // namespace

GGUFLoad load_gguf(const std::string& path, StreamOrDevice /*s*/) {
  const io_detail::SizedReader in(io_detail::open_file_reader(path, kLoad), kLoad);
  Cursor r(in);
  const std::string& file = in.where();
  if (r.size() < 4) {
    throw_file_error(kLoad, file, "not a GGUF file: ", r.size(), " bytes is shorter than the magic.");
  }
  char magic[4];
  r.bytes(magic, 4, "the magic");
  if (std::string(magic, 4) != "GGUF") {
    throw_file_error(kLoad, file, "not a GGUF file (the first 4 bytes are not \"GGUF\").");
  }
  const uint32_t version = r.le<uint32_t>("the version");
  if (version != 2 && version != 3) {
    if (version == 1) {
      throw_file_error(kLoad, file, "GGUF version 1 (32-bit counts) is not supported; versions 2 "
                       "and 3 are.");
    }
    if ((version & 0xFFFF) == 0 && (version >> 24) <= 3) {
      throw_file_error(kLoad, file, "big-endian GGUF files are not supported (version field ",
                       version, " read little-endian).");
    }
    throw_file_error(kLoad, file, "unsupported GGUF version ", version, " (2 and 3 are read).");
  }
  const uint64_t n_tensors = r.le<uint64_t>("the tensor count");
  const uint64_t n_kv = r.le<uint64_t>("the metadata count");
  // The smallest key-value pair is 13 bytes (length, type, one-byte value); the smallest
  // tensor info 24 (length, n_dims, type, offset).
  if (n_kv > r.left() / 13 || n_tensors > r.left() / 24) {
    throw_file_error(kLoad, file, "truncated file: the header claims ", n_kv, " metadata pairs and ",
                     n_tensors, " tensors, more than the remaining ", r.left(), " bytes can hold.");
  }

  std::unordered_map<std::string, GGUFMetaData> meta;
  uint64_t alignment = kDefaultAlignment;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.string("metadata key " + std::to_string(i));
    const uint32_t type = r.le<uint32_t>("the value type of '" + key + "'");
    if (meta.count(key)) throw_file_error(kLoad, file, "duplicate metadata key '", key, "'.");
    if (key == kAlignmentKey) {
      if (type != kU32) {
        throw_file_error(kLoad, file, "general.alignment has value type ", type,
                         "; the spec requires uint32 (4).");
      }
      const uint32_t a = r.le<uint32_t>("the value of general.alignment");
      if (!is_power_of_two(a)) {
        throw_file_error(kLoad, file, "general.alignment is ", a, "; it must be a power of two.");
      }
      alignment = a;
      meta.emplace(std::move(key), array(a, uint32));
      continue;
    }
    GGUFMetaData v = read_value(r, type, key);
    meta.emplace(std::move(key), std::move(v));
  }

  std::vector<TensorInfo> infos;
  infos.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) infos.push_back(read_tensor_info(r, i));

  std::unordered_map<std::string, array> arrays;
  if (infos.empty()) return {std::move(arrays), std::move(meta)};
  const uint64_t data_start = align_up(r.pos(), alignment);
  if (data_start > r.size()) {
    throw_file_error(kLoad, file, "truncated file: the tensor data section would start at offset ",
                     data_start, ", past the end at ", r.size(), ".");
  }
  const uint64_t data_size = r.size() - data_start;
  for (auto& t : infos) {
    if (arrays.count(t.name)) throw_file_error(kLoad, file, "duplicate tensor name '", t.name, "'.");
    if (t.offset % alignment != 0) {
      throw_file_error(kLoad, file, "tensor '", t.name, "' has offset ", t.offset,
                       ", not a multiple of the alignment ", alignment, ".");
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      throw_file_error(kLoad, file, "tensor '", t.name, "' (", t.nbytes, " bytes at data offset ",
                       t.offset, ") runs past the end of the ", data_size,
                       "-byte data section (truncated file?).");
    }
    const size_t width = size_of(t.dtype);
    array a = in.read_array_at(data_start + t.offset, t.shape, t.dtype, [width](char* p, size_t n) {
      if (!io_detail::host_is_little_endian()) io_detail::byteswap_elements(p, n / width, width);
    });
    arrays.emplace(t.name, std::move(a));
  }
  return {std::move(arrays), std::move(meta)};
}

namespace {

void append_string(std::vector<char>& b, const std::string& s) {
  io_detail::append_le<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// Row-major little-endian bytes of a.
std::vector<char> le_bytes(const array& a) {
  std::vector<char> d = io_detail::row_major_bytes(a);
  if (!io_detail::host_is_little_endian()) {
    io_detail::byteswap_elements(d.data(), a.size(), a.itemsize());
  }
  return d;
}

// save_gguf's std::runtime_error, where MLX throws that type for an argument it cannot save.
template <typename... Parts>
[[noreturn]] void throw_cannot_save(const Parts&... parts) {
  throw std::runtime_error(error_message(kSave, parts...));
}

void append_metadata(std::vector<char>& b, const std::string& key, const GGUFMetaData& v) {
  if (std::holds_alternative<std::monostate>(v)) {
    throw_cannot_save("metadata values must hold an array, a string or strings; got an empty "
                      "value (std::monostate) for '", key, "'.");
  }
  append_string(b, key);
  if (const auto* s = std::get_if<std::string>(&v)) {
    io_detail::append_le<uint32_t>(b, kString);
    append_string(b, *s);
  } else if (const auto* ss = std::get_if<std::vector<std::string>>(&v)) {
    io_detail::append_le<uint32_t>(b, kArray);
    io_detail::append_le<uint32_t>(b, kString);
    io_detail::append_le<uint64_t>(b, ss->size());
    for (const auto& s : *ss) append_string(b, s);
  } else {
    // MLX's checks and exception types, in MLX's order.
    const array& a = std::get<array>(v);
    if (a.ndim() > 1) {
      throw_cannot_save("metadata arrays must have 0 or 1 dimensions; got shape ", a.shape(),
                        " for '", key, "'.");
    }
    if (a.size() == 0) {
      throw_cannot_save("metadata arrays must not be empty; got shape ", a.shape(), " for '", key, "'.");
    }
    uint32_t type = 0;
    if (!value_type_of(a.dtype(), type)) {
      throw_invalid_argument(kSave, "metadata arrays must be bool, (u)int8-64, float32 or "
                             "float64; got ", a.dtype(), " for '", key, "'.");
    }
    if (a.ndim() == 1) {
      io_detail::append_le<uint32_t>(b, kArray);
      io_detail::append_le<uint32_t>(b, type);
      io_detail::append_le<uint64_t>(b, a.size());
    } else {
      io_detail::append_le<uint32_t>(b, type);
    }
    const std::vector<char> d = le_bytes(a);
    b.insert(b.end(), d.begin(), d.end());
  }
}

} // namespace

void save_gguf(
    std::string file,
    std::unordered_map<std::string, array> array_map,
    std::unordered_map<std::string, GGUFMetaData> meta_data) {
  if (file.size() < 5 || file.compare(file.size() - 5, 5, ".gguf") != 0) file += ".gguf";

  uint64_t alignment = kDefaultAlignment;
  if (auto it = meta_data.find(kAlignmentKey); it != meta_data.end()) {
    const auto* a = std::get_if<array>(&it->second);
    if (a == nullptr || a->dtype() != uint32 || a->ndim() != 0 ||
        !is_power_of_two(a->item<uint32_t>())) {
      throw_invalid_argument(kSave, "general.alignment must be a 0-d uint32 array holding a power "
                             "of two (the spec's type for it).");
    }
    alignment = a->item<uint32_t>();
  }

  // Sorted keys and names make the file deterministic.
  std::vector<std::string> keys, names;
  for (const auto& [k, v] : meta_data) keys.push_back(k);
  for (const auto& [n, a] : array_map) names.push_back(n);
  std::sort(keys.begin(), keys.end());
  std::sort(names.begin(), names.end());

  std::vector<char> header = {'G', 'G', 'U', 'F'};
  io_detail::append_le<uint32_t>(header, kVersion);
  io_detail::append_le<uint64_t>(header, names.size());
  io_detail::append_le<uint64_t>(header, keys.size());
  for (const auto& k : keys) {
    if (k.empty() || k.size() > 0xFFFF) {
      throw_invalid_argument(kSave, "metadata keys must have 1 to 65535 bytes; got ", k.size(), ".");
    }
    append_metadata(header, k, meta_data.at(k));
  }

  std::vector<std::vector<char>> data;
  data.reserve(names.size());
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const auto& n : names) {
    const array& a = array_map.at(n);
    if (n.empty() || n.size() > 0xFFFF) {
      throw_invalid_argument(kSave, "tensor names must have 1 to 65535 bytes; got ", n.size(), ".");
    }
    uint32_t type = 0;
    bool plain = false;
    for (const auto& p : kPlainTypes) {
      if (p.dtype == a.dtype()) {
        type = p.code;
        plain = true;
      }
    }
    if (!plain) {
      throw_cannot_save("tensors must be float32, float16, bfloat16, float64, int8, int16, int32 "
                        "or int64 (a ggml type); got ", a.dtype(), " for '", n, "'.");
    }
    append_string(header, n);
    io_detail::append_le<uint32_t>(header, static_cast<uint32_t>(a.ndim()));
    for (size_t i = a.ndim(); i-- > 0;) io_detail::append_le<uint64_t>(header, a.shape()[i]);
    io_detail::append_le<uint32_t>(header, type);
    offset = align_up(offset, alignment);
    io_detail::append_le<uint64_t>(header, offset);
    offsets.push_back(offset);
    data.push_back(le_bytes(a));
    offset += data.back().size();
  }

  const std::vector<char> zeros(alignment, 0);
  std::vector<std::pair<const char*, size_t>> parts = {{header.data(), header.size()}};
  if (!data.empty()) {
    parts.push_back({zeros.data(), align_up(header.size(), alignment) - header.size()});
  }
  uint64_t at = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    parts.push_back({zeros.data(), offsets[i] - at});
    parts.push_back({data[i].data(), data[i].size()});
    at = offsets[i] + data[i].size();
  }
  io_detail::write_parts(*io_detail::open_file_writer(file, kSave), kSave, parts);
}

} // namespace nuvec
