// nuvec: the safetensors reader and writer behind io.h. Layout from the safetensors format
// spec: u64 little-endian header size N, N bytes of JSON, then the data block; every tensor
// is {dtype, shape, data_offsets: [begin, end)} relative to the data block.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "nuvec/io.h"
#include "nuvec/ops.h"
#include "nuvec/transforms.h"

namespace nuvec {

namespace {

using json = nlohmann::json;

// The spec caps the header at 100 MB; it guards against a hostile size field.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

const char* safetensors_code(Dtype t) {
  switch (t.val) {
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
    case Dtype::Val::complex64: return nullptr;
  }
  return nullptr;
}

bool dtype_from_code(const std::string& code, Dtype& out) {
  static const std::map<std::string, Dtype> table = {
      {"BOOL", bool_}, {"U8", uint8}, {"U16", uint16}, {"U32", uint32}, {"U64", uint64},
      {"I8", int8}, {"I16", int16}, {"I32", int32}, {"I64", int64}, {"F16", float16},
      {"F32", float32}, {"F64", float64}, {"BF16", bfloat16}};
  auto it = table.find(code);
  if (it == table.end()) return false;
  out = it->second;
  return true;
}

[[noreturn]] void corrupt(const std::string& file, const std::string& what) {
  throw std::runtime_error(
      error_message("load_safetensors", "'", file, "' is not a valid safetensors file: ", what, "."));
}

void write_u64_le(std::ostream& os, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  os.write(reinterpret_cast<const char*>(b), 8);
}

} // namespace

void save_safetensors(
    std::string file,
    std::unordered_map<std::string, array> a,
    std::unordered_map<std::string, std::string> metadata) {
  const std::string ext = ".safetensors";
  if (file.size() < ext.size() || file.compare(file.size() - ext.size(), ext.size(), ext) != 0) {
    file += ext;
  }
  // Sorted names make the file deterministic.
  std::vector<std::string> names;
  names.reserve(a.size());
  for (auto& [name, arr] : a) {
    if (name.empty()) throw_invalid_argument("save_safetensors", "array names must be non-empty; got \"\".");
    if (name == "__metadata__") {
      throw_invalid_argument("save_safetensors", "array names must not be \"__metadata__\"; got it.");
    }
    if (!safetensors_code(arr.dtype())) {
      throw_invalid_argument(
          "save_safetensors", "arrays must have a safetensors dtype; got ", arr.dtype(), " for '", name, "'.");
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());

  std::vector<array> data;
  data.reserve(names.size());
  for (auto& n : names) data.push_back(contiguous(a.at(n)));
  eval(data);

  json header = json::object();
  uint64_t offset = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    uint64_t nbytes = data[i].nbytes();
    header[names[i]] = {
        {"dtype", safetensors_code(data[i].dtype())},
        {"shape", data[i].shape()},
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
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');

  std::ofstream os(file, std::ios::binary | std::ios::trunc);
  if (!os) {
    throw std::runtime_error(error_message("save_safetensors", "cannot open '", file, "' for writing."));
  }
  write_u64_le(os, text.size());
  os.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (auto& d : data) {
    os.write(static_cast<const char*>(d.raw_data()), static_cast<std::streamsize>(d.nbytes()));
  }
  os.flush();
  if (!os) {
    throw std::runtime_error(error_message("save_safetensors", "failed while writing '", file, "'."));
  }
}

std::pair<
    std::unordered_map<std::string, array>,
    std::unordered_map<std::string, std::string>>
load_safetensors(const std::string& file, StreamOrDevice /*s*/) {
  std::ifstream is(file, std::ios::binary | std::ios::ate);
  if (!is) {
    throw std::runtime_error(error_message("load_safetensors", "cannot open '", file, "' for reading."));
  }
  const uint64_t file_size = static_cast<uint64_t>(is.tellg());
  is.seekg(0);
  if (file_size < 8) corrupt(file, "it is shorter than the 8-byte header size field");
  unsigned char b[8];
  is.read(reinterpret_cast<char*>(b), 8);
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= static_cast<uint64_t>(b[i]) << (8 * i);
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
  is.read(text.data(), static_cast<std::streamsize>(header_size));
  if (!is) corrupt(file, "reading the header failed");
  const uint64_t data_size = file_size - 8 - header_size;

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
    auto buffer = allocator::malloc(std::max<uint64_t>(nbytes, 1));
    is.seekg(static_cast<std::streamoff>(8 + header_size + begin));
    is.read(static_cast<char*>(buffer.raw_ptr()), static_cast<std::streamsize>(nbytes));
    if (!is) {
      allocator::free(buffer);
      corrupt(file, "reading the data of " + where + " failed");
    }
    if (dtype == bool_) {
      // Any nonzero byte would be an invalid C++ bool; normalise to 0/1.
      auto* p = static_cast<unsigned char*>(buffer.raw_ptr());
      for (uint64_t i = 0; i < nbytes; ++i) p[i] = p[i] != 0;
    }
    arrays.insert_or_assign(name, array(buffer, std::move(shape), dtype));
  }
  return {std::move(arrays), std::move(metadata)};
}

} // namespace nuvec
