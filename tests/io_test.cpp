// nuvec tests: .npy save/load (round trips over every dtype, files written by NumPy and by
// hand in the format's other forms), IDX reading (plain and gzip), and MLX's io::Reader /
// io::Writer streams (user-defined in-memory streams for .npy and safetensors, the file
// streams, failing streams), with truncated and corrupt files checked to throw
// std::runtime_error naming the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nuvec/io.h"
#include "nuvec/nuvec.h"
#include "test_utils.h"

namespace nx = nuvec;
namespace fs = std::filesystem;
using nx::testing::rng;

namespace {

// The process's scratch directory (tests/test_utils.h), removed at exit.
const fs::path& tmp_dir() {
  return nuvec::testing::scratch_dir();
}

std::string path(const std::string& name) {
  return (tmp_dir() / name).string();
}

void write_bytes(const std::string& file, const std::vector<char>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// The raw bytes of a's elements in row-major order (host byte order).
std::vector<char> bytes_of(const nx::array& a) {
  nx::array c = nx::contiguous(a);
  c.eval();
  const char* p = static_cast<const char*>(c.raw_data());
  return std::vector<char>(p, p + c.nbytes());
}

// Random data of any dtype, made from raw random bytes with NaN-free floats (so that byte
// equality is the right comparison) and 0/1 bools.
nx::array random_array(const nx::Shape& shape, nx::Dtype dtype) {
  if (dtype == nx::bool_) {
    return nx::testing::randint(shape, 0, 1, nx::int32) > 0;
  }
  if (nx::issubdtype(dtype, nx::inexact)) {
    return nx::testing::randn(shape, dtype);
  }
  const int64_t lo = nx::issubdtype(dtype, nx::unsignedinteger) ? 0 : -100;
  return nx::astype(nx::testing::randint(shape, lo, 120, nx::int64), dtype);
}

// Expects `f` to throw std::runtime_error whose message contains each of `parts`.
template <typename F>
void expect_file_error(F&& f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected std::runtime_error containing '" << parts[0] << "'";
  } catch (const std::runtime_error& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
    }
  }
}

