// nuvec io: checked reads of an io::Reader and writes to an io::Writer (src/io/stream.h);
// the one place where a stream's failure (an exception, or good() turning false) becomes
// the format's "[op] <label>: ..." std::runtime_error.
#include "io/stream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "core/errors.h"

namespace nuvec::io_detail {

namespace {

// Headers are read in chunks of this size; larger reads bypass the buffer.
constexpr uint64_t kReadAhead = 64 * 1024;

} // namespace

SizedReader::SizedReader(std::shared_ptr<io::Reader> in, const char* op)
    : in_(std::move(in)), op_(op) {
  if (!in_) throw_invalid_argument(op_, "the reader must not be null.");
  where_ = in_->label();
  if (!in_->is_open() || !in_->good()) {
    throw_file_error(op_, where_, "cannot read from it (the reader reports ",
                     in_->is_open() ? "good() == false" : "is_open() == false", ").");
  }
  size_t end = 0;
  try {
    in_->seek(0, std::ios_base::end);
    end = in_->tell();
    in_->seek(0, std::ios_base::beg);
  } catch (const std::exception& e) {
    throw_file_error(op_, where_, "cannot determine its size (", e.what(), ").");
  }
  if (end == std::numeric_limits<size_t>::max() || !in_->good()) {
    throw_file_error(op_, where_, "cannot determine its size (seek to the end failed).");
  }
  size_ = end;
}

void SizedReader::read_at(uint64_t offset, char* dst, uint64_t n) const {
  if (n == 0) return;
  if (offset > size_ || n > size_ - offset) {
    throw_file_error(op_, where_, "truncated file: ", n, " bytes at offset ", offset,
                     " pass its end at ", size_, ".");
  }
  try {
    in_->read(dst, static_cast<size_t>(n), static_cast<size_t>(offset));
  } catch (const std::exception& e) {
    throw_file_error(op_, where_, "reading ", n, " bytes at offset ", offset, " failed: ", e.what());
  }
  if (!in_->good()) {
    throw_file_error(op_, where_, "reading ", n, " bytes at offset ", offset,
                     " failed (the reader reports good() == false).");
  }
}

std::vector<char> SizedReader::read_all() const {
  std::vector<char> bytes(size_);
  read_at(0, bytes.data(), size_);
  return bytes;
}

void Cursor::need(uint64_t n, const std::string& what) const {
  if (n > left()) {
    throw_file_error(in_.op(), in_.where(), "truncated file: ", what, " at offset ", pos_,
                     " needs ", n, " bytes but only ", left(), " remain.");
  }
}

void Cursor::bytes(char* dst, uint64_t n, const std::string& what) {
  need(n, what);
  if (n >= kReadAhead) {
    in_.read_at(pos_, dst, n);
  } else if (n > 0) {
    if (pos_ < buf_start_ || pos_ + n > buf_start_ + buf_.size()) {
      buf_.resize(std::min(kReadAhead, left()));
      buf_start_ = pos_;
      in_.read_at(pos_, buf_.data(), buf_.size());
    }
    std::memcpy(dst, buf_.data() + (pos_ - buf_start_), n);
  }
  pos_ += n;
}

std::string Cursor::string(const std::string& what) {
  const uint64_t n = le<uint64_t>("the length of " + what);
  need(n, what + " (" + std::to_string(n) + " bytes)");
  std::string s(n, '\0');
  bytes(s.data(), n, what);
  return s;
}

void MemoryReader::seek(int64_t off, std::ios_base::seekdir way) {
  const int64_t base = way == std::ios_base::beg   ? 0
                       : way == std::ios_base::end ? static_cast<int64_t>(n_)
                                                   : static_cast<int64_t>(pos_);
  const int64_t p = base + off;
  if (p < 0 || p > static_cast<int64_t>(n_)) {
    good_ = false;
    return;
  }
  pos_ = static_cast<size_t>(p);
}

void MemoryReader::read(char* data, size_t n) {
  read(data, n, pos_);
  if (good_) pos_ += n;
}

void MemoryReader::read(char* data, size_t n, size_t offset) {
  if (offset > n_ || n > n_ - offset) {
    good_ = false;
    return;
  }
  if (n > 0) std::memcpy(data, data_ + offset, n);
}

std::shared_ptr<io::Reader> open_file_reader(const std::string& file, const char* op) {
  auto in = std::make_shared<io::ParallelFileReader>(file);
  const int err = errno; // as open(2) left it, before anything else can change it
  if (!in->is_open()) {
    throw_file_error(op, in->label(), "cannot open the file (", std::strerror(err), ").");
  }
  return in;
}

std::shared_ptr<io::Writer> open_file_writer(const std::string& file, const char* op) {
  auto out = std::make_shared<io::FileWriter>(file);
  const int err = errno;
  if (!out->is_open()) {
    throw_file_error(op, out->label(), "cannot open the file for writing (", std::strerror(err), ").");
  }
  return out;
}

void check_writer(const std::shared_ptr<io::Writer>& out, const char* op) {
  if (!out) throw_invalid_argument(op, "the writer must not be null.");
  if (!out->is_open() || !out->good()) {
    throw_file_error(op, out->label(), "cannot write to it (the writer reports ",
                     out->is_open() ? "good() == false" : "is_open() == false", ").");
  }
}

void write_parts(io::Writer& out, const char* op,
                 const std::vector<std::pair<const char*, size_t>>& parts) {
  for (const auto& [p, n] : parts) {
    if (n == 0) continue;
    try {
      out.write(p, n);
    } catch (const std::exception& e) {
      throw_file_error(op, out.label(), "writing ", n, " bytes failed: ", e.what());
    }
    if (!out.good()) {
      throw_file_error(op, out.label(), "writing ", n, " bytes failed (the writer reports "
                       "good() == false; disk full?).");
    }
  }
}

} // namespace nuvec::io_detail
