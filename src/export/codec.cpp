// nuvec export: the out-of-line parts of the .nuvecfn byte encoding (codec.h).
#include "export/codec.h"

#include <memory>
#include <mutex>
#include <set>

#include "core/errors.h"

namespace nuvec::export_detail {

uint8_t dtype_code(Dtype t) {
  for (uint8_t i = 0; i < std::size(kDtypeCodes); ++i) {
    if (kDtypeCodes[i] == t.val()) return i;
  }
  throw_invalid_argument("export_function", "dtype ", t, " has no code in the .nuvecfn format.");
}

Dtype dtype_from_code(uint8_t code) {
  if (code >= std::size(kDtypeCodes)) {
    throw std::runtime_error(
        "[import_function] unknown dtype code " + std::to_string(code) + " (corrupt file?).");
  }
  return kDtypeCodes[code];
}

const char* intern(const std::string& s) {
  static std::mutex mu;
  static std::set<std::string>* pool = new std::set<std::string>(); // never freed: pointers stay valid
  std::lock_guard<std::mutex> lock(mu);
  return pool->insert(s).first->c_str();
}

Decoder::Decoder(std::istream& in, std::string what) : in_(in), what_(std::move(what)) {
  auto pos = in_.tellg();
  in_.seekg(0, std::ios::end);
  end_ = static_cast<uint64_t>(in_.tellg());
  in_.seekg(pos);
}

void Decoder::get_bytes(char* p, size_t n) {
  if (n == 0) return;
  in_.read(p, static_cast<std::streamsize>(n));
  if (static_cast<size_t>(in_.gcount()) != n) {
    throw std::runtime_error("[import_function] " + what_ + ": the file ends early (truncated or corrupt).");
  }
}

size_t Decoder::checked_count(uint64_t n, size_t min_item_bytes) {
  uint64_t left = end_ - static_cast<uint64_t>(in_.tellg());
  if (min_item_bytes > 0 && n > left / min_item_bytes) {
    throw std::runtime_error(
        "[import_function] " + what_ + ": a length of " + std::to_string(n) +
        " runs past the end of the file (truncated or corrupt).");
  }
  return static_cast<size_t>(n);
}

} // namespace nuvec::export_detail