// Debian's python3-numpy lives under /usr/bin/python3; a python3 earlier on PATH (pyenv)
// may lack it.
std::string python() {
  return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

bool have_numpy() {
  static const bool ok =
      std::system((python() + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

// ------------------------------------------------------------------------------------
// IDX helpers: the format written independently of the reader.

std::vector<char> idx_bytes(uint8_t type, const std::vector<uint32_t>& dims,
                            const std::vector<char>& be_data) {
  std::vector<char> b = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<char>((d >> s) & 0xFF));
  }
  b.insert(b.end(), be_data.begin(), be_data.end());
  return b;
}

// Host-order element bytes to big-endian.
std::vector<char> to_big_endian(std::vector<char> bytes, size_t width) {
  for (size_t i = 0; i + width <= bytes.size(); i += width) {
    for (size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(bytes[i + a], bytes[i + b]);
  }
  return bytes;
}

std::string gzip_file(const std::string& file) {
  const std::string gz = file + ".gz";
  const std::string cmd = "gzip -c '" + file + "' > '" + gz + "'";
  if (std::system(cmd.c_str()) != 0) return "";
  return gz;
}

} // namespace

// ====================================================================================
// .npy

TEST(Npy, RoundTripEveryDtype) {
  for (auto dtype : nx::all_dtypes) {
    for (const nx::Shape& shape :
         {nx::Shape{}, nx::Shape{7}, nx::Shape{3, 5}, nx::Shape{2, 0, 3}, nx::Shape{2, 3, 4}}) {
      SCOPED_TRACE(nx::dtype_name(dtype));
      auto a = random_array(shape, dtype);
      const std::string f = path("rt_" + nx::dtype_name(dtype) + ".npy");
      nx::save(f, a);
      auto b = nx::load(f);
      EXPECT_EQ(b.dtype(), dtype);
      EXPECT_EQ(b.shape(), shape);
      EXPECT_EQ(bytes_of(b), bytes_of(a));
    }
  }
}

TEST(Npy, SaveAppendsExtensionAndAlignsHeader) {
  auto a = nx::testing::randn({4, 3}, nx::float32);
  nx::save(path("noext"), a);
  ASSERT_TRUE(fs::exists(path("noext.npy")));
  auto bytes = read_bytes(path("noext.npy"));
  ASSERT_GE(bytes.size(), 10u);
  const size_t hlen = static_cast<unsigned char>(bytes[8]) |
                      (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(bytes[10 + hlen - 1], '\n');
  EXPECT_EQ(bytes.size(), 10 + hlen + 4 * 3 * 4);
  EXPECT_EQ(bytes_of(nx::load(path("noext.npy"))), bytes_of(a));
}

TEST(Npy, SavesViewsInRowMajorOrder) {
  auto a = nx::testing::randn({3, 4}, nx::float64);
  auto t = nx::transpose(a);
  nx::save(path("view.npy"), t);
  auto b = nx::load(path("view.npy"));
  EXPECT_EQ(b.shape(), (nx::Shape{4, 3}));
  EXPECT_EQ(nx::testing::to_vector(b), nx::testing::to_vector(t));
}

// Hand-made files in the forms NumPy and others also write: big-endian data, Fortran order,
// version 2.0, double quotes, Python 2's long suffix, no trailing comma.
TEST(Npy, ReadsOtherFormsOfTheFormat) {
  auto file_with = [](int major, const std::string& dict, const std::vector<char>& data) {
    std::string h = dict;
    const size_t prefix = major == 1 ? 10 : 12;
    while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
    h += '\n';
    std::vector<char> b = {'\x93', 'N', 'U', 'M', 'P', 'Y', static_cast<char>(major), 0};
    const uint32_t n = static_cast<uint32_t>(h.size());
    for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) b.push_back(static_cast<char>(n >> (8 * i)));
    b.insert(b.end(), h.begin(), h.end());
    b.insert(b.end(), data.begin(), data.end());
    return b;
  };
  // Big-endian int32 1, 2, 3, -4 in shape (2, 2), Fortran order: columns first.
  std::vector<char> be = {0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, '\xff', '\xff', '\xff', '\xfc'};
  write_bytes(path("be_f.npy"),
              file_with(2, "{\"descr\": \">i4\", \"fortran_order\": True, \"shape\": (2L, 2L)}", be));
  auto a = nx::load(path("be_f.npy"));
  EXPECT_EQ(a.dtype(), nx::int32);
  nx::testing::expect_close(a, {2, 2}, {1, 3, 2, -4});

  // Big-endian complex64: each float half swapped separately.
  float re = 1.5f, im = -2.25f;
  std::vector<char> c(8);
  std::memcpy(c.data(), &re, 4);
  std::memcpy(c.data() + 4, &im, 4);
  c = to_big_endian(c, 4);
  write_bytes(path("be_c.npy"), file_with(1, "{'descr': '>c8', 'fortran_order': False, 'shape': (1,), }", c));
  auto z = nx::load(path("be_c.npy"));
  ASSERT_EQ(z.dtype(), nx::complex64);
  auto v = z.item<nx::complex64_t>();
  EXPECT_EQ(v.real(), re);
  EXPECT_EQ(v.imag(), im);

  // Bool bytes other than 0/1 read as true.
  write_bytes(path("b.npy"), file_with(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                       {0, 1, 7}));
  nx::testing::expect_close(nx::astype(nx::load(path("b.npy")), nx::int32), {3}, {0, 1, 1});
}

TEST(Npy, AgreesWithNumPy) {
  if (!have_numpy()) GTEST_SKIP() << "python3-numpy is not installed";
  // nuvec writes, NumPy reads and checks; NumPy writes, nuvec reads.
  auto a = nx::testing::randn({3, 4}, nx::float32);
  nx::save(path("to_np.npy"), a);
  auto v = nx::testing::to_vector(a);
  std::string expect = "[";
  for (double x : v) expect += std::to_string(x) + ",";
  expect += "]";
  const std::string check = python() + " -c \"import numpy as np; a = np.load('" + path("to_np.npy") +
                            "'); assert a.dtype == np.float32 and a.shape == (3, 4); "
                            "assert np.allclose(a.ravel(), " + expect + ", atol=1e-5)\"";
  EXPECT_EQ(std::system(check.c_str()), 0);

  const std::string make = python() + " -c \"import numpy as np; "
                           "np.save('" + path("from_np.npy") + "', np.arange(24, dtype='>i2').reshape(2, 3, 4)); "
                           "np.save('" + path("from_np_f.npy") + "', np.asfortranarray(np.arange(6.0).reshape(2, 3)))\"";
  ASSERT_EQ(std::system(make.c_str()), 0);
  auto b = nx::load(path("from_np.npy"));
  EXPECT_EQ(b.dtype(), nx::int16);
  std::vector<double> want(24);
  for (int i = 0; i < 24; ++i) want[i] = i;
  nx::testing::expect_close(b, {2, 3, 4}, want);
  auto f = nx::load(path("from_np_f.npy"));
  EXPECT_EQ(f.dtype(), nx::float64);
  nx::testing::expect_close(f, {2, 3}, {0, 1, 2, 3, 4, 5});
}

TEST(Npy, MalformedFilesThrowNamingTheFile) {
  auto write_str = [](const std::string& name, const std::string& s) {
    write_bytes(path(name), std::vector<char>(s.begin(), s.end()));
    return path(name);
  };
  auto header = [](const std::string& dict) {
    std::string h = std::string("\x93NUMPY\x01\x00", 8);
    h += static_cast<char>(dict.size() & 0xFF);
    h += static_cast<char>(dict.size() >> 8);
    return h + dict;
  };
  expect_file_error([] { nx::load(path("missing.npy")); }, {"[load]", "missing.npy", "cannot open"});
  const auto empty = write_str("empty.npy", "");
  expect_file_error([&] { nx::load(empty); }, {"empty.npy", "not a .npy file"});
  const auto text = write_str("text.npy", "hello world, not numpy");
  expect_file_error([&] { nx::load(text); }, {"text.npy", "not a .npy file"});
  const auto short_pre = write_str("short.npy", std::string("\x93NUMPY\x01", 7));
  expect_file_error([&] { nx::load(short_pre); }, {"short.npy", "truncated"});
  const auto version = write_str("version.npy", std::string("\x93NUMPY\x09\x00\x10\x00", 10) + std::string(16, ' '));
  expect_file_error([&] { nx::load(version); }, {"version.npy", "version 9"});
  const auto long_header = write_str("long_header.npy", std::string("\x93NUMPY\x01\x00\xff\x00", 10) + "{'descr'");
  expect_file_error([&] { nx::load(long_header); }, {"long_header.npy", "truncated header"});
  const auto object = write_str("object.npy", header("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }") + std::string(8, '\0'));
  expect_file_error([&] { nx::load(object); }, {"object.npy", "unsupported dtype '|O'"});
  const auto no_shape = write_str("no_shape.npy", header("{'descr': '<f4', 'fortran_order': False, }"));
  expect_file_error([&] { nx::load(no_shape); }, {"no_shape.npy", "lacks the key 'shape'"});
  const auto neg = write_str("neg.npy", header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"));
  expect_file_error([&] { nx::load(neg); }, {"neg.npy", "non-negative"});
  const auto huge = write_str("huge.npy", header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999,), }"));
  expect_file_error([&] { nx::load(huge); }, {"huge.npy", "2^31 - 1"});
  const auto big = write_str("big.npy", header("{'descr': '<f8', 'fortran_order': False, 'shape': (2147483647, 2147483647, 2147483647), }"));
  expect_file_error([&] { nx::load(big); }, {"big.npy", "too large"});
  const auto garbage = write_str("garbage.npy", header("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }"));
  expect_file_error([&] { nx::load(garbage); }, {"garbage.npy", "True or False"});
  const auto short_data = write_str("short_data.npy", header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }") + std::string(15, '\0'));
  expect_file_error([&] { nx::load(short_data); }, {"short_data.npy", "truncated data", "needs 16 bytes", "has 15"});
  const auto long_data = write_str("long_data.npy", header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }") + std::string(17, '\0'));
  expect_file_error([&] { nx::load(long_data); }, {"long_data.npy", "trailing data"});
}

// Every truncation of a valid file, and random byte corruptions, either load or throw
// std::runtime_error (never crash or read out of bounds; run under ASan to see the latter).
TEST(Npy, TruncatedAndCorruptedFilesNeverCrash) {
  nx::save(path("whole.npy"), nx::testing::randn({5, 3}, nx::float32));
  const auto whole = read_bytes(path("whole.npy"));
  for (size_t n = 0; n < whole.size(); ++n) {
    write_bytes(path("cut.npy"), std::vector<char>(whole.begin(), whole.begin() + n));
    EXPECT_THROW(nx::load(path("cut.npy")), std::runtime_error) << "length " << n;
  }
  std::uniform_int_distribution<size_t> pos(0, 127);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 300; ++trial) {
    auto b = whole;
    for (int k = 0; k < 3; ++k) b[pos(rng())] = static_cast<char>(byte(rng()));
    write_bytes(path("flip.npy"), b);
    try {
      nx::load(path("flip.npy")).eval();
    } catch (const std::runtime_error&) {
    }
  }
}

TEST(Npy, SaveToUnwritablePathThrows) {
  expect_file_error([] { nx::save(path("no/such/dir/x.npy"), nx::array(1.0f)); },
                    {"[save]", "x.npy", "cannot open"});
}

// ====================================================================================
// IDX

TEST(Idx, ReadsEveryTypePlainAndGzipped) {
  struct Case {
    uint8_t code;
    nx::Dtype dtype;
  };
  for (auto c : {Case{0x08, nx::uint8}, Case{0x09, nx::int8}, Case{0x0B, nx::int16},
                 Case{0x0C, nx::int32}, Case{0x0D, nx::float32}, Case{0x0E, nx::float64}}) {
    SCOPED_TRACE(nx::dtype_name(c.dtype));
    const nx::Shape shape = {3, 4, 5};
    auto a = random_array(shape, c.dtype);
    const auto be = to_big_endian(bytes_of(a), nx::size_of(c.dtype));
    const std::string f = path("t_" + nx::dtype_name(c.dtype) + ".idx");
    write_bytes(f, idx_bytes(c.code, {3, 4, 5}, be));
    auto b = nx::load_idx(f);
    EXPECT_EQ(b.dtype(), c.dtype);
    EXPECT_EQ(b.shape(), shape);
    EXPECT_EQ(bytes_of(b), bytes_of(a));

    const std::string gz = gzip_file(f);
    ASSERT_FALSE(gz.empty()) << "gzip failed";
    auto g = nx::load_idx(gz);
    EXPECT_EQ(g.shape(), shape);
    EXPECT_EQ(bytes_of(g), bytes_of(a));
  }
}

TEST(Idx, MnistShapedLabelsAndImages) {
  // The two layouts MNIST uses: labels (N,) and images (N, 28, 28) of unsigned bytes.
  std::vector<char> labels = {0, 9, 3, 7};
  write_bytes(path("labels-idx1-ubyte"), idx_bytes(0x08, {4}, labels));
  nx::testing::expect_close(nx::load_idx(path("labels-idx1-ubyte")), {4}, {0, 9, 3, 7});
  std::vector<char> pixels(2 * 28 * 28);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i % 251);
  write_bytes(path("images-idx3-ubyte"), idx_bytes(0x08, {2, 28, 28}, pixels));
  auto im = nx::load_idx(gzip_file(path("images-idx3-ubyte")));
  EXPECT_EQ(im.shape(), (nx::Shape{2, 28, 28}));
  EXPECT_EQ(nx::sum(nx::astype(im, nx::int64)).item<int64_t>(),
            [&] { int64_t s = 0; for (char p : pixels) s += static_cast<unsigned char>(p); return s; }());
}

