// nuvec tests: .npy save/load (round trips over every dtype, files written by NumPy and by
// hand in the format's other forms) and IDX reading (plain and gzip), with truncated and
// corrupt files checked to throw std::runtime_error naming the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
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
