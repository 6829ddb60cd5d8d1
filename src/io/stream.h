// nuvec io: the one way every format reads an io::Reader and writes an io::Writer (MLX's
// stream interfaces, nuvec/io/load.h): a reader of known size whose every read is checked
// against that size and against good(), a buffered cursor for headers, an in-memory reader,
// and the file openers that the path overloads of save/load use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/io_common.h"
#include "nuvec/io/load.h"

namespace nuvec::io_detail {

/// An io::Reader taken as a whole, from offset 0 to its end. The size is found once
/// (seek(0, end), tell()); reads are positional. Every error is std::runtime_error
/// "[op] <label>: ...", including errors a reader throws itself (wrapped, their message kept).
class SizedReader {
 public:
  /// Throws std::invalid_argument for a null reader, std::runtime_error for one that is not
  /// open or not good, or whose size cannot be found.
  SizedReader(std::shared_ptr<io::Reader> in, const char* op);

  uint64_t size() const { return size_; }
  const char* op() const { return op_; }
  /// The reader's label, which names the file in error messages.
  const std::string& where() const { return where_; }

  /// Reads n bytes at offset into dst; a range past the end throws (callers check first,
  /// with messages of their own, so this is the last line of defence).
  void read_at(uint64_t offset, char* dst, uint64_t n) const;
  /// The whole stream.
  std::vector<char> read_all() const;

  /// Reads the row-major elements of `shape` and `dtype` at offset straight into a new
  /// buffer, lets fix(data, nbytes) adjust them in place (byte order, bool bytes), and
  /// returns the evaluated array. The caller checked the range.
  template <typename Fix>
  array read_array_at(uint64_t offset, const Shape& shape, Dtype dtype, Fix&& fix) const {
    size_t count = 1;
    for (auto d : shape) count *= static_cast<size_t>(d);
    const size_t nbytes = count * size_of(dtype);
    auto buf = allocator::malloc(nbytes == 0 ? 1 : nbytes);
    try {
      read_at(offset, static_cast<char*>(buf.raw_ptr()), nbytes);
      fix(static_cast<char*>(buf.raw_ptr()), nbytes);
    } catch (...) {
      allocator::free(buf);
      throw;
    }
    return array(buf, shape, dtype);
  }

 private:
  std::shared_ptr<io::Reader> in_;
  const char* op_;
  std::string where_;
  uint64_t size_ = 0;
};

/// Sequential little-endian reads over a SizedReader through a read-ahead buffer (headers
/// made of many small fields). Every read is checked against the end first:
/// "[op] <label>: truncated file: <what> at offset P needs N bytes but only L remain."
class Cursor {
 public:
  explicit Cursor(const SizedReader& in) : in_(in) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return in_.size(); }
  uint64_t left() const { return in_.size() - pos_; }
  const std::string& where() const { return in_.where(); }
  const SizedReader& reader() const { return in_; }

  void need(uint64_t n, const std::string& what) const;
  void bytes(char* dst, uint64_t n, const std::string& what);
  template <typename T>
  T le(const std::string& what) {
    char b[sizeof(T)];
    bytes(b, sizeof(T), what);
    return read_le<T>(b);
  }
  /// A string stored as a u64 length and its bytes.
  std::string string(const std::string& what);
  void seek(uint64_t p) { pos_ = p; }

 private:
  const SizedReader& in_;
  uint64_t pos_ = 0;
  std::vector<char> buf_; // bytes [buf_start_, buf_start_ + buf_.size()) of the stream
  uint64_t buf_start_ = 0;
};

/// An io::Reader over bytes in memory (an archive's member), labelled `label`.
class MemoryReader : public io::Reader {
 public:
  MemoryReader(const char* data, size_t n, std::string label)
      : data_(data), n_(n), label_(std::move(label)) {}
  bool is_open() const override { return true; }
  bool good() const override { return good_; }
  size_t tell() override { return pos_; }
  void seek(int64_t off, std::ios_base::seekdir way = std::ios_base::beg) override;
  void read(char* data, size_t n) override;
  void read(char* data, size_t n, size_t offset) override;
  std::string label() const override { return label_; }

 private:
  const char* data_;
  size_t n_;
  std::string label_;
  size_t pos_ = 0;
  bool good_ = true;
};

/// A ParallelFileReader on `file`; throws std::runtime_error
/// "[op] file <file>: cannot open the file (<reason>)." when it cannot be opened.
std::shared_ptr<io::Reader> open_file_reader(const std::string& file, const char* op);
/// A FileWriter on `file` (created or truncated); throws std::runtime_error
/// "[op] file <file>: cannot open the file for writing (<reason>)." when that fails.
std::shared_ptr<io::Writer> open_file_writer(const std::string& file, const char* op);

/// Throws std::invalid_argument for a null writer, std::runtime_error
/// "[op] <label>: cannot write to it ..." for one that is not open or not good.
void check_writer(const std::shared_ptr<io::Writer>& out, const char* op);
/// Writes the byte ranges in order, checking good() after each; a writer that throws or
/// turns bad gives std::runtime_error "[op] <label>: writing N bytes failed ...".
void write_parts(io::Writer& out, const char* op,
                 const std::vector<std::pair<const char*, size_t>>& parts);

} // namespace nuvec::io_detail