TEST(Idx, CorruptFilesThrowNamingTheFile) {
  expect_file_error([] { nx::load_idx(path("nope-idx1-ubyte")); }, {"[load_idx]", "nope-idx1-ubyte", "cannot open"});
  write_bytes(path("empty.idx"), {});
  expect_file_error([] { nx::load_idx(path("empty.idx")); }, {"empty.idx", "empty"});
  write_bytes(path("short.idx"), {0, 0, 8});
  expect_file_error([] { nx::load_idx(path("short.idx")); }, {"short.idx", "too short"});
  write_bytes(path("magic.idx"), {1, 2, 8, 1, 0, 0, 0, 1, 5});
  expect_file_error([] { nx::load_idx(path("magic.idx")); }, {"magic.idx", "not an IDX file"});
  write_bytes(path("type.idx"), {0, 0, 0x0A, 1, 0, 0, 0, 1, 5});
  expect_file_error([] { nx::load_idx(path("type.idx")); }, {"type.idx", "unknown IDX type byte 0xa"});
  write_bytes(path("dims.idx"), {0, 0, 8, 3, 0, 0, 0, 1, 0, 0});
  expect_file_error([] { nx::load_idx(path("dims.idx")); }, {"dims.idx", "truncated header"});
  write_bytes(path("bigdim.idx"), idx_bytes(8, {0xFFFFFFFFu}, {}));
  expect_file_error([] { nx::load_idx(path("bigdim.idx")); }, {"bigdim.idx", "2^31 - 1"});
  // A header claiming 2^31-1 cubed bytes: rejected without allocating the claim.
  write_bytes(path("huge.idx"), idx_bytes(8, {0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF}, {1, 2, 3}));
  expect_file_error([] { nx::load_idx(path("huge.idx")); }, {"huge.idx", "more data than can be addressed"});
  // 60000 x 28 x 28 claimed, 100 bytes present: fails at the end of the real data.
  write_bytes(path("claim.idx"), idx_bytes(8, {60000, 28, 28}, std::vector<char>(100, 1)));
  expect_file_error([] { nx::load_idx(path("claim.idx")); }, {"claim.idx", "truncated data", "only 100 bytes"});
  write_bytes(path("trail.idx"), idx_bytes(8, {2}, {1, 2, 3}));
  expect_file_error([] { nx::load_idx(path("trail.idx")); }, {"trail.idx", "more data than"});
}

