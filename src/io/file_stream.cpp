// nuvec io: io::ParallelFileReader and io::FileWriter (MLX's file streams, mlx/io/load.h)
// over POSIX file descriptors: read(2)/pread(2)/write(2), each looped until done, since a
// single call may transfer fewer bytes than asked.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "nuvec/io/load.h"

namespace nuvec::io {

namespace {

// One system call moves at most this much (Linux caps read/write near 2 GiB anyway).
constexpr size_t kMaxChunk = size_t{1} << 30;

int whence_of(std::ios_base::seekdir way) {
  if (way == std::ios_base::beg) return SEEK_SET;
  if (way == std::ios_base::end) return SEEK_END;
  return SEEK_CUR;
}

[[noreturn]] void throw_io(const char* op, const char* verb, size_t n, const std::string& path,
                           const char* why) {
  std::ostringstream msg;
  msg << "[" << op << "] Unable to " << verb << " " << n << " bytes " << (op[0] == 'r' ? "from" : "to")
      << " file " << path << " (" << why << ").";
  throw std::runtime_error(msg.str());
}

// Reads n bytes, at `offset` through pread when offset >= 0, else at the file position.
void read_fully(int fd, char* data, size_t n, int64_t offset, const std::string& path) {
  while (n != 0) {
    const size_t chunk = std::min(n, kMaxChunk);
    const ssize_t m = offset >= 0 ? ::pread(fd, data, chunk, static_cast<off_t>(offset))
                                  : ::read(fd, data, chunk);
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) throw_io("read", "read", n, path, m == 0 ? "the file ends first" : std::strerror(errno));
    data += m;
    n -= static_cast<size_t>(m);
    if (offset >= 0) offset += m;
  }
}

} // namespace

ParallelFileReader::ParallelFileReader(std::string file_path) : path_(std::move(file_path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
}

ParallelFileReader::~ParallelFileReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool ParallelFileReader::is_open() const { return fd_ >= 0; }

bool ParallelFileReader::good() const { return is_open(); }

size_t ParallelFileReader::tell() { return static_cast<size_t>(::lseek(fd_, 0, SEEK_CUR)); }

void ParallelFileReader::seek(int64_t off, std::ios_base::seekdir way) {
  ::lseek(fd_, static_cast<off_t>(off), whence_of(way));
}

void ParallelFileReader::read(char* data, size_t n) { read_fully(fd_, data, n, -1, path_); }

void ParallelFileReader::read(char* data, size_t n, size_t offset) {
  if (offset > static_cast<size_t>(std::numeric_limits<off_t>::max())) {
    throw_io("read", "read", n, path_, "the offset is past any file's end");
  }
  read_fully(fd_, data, n, static_cast<int64_t>(offset), path_);
}

std::string ParallelFileReader::label() const { return "file " + path_; }

FileWriter::FileWriter() = default;

FileWriter::FileWriter(std::string file_path) : path_(std::move(file_path)) {
  fd_ = ::open(path_.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
}

FileWriter::FileWriter(FileWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), failed_(other.failed_) {
  other.fd_ = -1;
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

bool FileWriter::is_open() const { return fd_ >= 0; }

bool FileWriter::good() const { return is_open() && !failed_; }

size_t FileWriter::tell() { return static_cast<size_t>(::lseek(fd_, 0, SEEK_CUR)); }

void FileWriter::seek(int64_t off, std::ios_base::seekdir way) {
  ::lseek(fd_, static_cast<off_t>(off), whence_of(way));
}

void FileWriter::write(const char* data, size_t n) {
  while (n != 0) {
    const ssize_t m = ::write(fd_, data, std::min(n, kMaxChunk));
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) {
      failed_ = true;
      throw_io("write", "write", n, path_, m == 0 ? "nothing was written" : std::strerror(errno));
    }
    data += m;
    n -= static_cast<size_t>(m);
  }
}

std::string FileWriter::label() const { return "file " + path_; }

} // namespace nuvec::io
