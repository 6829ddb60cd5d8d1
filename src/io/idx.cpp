// nuvec io: the IDX reader (the MNIST format, from LeCun's MNIST page: magic 0 0 type ndim,
// big-endian uint32 dimensions, big-endian data). gzip input goes through zlib.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "io/io_common.h"
#include "nuvec/io.h"

namespace nuvec {

namespace {

using io_detail::throw_file_error;

constexpr const char* kOp = "load_idx";

// Reads a plain or gzip file through zlib's gz API (which passes plain files through), so one
// code path serves both and every read is bounded by what the caller asks for.
class IdxReader {
 public:
  explicit IdxReader(const std::string& file) : file_(file) {
    gz_ = gzopen(file.c_str(), "rb");
    if (gz_ == nullptr) {
      throw_file_error(kOp, file_, "cannot open the file (", std::strerror(errno), ").");
    }
    // Larger buffers make decompressing the 47 MB training images noticeably faster.
    gzbuffer(gz_, 1 << 17);
  }
  ~IdxReader() {
    if (gz_ != nullptr) gzclose(gz_);
  }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end of the data).
  // A corrupt gzip stream (bad deflate data, CRC or length mismatch) throws.
  size_t read(char* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
      int r = gzread(gz_, dst + got, chunk);
      if (r < 0) check_error("while reading");
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    // gzread reports a truncated gzip stream as an error only through gzerror.
    if (got < n) check_error("at the end of the data");
    return got;
  }

  const std::string& file() const { return file_; }

 private:
  void check_error(const char* when) {
    int code = Z_OK;
    const char* msg = gzerror(gz_, &code);
    if (code == Z_OK || code == Z_STREAM_END) return;
    if (code == Z_ERRNO) {
      throw_file_error(kOp, file_, "read error ", when, " (", std::strerror(errno), ").");
    }
    // zlib prefixes its message with the path, which our message already names.
    std::string detail = msg != nullptr ? msg : "unknown error";
    if (detail.rfind(file_ + ": ", 0) == 0) detail.erase(0, file_.size() + 2);
    throw_file_error(kOp, file_, "the gzip stream is truncated or corrupt (zlib: ", detail, ").");
  }

  std::string file_;
  gzFile gz_{nullptr};
};

struct IdxType {
  Dtype dtype;
  const char* name;
};

// The IDX type byte to nuvec's dtype; false for bytes the format does not define.
bool idx_type(uint8_t code, IdxType& out) {
  switch (code) {
    case 0x08: out = {uint8, "unsigned byte"}; return true;
    case 0x09: out = {int8, "signed byte"}; return true;
    case 0x0B: out = {int16, "short"}; return true;
    case 0x0C: out = {int32, "int"}; return true;
    case 0x0D: out = {float32, "float"}; return true;
    case 0x0E: out = {float64, "double"}; return true;
    default: return false;
  }
}

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

} // namespace

array load_idx(const std::string& file) {
  IdxReader in(file);

  unsigned char magic[4];
  const size_t got_magic = in.read(reinterpret_cast<char*>(magic), 4);
  if (got_magic == 0) throw_file_error(kOp, file, "the file is empty.");
  if (got_magic < 4) {
    throw_file_error(kOp, file, "the file is too short for an IDX header (", got_magic,
                     " bytes; the header needs at least 4).");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    throw_file_error(kOp, file, "not an IDX file: the magic number must start with two zero "
                     "bytes; got 0x", std::hex, int(magic[0]), " 0x", int(magic[1]), ".");
  }
  IdxType type{uint8, ""};
  if (!idx_type(magic[2], type)) {
    throw_file_error(kOp, file, "unknown IDX type byte 0x", std::hex, int(magic[2]),
                     " (expected 0x08, 0x09, 0x0b, 0x0c, 0x0d or 0x0e).");
  }
  const int ndim = magic[3];

  std::vector<unsigned char> dims_raw(4 * static_cast<size_t>(ndim));
  const size_t got_dims = in.read(reinterpret_cast<char*>(dims_raw.data()), dims_raw.size());
  if (got_dims < dims_raw.size()) {
    throw_file_error(kOp, file, "truncated header: ", ndim, " dimensions need ",
                     dims_raw.size(), " bytes after the magic number; got ", got_dims, ".");
  }
  Shape shape(ndim);
  size_t count = 1;
  bool overflow = false;
  for (int d = 0; d < ndim; ++d) {
    const uint32_t dim = big_endian_u32(&dims_raw[4 * d]);
    if (dim > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) {
      throw_file_error(kOp, file, "dimension ", d, " is ", dim, ", over the limit of 2^31 - 1.");
    }
    shape[d] = static_cast<int32_t>(dim);
    if (dim != 0 && count > std::numeric_limits<size_t>::max() / 16 / dim) overflow = true;
    count *= dim;
  }
  const size_t item = size_of(type.dtype);
  if (overflow) {
    throw_file_error(kOp, file, "the dimensions describe more data than can be addressed.");
  }
  const size_t nbytes = count * item;

  // Chunked reads: a corrupt header claiming terabytes fails at the end of the real data.
  std::vector<char> data;
  constexpr size_t kChunk = size_t(1) << 24;
  while (data.size() < nbytes) {
    const size_t want = std::min(kChunk, nbytes - data.size());
    const size_t old = data.size();
    data.resize(old + want);
    const size_t got = in.read(data.data() + old, want);
    if (got < want) {
      throw_file_error(kOp, file, "truncated data: the header says ", count, " ",
                       type.name, " elements (", nbytes, " bytes) of shape ", shape,
                       ", but only ", old + got, " bytes follow it.");
    }
  }
  char extra;
  if (in.read(&extra, 1) != 0) {
    throw_file_error(kOp, file, "more data than the header's shape ", shape, " says (",
                     nbytes, " bytes expected); the file is corrupt or not an IDX file.");
  }

  // IDX data is big-endian.
  if (io_detail::host_is_little_endian()) {
    io_detail::byteswap_elements(data.data(), count, item);
  }
  return io_detail::array_from_bytes(data.data(), shape, type.dtype);
}

} // namespace nuvec