TEST(Idx, TruncatedAndCorruptGzipThrow) {
  std::vector<char> pixels(50 * 28 * 28);
  std::mt19937 gen(7);
  for (auto& p : pixels) p = static_cast<char>(gen() & 0xFF);
  write_bytes(path("g-idx3-ubyte"), idx_bytes(0x08, {50, 28, 28}, pixels));
  const std::string gz = gzip_file(path("g-idx3-ubyte"));
  ASSERT_FALSE(gz.empty());
  const auto whole = read_bytes(gz);
  // Cut in the deflate stream and in the 8-byte CRC/length trailer.
  for (size_t n : {size_t(12), whole.size() / 2, whole.size() - 6, whole.size() - 1}) {
    write_bytes(path("cut.gz"), std::vector<char>(whole.begin(), whole.begin() + n));
    expect_file_error([] { nx::load_idx(path("cut.gz")); }, {"cut.gz"});
  }
  // Flipped bits in the compressed data or the CRC: a zlib error, never garbage silently.
  for (size_t at : {whole.size() / 3, whole.size() - 7}) {
    auto b = whole;
    b[at] = static_cast<char>(b[at] ^ 0x5A);
    write_bytes(path("flip.gz"), b);
    expect_file_error([] { nx::load_idx(path("flip.gz")); }, {"flip.gz"});
  }
}

