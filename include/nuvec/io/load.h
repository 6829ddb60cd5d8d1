// nuvec: the byte streams that save/load read and write (MLX's mlx/io/load.h): the abstract
// io::Reader and io::Writer, and their file implementations io::ParallelFileReader and
// io::FileWriter over POSIX file descriptors (src/io/file_stream.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ios>
#include <memory>
#include <string>

namespace nuvec::io {

/// A source of bytes that the loaders read (MLX's io::Reader). Implement it to load from
/// memory, an archive member or a network buffer. The loaders in nuvec/io.h treat the stream
/// as a whole, from offset 0 to its end: they find its size with seek(0, end) and tell(),
/// read with the positional read(data, n, offset), and check good() after every read, so a
/// reader may report failure either by throwing or by turning good() false.
class Reader {
 public:
  /// Whether the source was opened (a file reader: the file could be opened).
  virtual bool is_open() const = 0;
  /// Whether the source is usable: open, and no read has failed.
  virtual bool good() const = 0;
  /// The current position, in bytes from the start (non-const as in iostream's tellg).
  virtual size_t tell() = 0;
  /// Moves the current position to `off` bytes from `way` (beg, cur or end).
  virtual void seek(int64_t off, std::ios_base::seekdir way = std::ios_base::beg) = 0;
  /// Reads `n` bytes at the current position into `data` and advances the position.
  virtual void read(char* data, size_t n) = 0;
  /// Reads `n` bytes at `offset` (from the start) into `data`; the position is unspecified
  /// afterwards (file readers leave it unchanged).
  virtual void read(char* data, size_t n, size_t offset) = 0;
  /// What the stream is, for error messages ("file <path>" for files).
  virtual std::string label() const = 0;
  virtual ~Reader() = default;
};

/// A sink of bytes that the savers write (MLX's io::Writer). The savers check is_open() and
/// good() before writing and good() after every write, so a writer may report failure either
/// by throwing or by turning good() false; either way save throws std::runtime_error.
class Writer {
 public:
  /// Whether the sink was opened (a file writer: the file could be created).
  virtual bool is_open() const = 0;
  /// Whether the sink is usable: open, and no write has failed.
  virtual bool good() const = 0;
  /// The current position, in bytes from the start.
  virtual size_t tell() = 0;
  /// Moves the current position to `off` bytes from `way` (beg, cur or end).
  virtual void seek(int64_t off, std::ios_base::seekdir way = std::ios_base::beg) = 0;
  /// Writes the `n` bytes at `data` at the current position and advances it.
  virtual void write(const char* data, size_t n) = 0;
  /// What the stream is, for error messages ("file <path>" for files).
  virtual std::string label() const = 0;
  virtual ~Writer() = default;
};

/// Reads a file through a POSIX file descriptor (MLX's io::ParallelFileReader). The file is
/// opened read-only by the constructor; is_open() says whether that worked (errno is left as
/// open(2) set it). Positional reads use pread(2) and leave the position alone. MLX splits
/// large positional reads over a thread pool; nuvec reads on the calling thread, as loading
/// is eager here.
/// Throws std::runtime_error ("[read] ...") from read when the file ends early or the system
/// call fails.
/// Source: MLX mlx/io/load.h.
class ParallelFileReader : public Reader {
 public:
  explicit ParallelFileReader(std::string file_path);
  ~ParallelFileReader() override;
  ParallelFileReader(const ParallelFileReader&) = delete;
  ParallelFileReader& operator=(const ParallelFileReader&) = delete;

  bool is_open() const override;
  bool good() const override;
  size_t tell() override;
  void seek(int64_t off, std::ios_base::seekdir way = std::ios_base::beg) override;
  void read(char* data, size_t n) override;
  void read(char* data, size_t n, size_t offset) override;
  /// "file <path>", as MLX labels it.
  std::string label() const override;

 private:
  std::string path_; // declared first so that open(2) is the constructor's last call
  int fd_ = -1;
};

/// The name MLX's earlier versions gave their file reader; the same class.
using FileReader = ParallelFileReader;

/// Writes a file through a POSIX file descriptor (MLX's io::FileWriter). The constructor
/// creates or truncates the file (mode 0644); is_open() says whether that worked (errno is
/// left as open(2) set it). A default-constructed writer is not open. Movable, not copyable.
/// Throws std::runtime_error ("[write] ...") from write when the system call fails (a full
/// disk, a closed pipe); good() is false after that.
/// Source: MLX mlx/io/load.h.
class FileWriter : public Writer {
 public:
  explicit FileWriter();
  explicit FileWriter(std::string file_path);
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  FileWriter(FileWriter&& other) noexcept;
  ~FileWriter() override;

  bool is_open() const override;
  bool good() const override;
  size_t tell() override;
  void seek(int64_t off, std::ios_base::seekdir way = std::ios_base::beg) override;
  void write(const char* data, size_t n) override;
  /// "file <path>", as MLX labels it.
  std::string label() const override;

 private:
  std::string path_; // declared first so that open(2) is the constructor's last call
  int fd_ = -1;
  bool failed_ = false;
};

} // namespace nuvec::io
