// nuvec: the safetensors reader and writer behind io.h. Layout from the safetensors format
// spec: u64 little-endian header size N, N bytes of JSON, then the data block; every tensor
// is {dtype, shape, data_offsets: [begin, end)} relative to the data block. Dtype codes as
// MLX writes them (complex64 as "C64"), plus "F64" for float64.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/io_common.h"
#include "io/stream.h"
#include "nuvec/io.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

namespace nuvec {

namespace {

using json = nlohmann::json;

// The spec caps the header at 100 MB; it guards against a hostile size field.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

const char* safetensors_code(Dtype t) {
  switch (t.val()) {
    case Dtype::Val::bool_: return "BOOL";
    case Dtype::Val::uint8: return "U8";
    case Dtype::Val::uint16: return "U16";
    case Dtype::Val::uint32: return "U32";
    case Dtype::Val::uint64: return "U64";
    case Dtype::Val::int8: return "I8";
    case Dtype::Val::int16: return "I16";
    case Dtype::Val::int32: return "I32";
    case Dtype::Val::int64: return "I64";
    case Dtype::Val::float16: return "F16";
    case Dtype::Val::float32: return "F32";
    case Dtype::Val::float64: return "F64";
    case Dtype::Val::bfloat16: return "BF16";
    // Complex numbers are not in the spec yet; MLX writes complex64 as "C64"
    // (https://github.com/huggingface/safetensors/issues/389).
    case Dtype::Val::complex64: return "C64";
  }
  return nullptr;
}

bool dtype_from_code(const std::string& code, Dtype& out) {
  static const std::map<std::string, Dtype> table = {
      {"BOOL", bool_}, {"U8", uint8}, {"U16", uint16}, {"U32", uint32}, {"U64", uint64},
      {"I8", int8}, {"I16", int16}, {"I32", int32}, {"I64", int64}, {"F16", float16},
      {"F32", float32}, {"F64", float64}, {"BF16", bfloat16}, {"C64", complex64}};
  auto it = table.find(code);
  if (it == table.end()) return false;
  out = it->second;
  return true;
}

[[noreturn]] void corrupt(const std::string& where, const std::string& what) {
  throw std::runtime_error(
      error_message("load_safetensors", where, " is not a valid safetensors file: ", what, "."));
}

// What save_safetensors writes: the header (size field included) and the arrays' data in
// the header's order. Built, and every argument checked, before anything is written.
struct Encoded {
  std::string header;
  std::vector<array> data;
};

Encoded encode(
    const std::unordered_map<std::string, array>& a,
    const std::unordered_map<std::string, std::string>& metadata) {
  // Sorted names make the file deterministic.
  std::vector<std::string> names;
  names.reserve(a.size());
  for (auto& [name, arr] : a) {
    if (name.empty()) throw_invalid_argument("save_safetensors", "array names must be non-empty; got \"\".");
    if (name == "__metadata__") {
      throw_invalid_argument("save_safetensors", "array names must not be \"__metadata__\"; got it.");
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());

  Encoded out;
  out.data.reserve(names.size());
  for (auto& n : names) out.data.push_back(contiguous(a.at(n)));
  eval(out.data);

  json header = json::object();
  uint64_t offset = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const uint64_t nbytes = out.data[i].nbytes();
    header[names[i]] = {
        {"dtype", safetensors_code(out.data[i].dtype())},
        {"shape", out.data[i].shape()},
        {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  if (!metadata.empty()) {
    json m = json::object();
    for (auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::string text = header.dump();
  // Pad with spaces so the data block starts 8-byte aligned (the spec allows trailing spaces).
  while (text.size() % 8 != 0) text.push_back(' ');
  out.header.reserve(8 + text.size());
  io_detail::append_le<uint64_t>(out.header, text.size());
  out.header += text;
  return out;
}

void write(io::Writer& out, const Encoded& e) {
  std::vector<std::pair<const char*, size_t>> parts = {{e.header.data(), e.header.size()}};
  for (auto& d : e.data) parts.push_back({static_cast<const char*>(d.raw_data()), d.nbytes()});
  io_detail::write_parts(out, "save_safetensors", parts);
}

} // namespace

void save_safetensors(
    std::shared_ptr<io::Writer> out_stream,
    std::unordered_map<std::string, array> a,
    std::unordered_map<std::string, std::string> metadata) {
  io_detail::check_writer(out_stream, "save_safetensors");
  write(*out_stream, encode(a, metadata));
}

void save_safetensors(
    std::string file,
    std::unordered_map<std::string, array> a,
    std::unordered_map<std::string, std::string> metadata) {
  const std::string ext = ".safetensors";
  if (file.size() < ext.size() || file.compare(file.size() - ext.size(), ext.size(), ext) != 0) {
    file += ext;
  }
  // Checked and evaluated before the file is opened, so bad arguments leave no file behind.
  const Encoded e = encode(a, metadata);
  write(*io_detail::open_file_writer(file, "save_safetensors"), e);
}

SafetensorsLoad load_safetensors(std::shared_ptr<io::Reader> in_stream, StreamOrDevice /*s*/) {
  const io_detail::SizedReader in(std::move(in_stream), "load_safetensors");
  const std::string& file = in.where();
  const uint64_t file_size = in.size();
  if (file_size < 8) corrupt(file, "it is shorter than the 8-byte header size field");
  char b[8];
  in.read_at(0, b, 8);
  const uint64_t header_size = io_detail::read_le<uint64_t>(b);
  if (header_size > kMaxHeaderBytes) {
    corrupt(file, "its header size field says " + std::to_string(header_size) + " bytes (the limit is 100 MB)");
  }
  if (header_size > file_size - 8) {
    corrupt(
        file,
        "its header size field says " + std::to_string(header_size) + " bytes but only " +
            std::to_string(file_size - 8) + " follow (truncated?)");
  }
  std::string text(header_size, '\0');
  in.read_at(8, text.data(), header_size);
  const uint64_t data_start = 8 + header_size;
  const uint64_t data_size = file_size - data_start;

  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    corrupt(file, std::string("its header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) corrupt(file, "its header is not a JSON object");

  std::unordered_map<std::string, std::string> metadata;
  std::unordered_map<std::string, array> arrays;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      // MLX writes null here when there is no metadata.
      if (entry.is_null()) continue;
      if (!entry.is_object()) corrupt(file, "__metadata__ is not an object");
      for (auto& [k, v] : entry.items()) {
        if (!v.is_string()) corrupt(file, "__metadata__ value '" + k + "' is not a string");
        metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      corrupt(file, where + " lacks dtype, shape or data_offsets");
    }
    auto& jd = entry["dtype"];
    auto& js = entry["shape"];
    auto& jo = entry["data_offsets"];
    Dtype dtype = float32;
    if (!jd.is_string() || !dtype_from_code(jd.get<std::string>(), dtype)) {
      corrupt(file, where + " has an unknown dtype " + jd.dump());
    }
    if (!js.is_array()) corrupt(file, where + " has a shape that is not a list");
    Shape shape;
    uint64_t numel = 1;
    for (auto& d : js) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > std::numeric_limits<int32_t>::max()) {
        corrupt(file, where + " has an invalid dimension " + d.dump());
      }
      uint64_t dim = d.get<uint64_t>();
      shape.push_back(static_cast<int32_t>(dim));
      if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim / 8) {
        corrupt(file, where + " has a shape too large to address");
      }
      numel *= dim;
    }
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned()) {
      corrupt(file, where + " has data_offsets that are not two non-negative integers");
    }
    uint64_t begin = jo[0].get<uint64_t>(), end = jo[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      corrupt(
          file,
          where + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
              ") outside the " + std::to_string(data_size) + "-byte data block (truncated?)");
    }
    uint64_t nbytes = numel * size_of(dtype);
    if (end - begin != nbytes) {
      corrupt(
          file,
          where + " spans " + std::to_string(end - begin) + " bytes but its shape and dtype need " +
              std::to_string(nbytes));
    }
    array a = in.read_array_at(data_start + begin, shape, dtype, [&](char* p, size_t n) {
      // Any nonzero byte would be an invalid C++ bool; normalise to 0/1.
      if (dtype == bool_) {
        for (size_t i = 0; i < n; ++i) p[i] = p[i] != 0;
      }
    });
    arrays.insert_or_assign(name, std::move(a));
  }
  return {std::move(arrays), std::move(metadata)};
}

SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s) {
  return load_safetensors(io_detail::open_file_reader(file, "load_safetensors"), s);
}

} // namespace nuvec