TEST(Idx, EveryTruncationOfAPlainFileThrows) {
  std::vector<char> data(2 * 3 * 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i);
  const auto whole = idx_bytes(0x0B, {2, 3, 2}, data);
  for (size_t n = 0; n < whole.size(); ++n) {
    write_bytes(path("cut.idx"), std::vector<char>(whole.begin(), whole.begin() + n));
    EXPECT_THROW(nx::load_idx(path("cut.idx")), std::runtime_error) << "length " << n;
  }
  write_bytes(path("whole.idx"), whole);
  EXPECT_EQ(nx::load_idx(path("whole.idx")).shape(), (nx::Shape{2, 3, 2}));
}

// ====================================================================================
// io::Reader / io::Writer (MLX's stream interfaces): user-defined streams, the file
// streams, and failures reported either way (an exception or good() turning false).

namespace {

// A user-defined in-memory writer, as a port of MLX code would write one. With
// `fail_at` set, a write that would pass that many bytes stores nothing and turns good()
// false (the iostream way of failing, no exception).
class MemoryWriter : public nx::io::Writer {
 public:
  explicit MemoryWriter(size_t fail_at = SIZE_MAX) : fail_at_(fail_at) {}
  bool is_open() const override { return true; }
  bool good() const override { return good_; }
  size_t tell() override { return pos_; }
  void seek(int64_t off, std::ios_base::seekdir way = std::ios_base::beg) override {
    pos_ = static_cast<size_t>((way == std::ios_base::beg ? 0 : way == std::ios_base::end ? bytes.size() : pos_) + off);
  }
  void write(const char* data, size_t n) override {
    if (!good_ || pos_ + n > fail_at_) {
      good_ = false;
      return;
    }
    if (bytes.size() < pos_ + n) bytes.resize(pos_ + n);
    std::memcpy(bytes.data() + pos_, data, n);
    pos_ += n;
  }
  std::string label() const override { return "memory buffer"; }
  std::vector<char> bytes;

 private:
  size_t fail_at_;
  size_t pos_ = 0;
  bool good_ = true;
};

// A user-defined in-memory reader over a copy of `bytes`; reads past the end turn good()
// false. `open` false makes a reader that is not open.
class MemoryReader : public nx::io::Reader {
 public:
  explicit MemoryReader(std::vector<char> bytes, bool open = true) : bytes_(std::move(bytes)), open_(open) {}
  bool is_open() const override { return open_; }
  bool good() const override { return open_ && good_; }
  size_t tell() override { return pos_; }
  void seek(int64_t off, std::ios_base::seekdir way = std::ios_base::beg) override {
    pos_ = static_cast<size_t>((way == std::ios_base::beg ? 0 : way == std::ios_base::end ? bytes_.size() : pos_) + off);
  }
  void read(char* data, size_t n) override {
    read(data, n, pos_);
    pos_ += n;
  }
  void read(char* data, size_t n, size_t offset) override {
    ++reads;
    if (offset + n > bytes_.size()) {
      good_ = false;
      return;
    }
    std::memcpy(data, bytes_.data() + offset, n);
  }
  std::string label() const override { return "memory reader"; }
  int reads = 0;

 private:
  std::vector<char> bytes_;
  bool open_;
  size_t pos_ = 0;
  bool good_ = true;
};

// A reader whose stream claims more bytes than it can deliver: reads throw, as
// MLX's file reader does at the end of a file.
class ThrowingReader : public MemoryReader {
 public:
  using MemoryReader::MemoryReader;
  void read(char*, size_t n, size_t offset) override {
    throw std::runtime_error("device gone at byte " + std::to_string(offset + n));
  }
};

// A safetensors map holding every dtype, complex64 and float64 included.
std::unordered_map<std::string, nx::array> every_dtype_map() {
  std::unordered_map<std::string, nx::array> m;
  for (auto dtype : nx::all_dtypes) m.insert({nx::dtype_name(dtype), random_array({3, 2}, dtype)});
  m.insert({"scalar", random_array({}, nx::float32)});
  m.insert({"view", nx::transpose(random_array({2, 5}, nx::int16))});
  return m;
}

void expect_same_map(const std::unordered_map<std::string, nx::array>& got,
                     const std::unordered_map<std::string, nx::array>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [k, v] : want) {
    SCOPED_TRACE(k);
    ASSERT_TRUE(got.count(k));
    EXPECT_EQ(got.at(k).dtype(), v.dtype());
    EXPECT_EQ(got.at(k).shape(), v.shape());
    EXPECT_EQ(bytes_of(got.at(k)), bytes_of(v));
  }
}

} // namespace

TEST(Streams, NpyRoundTripsThroughUserDefinedStreams) {
  for (auto dtype : nx::all_dtypes) {
    SCOPED_TRACE(nx::dtype_name(dtype));
    auto a = random_array({4, 3}, dtype);
    auto out = std::make_shared<MemoryWriter>();
    nx::save(out, a);
    // The bytes are exactly what the file overload writes.
    nx::save(path("stream.npy"), a);
    EXPECT_EQ(out->bytes, read_bytes(path("stream.npy")));
    auto b = nx::load(std::make_shared<MemoryReader>(out->bytes));
    EXPECT_EQ(b.dtype(), dtype);
    EXPECT_EQ(b.shape(), (nx::Shape{4, 3}));
    EXPECT_EQ(bytes_of(b), bytes_of(a));
  }
}

TEST(Streams, SafetensorsRoundTripsThroughUserDefinedStreams) {
  const auto in = every_dtype_map();
  const nx::SafetensorsMetadata meta = {{"format", "mlx"}, {"k", "v"}};
  auto out = std::make_shared<MemoryWriter>();
  nx::save_safetensors(out, in, meta);
  nx::save_safetensors(path("stream.safetensors"), in, meta);
  EXPECT_EQ(out->bytes, read_bytes(path("stream.safetensors")));
  auto reader = std::make_shared<MemoryReader>(out->bytes);
  nx::SafetensorsLoad loaded = nx::load_safetensors(reader);
  expect_same_map(loaded.first, in);
  EXPECT_EQ(loaded.second, meta);
  // Headers are read through a few reads, not one per field.
  EXPECT_LT(reader->reads, 3 + static_cast<int>(in.size()));
}

TEST(Streams, Complex64AndFloat64InSafetensorsUseMlxCodes) {
  const nx::array z = nx::array({nx::complex64_t(1.5f, -2.0f), nx::complex64_t(0.0f, 3.25f)});
  const nx::array d = nx::array({1.0, 1e-300}, nx::float64);
  nx::save_safetensors(path("cz"), {{"z", z}, {"d", d}}); // ".safetensors" appended
  const auto bytes = read_bytes(path("cz.safetensors"));
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("\"dtype\":\"C64\""), std::string::npos) << text.substr(0, 200);
  EXPECT_NE(text.find("\"dtype\":\"F64\""), std::string::npos);
  auto [m, meta] = nx::load_safetensors(path("cz.safetensors"));
  ASSERT_EQ(m.at("z").dtype(), nx::complex64);
  EXPECT_EQ(m.at("z").shape(), (nx::Shape{2}));
  EXPECT_EQ(bytes_of(m.at("z")), bytes_of(z));
  EXPECT_EQ(m.at("d").dtype(), nx::float64);
  EXPECT_EQ(bytes_of(m.at("d")), bytes_of(d));
  EXPECT_TRUE(meta.empty());
}

// MLX writes "__metadata__": null when there is no metadata; such files load.
TEST(Streams, SafetensorsWithNullMetadataAsMlxWritesIt) {
  const std::string json = R"({"__metadata__":null,"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::vector<char> b(8);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((uint64_t(json.size()) >> (8 * i)) & 0xFF);
  b.insert(b.end(), json.begin(), json.end());
  const float w[2] = {0.5f, -4.0f};
  b.insert(b.end(), reinterpret_cast<const char*>(w), reinterpret_cast<const char*>(w) + 8);
  auto [m, meta] = nx::load_safetensors(std::make_shared<MemoryReader>(b));
  EXPECT_TRUE(meta.empty());
  nx::testing::expect_close(m.at("w"), {2}, {0.5, -4.0});
}

TEST(Streams, FailingWriterGivesAClearError) {
  const auto a = random_array({64}, nx::float32);
  // The header fits, the data does not: the writer turns good() false, no exception.
  expect_file_error([&] { nx::save(std::make_shared<MemoryWriter>(100), a); },
                    {"[save]", "memory buffer", "writing 384 bytes failed", "good() == false"});
  expect_file_error([&] { nx::save_safetensors(std::make_shared<MemoryWriter>(10), {{"a", a}}); },
                    {"[save_safetensors]", "memory buffer", "failed"});
  // A writer that is already bad is refused before anything is written.
  auto bad = std::make_shared<MemoryWriter>(0);
  bad->write("x", 1);
  ASSERT_FALSE(bad->good());
  expect_file_error([&] { nx::save(bad, a); }, {"[save]", "memory buffer", "cannot write to it"});
  EXPECT_THROW(nx::save(std::shared_ptr<nx::io::Writer>(), a), std::invalid_argument);
  // A file writer on a full disk throws; the message names the op and the file.
  expect_file_error([&] { nx::save_safetensors(std::make_shared<nx::io::FileWriter>("/dev/full"), {{"a", a}}); },
                    {"[save_safetensors]", "file /dev/full", "No space left"});
  expect_file_error([&] { nx::save(std::make_shared<nx::io::FileWriter>("/dev/full"), a); },
                    {"[save]", "file /dev/full", "No space left"});
}

TEST(Streams, FailingReadersGiveClearErrors) {
  nx::save(path("r.npy"), random_array({8}, nx::int32));
  const auto bytes = read_bytes(path("r.npy"));
  expect_file_error([&] { nx::load(std::make_shared<MemoryReader>(bytes, false)); },
                    {"[load]", "memory reader", "is_open() == false"});
  expect_file_error([&] { nx::load_safetensors(std::make_shared<ThrowingReader>(bytes)); },
                    {"[load_safetensors]", "memory reader", "device gone"});
  EXPECT_THROW(nx::load(std::shared_ptr<nx::io::Reader>()), std::invalid_argument);
  // Every truncation through a user-defined reader is an error, as through a file.
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(nx::load(std::make_shared<MemoryReader>(std::vector<char>(bytes.begin(), bytes.begin() + n))),
                 std::runtime_error)
        << "length " << n;
  }
}

TEST(Streams, FileReaderAndWriterFollowMlxSemantics) {
  const std::string f = path("fs.bin");
  {
    nx::io::FileWriter w(f);
    ASSERT_TRUE(w.is_open());
    EXPECT_TRUE(w.good());
    EXPECT_EQ(w.label(), "file " + f);
    w.write("hello world", 11);
    EXPECT_EQ(w.tell(), 11u);
    w.seek(6);
    w.write("WORLD", 5);
    w.seek(0, std::ios_base::end);
    w.write("!", 1);
    nx::io::FileWriter moved(std::move(w));
    EXPECT_TRUE(moved.is_open());
    EXPECT_FALSE(w.is_open());
  }
  EXPECT_FALSE(nx::io::FileWriter().is_open());
  nx::io::ParallelFileReader r(f);
  ASSERT_TRUE(r.is_open());
  EXPECT_EQ(r.label(), "file " + f);
  char buf[12] = {};
  r.read(buf, 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(r.tell(), 5u);
  r.read(buf, 5, 6); // positional: the position stays at 5
  EXPECT_EQ(std::string(buf, 5), "WORLD");
  EXPECT_EQ(r.tell(), 5u);
  r.seek(-1, std::ios_base::end);
  r.read(buf, 1);
  EXPECT_EQ(buf[0], '!');
  try {
    r.read(buf, 4, 10);
    ADD_FAILURE() << "a read past the end must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("[read]"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(nx::io::FileReader(path("no-such-file")).is_open());
  // The path overloads are the stream overloads over these classes.
  auto a = random_array({3, 3}, nx::uint16);
  nx::save(std::make_shared<nx::io::FileWriter>(path("via_stream.npy")), a);
  EXPECT_EQ(bytes_of(nx::load(path("via_stream.npy"))), bytes_of(a));
  EXPECT_EQ(bytes_of(nx::load(std::make_shared<nx::io::ParallelFileReader>(path("via_stream.npy")))), bytes_of(a));
}
