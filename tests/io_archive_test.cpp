// nuvec tests: .npz archives (savez/load_npz: round trips stored and deflated, NumPy's files
// in tests/data/, NumPy reading ours) and GGUF (save_gguf/load_gguf: round trips, metadata of
// every value type, a file built byte by byte from the spec), with truncated and corrupted
// files checked to throw std::runtime_error naming the file, never to crash.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
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
const fs::path& scratch() {
  return nuvec::testing::scratch_dir();
}

std::string tmp(const std::string& name) { return (scratch() / name).string(); }

// tests/data beside this source file.
std::string data_file(const std::string& name) {
  return (fs::path(__FILE__).parent_path() / "data" / name).string();
}

void put(const std::string& file, const std::vector<char>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> get(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// Row-major element bytes of a.
std::vector<char> raw(const nx::array& a) {
  nx::array c = nx::contiguous(a);
  c.eval();
  const char* p = static_cast<const char*>(c.raw_data());
  return std::vector<char>(p, p + c.nbytes());
}

void expect_same(const nx::array& got, const nx::array& want) {
  EXPECT_EQ(got.dtype(), want.dtype());
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_EQ(raw(got), raw(want));
}

// Random values of any dtype; floats normal (never NaN, so bytes compare), bools 0/1.
nx::array random_of(const nx::Shape& shape, nx::Dtype dtype) {
  if (dtype == nx::bool_) return nx::testing::randint(shape, 0, 1) > 0;
  if (nx::issubdtype(dtype, nx::inexact)) return nx::testing::randn(shape, dtype);
  const int64_t lo = nx::issubdtype(dtype, nx::unsignedinteger) ? 0 : -120;
  return nx::astype(nx::testing::randint(shape, lo, 120, nx::int64), dtype);
}

// Runs f, which must throw std::runtime_error whose message holds every part.
template <typename F>
void expect_runtime_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one containing '" << parts.front() << "'";
  } catch (const std::runtime_error& e) {
    for (const auto& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "message: " << e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type; message: " << e.what();
  }
}

// Loads `bytes` from a file through `load`: it must either succeed or throw
// std::runtime_error naming the file (corruptions of unchecked fields may load).
template <typename Load>
void load_or_runtime_error(const std::vector<char>& bytes, const std::string& file, Load load) {
  put(file, bytes);
  try {
    load(file);
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << "message: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type; message: " << e.what();
  }
}

const std::vector<nx::Shape> kShapes = {{}, {7}, {3, 5}, {2, 0, 3}, {2, 3, 4}};

// ------------------------------------------------------------------------------------
// Little-endian byte building, written from the formats' documents (not from src/io).

struct Bytes {
  std::vector<char> b;
  template <typename T>
  Bytes& le(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) b.push_back(static_cast<char>((uint64_t(v) >> (8 * i)) & 0xFF));
    return *this;
  }
  Bytes& u8(uint8_t v) { return le(v); }
  Bytes& u16(uint16_t v) { return le(v); }
  Bytes& u32(uint32_t v) { return le(v); }
  Bytes& u64(uint64_t v) { return le(v); }
  Bytes& str(const std::string& s) { // GGUF string: u64 length, bytes
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& f32(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u32(u);
  }
  Bytes& pad(size_t align) {
    while (b.size() % align != 0) b.push_back(0);
    return *this;
  }
};

uint32_t u32_at(const std::vector<char>& b, size_t p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(b[p + i])) << (8 * i);
  return v;
}

void set_u16(std::vector<char>& b, size_t p, uint16_t v) {
  b[p] = static_cast<char>(v & 0xFF);
  b[p + 1] = static_cast<char>(v >> 8);
}

void set_u32(std::vector<char>& b, size_t p, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[p + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// CRC-32 (ZIP's, reflected polynomial 0xEDB88320), bit by bit.
uint32_t crc32_of(const char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= static_cast<unsigned char>(p[i]);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// Offset of the end-of-central-directory record (the archive has no comment).
size_t eocd(const std::vector<char>& zip) { return zip.size() - 22; }

std::string python() { return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3"; }

bool have_numpy() {
  static const bool ok = std::system((python() + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

} // namespace

// ====================================================================================
// .npz

TEST(Npz, RoundTripEveryDtypeAndShapeStoredAndCompressed) {
  for (bool compressed : {false, true}) {
    std::unordered_map<std::string, nx::array> in;
    for (auto dtype : nx::all_dtypes) {
      for (size_t s = 0; s < kShapes.size(); ++s) {
        in.insert_or_assign(nx::dtype_name(dtype) + "_" + std::to_string(s), random_of(kShapes[s], dtype));
      }
    }
    // A view (transposed, sliced) is written in row-major order.
    in.insert_or_assign("view", nx::transpose(random_of({3, 4}, nx::float32)));
    const std::string f = tmp(compressed ? "rt_c.npz" : "rt_s.npz");
    nx::savez(f, in, compressed);
    auto out = nx::load_npz(f);
    ASSERT_EQ(out.size(), in.size());
    for (const auto& [name, a] : in) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(out.count(name));
      expect_same(out.at(name), a);
    }
  }
}

TEST(Npz, CompressionShrinksRedundantDataAndFilesAreDeterministic) {
  std::unordered_map<std::string, nx::array> in = {{"z", nx::zeros({1000}, nx::float32)},
                                                    {"r", random_of({50}, nx::int32)}};
  nx::savez(tmp("det_a"), in, true); // ".npz" is appended
  nx::savez(tmp("det_b.npz"), in, true);
  nx::savez(tmp("det_s.npz"), in, false);
  ASSERT_TRUE(fs::exists(tmp("det_a.npz")));
  EXPECT_EQ(get(tmp("det_a.npz")), get(tmp("det_b.npz")));
  EXPECT_LT(get(tmp("det_a.npz")).size() * 4, get(tmp("det_s.npz")).size());
  nx::savez(tmp("none.npz"), {});
  EXPECT_TRUE(nx::load_npz(tmp("none.npz")).empty());
}

TEST(Npz, ReadsNumPyFiles) {
  // tests/data/make_numpy_npz.py wrote these; each value is a formula of the flat index i.
  for (const char* name : {"numpy_stored.npz", "numpy_compressed.npz"}) {
    SCOPED_TRACE(name);
    auto m = nx::load_npz(data_file(name));
    ASSERT_EQ(m.size(), 15u);
    auto check = [&](const std::string& key, nx::Dtype dtype, const nx::Shape& shape, auto f) {
      SCOPED_TRACE(key);
      ASSERT_TRUE(m.count(key));
      const nx::array& a = m.at(key);
      EXPECT_EQ(a.dtype(), dtype);
      std::vector<double> want;
      size_t n = 1;
      for (auto d : shape) n *= d;
      for (size_t i = 0; i < n; ++i) want.push_back(f(double(i)));
      nx::testing::expect_close(a, shape, want, 0, 0);
    };
    check("f32", nx::float32, {2, 3}, [](double i) { return i * 0.5 - 1.25; });
    check("f64", nx::float64, {5}, [](double i) { return i / 3.0; });
    check("f16", nx::float16, {2, 2}, [](double i) { return i * 0.25; });
    check("i8", nx::int8, {7}, [](double i) { return i - 3; });
    check("i16", nx::int16, {3, 2}, [](double i) { return i * -300; });
    check("i32", nx::int32, {2, 3, 4}, [](double i) { return i * 1000 - 7; });
    check("i64", nx::int64, {3}, [](double i) { return i * 1e12; });
    check("u8", nx::uint8, {5}, [](double i) { return i * 50; });
    check("u16", nx::uint16, {4}, [](double i) { return i * 16000; });
    check("u32", nx::uint32, {3}, [](double i) { return i * 1073741824.0; });
    check("u64", nx::uint64, {2}, [](double i) { return i * 4611686018427387904.0; });
    check("b", nx::bool_, {5}, [](double i) { return int(i) % 2 == 0 ? 1.0 : 0.0; });
    check("scalar", nx::float32, {}, [](double) { return 2.5; });
    check("empty", nx::float32, {0, 3}, [](double) { return 0.0; });
    check("fortran", nx::int32, {2, 3}, [](double i) { return i + 1; }); // stored column-major
  }
}

TEST(Npz, NumPyReadsOurFiles) {
  if (!have_numpy()) GTEST_SKIP() << "no python3 with numpy";
  std::vector<int32_t> iv = {4, -5, 6, 7, -8, 9};
  std::unordered_map<std::string, nx::array> in = {
      {"a", nx::reshape(nx::arange(6.0, nx::float32), {2, 3})},
      {"b", nx::array(iv.begin(), {3, 2}, nx::int32)},
      {"s", nx::array(1.5)}};
  for (bool compressed : {false, true}) {
    const std::string f = tmp(compressed ? "for_numpy_c.npz" : "for_numpy_s.npz");
    nx::savez(f, in, compressed);
    const std::string script =
        "import numpy as np, zipfile, sys\n"
        "z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None\n"
        "assert {i.compress_type for i in z.infolist()} == {" + std::string(compressed ? "8" : "0") + "}\n"
        "d = np.load(sys.argv[1])\n"
        "assert sorted(d.files) == ['a', 'b', 's']\n"
        "assert d['a'].dtype == np.float32 and (d['a'] == np.arange(6).reshape(2, 3)).all()\n"
        "assert d['b'].dtype == np.int32 and d['b'].tolist() == [[4, -5], [6, 7], [-8, 9]]\n"
        "assert d['s'].shape == () and d['s'] == 1.5\n";
    put(tmp("check.py"), std::vector<char>(script.begin(), script.end()));
    EXPECT_EQ(std::system((python() + " " + tmp("check.py") + " " + f).c_str()), 0) << f;
  }
}

TEST(Npz, MalformedArchivesGiveClearErrors) {
  std::unordered_map<std::string, nx::array> in = {{"x", nx::arange(5.0, nx::float32)}};
  nx::savez(tmp("good.npz"), in, false);
  const std::vector<char> good = get(tmp("good.npz"));
  // Layout of a one-member archive: local header at 0 (30 bytes + "x.npy"), data, central
  // directory, end record.
  const size_t cd = u32_at(good, eocd(good) + 16);
  auto load = [](const std::string& f) { nx::load_npz(f); };
  auto with = [&](const std::string& name, auto edit, std::vector<std::string> parts) {
    std::vector<char> b = good;
    edit(b);
    const std::string f = tmp(name);
    put(f, b);
    parts.insert(parts.begin(), f);
    expect_runtime_error([&] { load(f); }, parts);
  };
  expect_runtime_error([] { nx::load_npz(tmp("missing.npz")); }, {"missing.npz", "cannot open"});
  with("empty.npz", [](auto& b) { b.clear(); }, {"[load_npz]", "not a ZIP archive"});
  with("no_end.npz", [&](auto& b) { b[eocd(b)] = 'X'; }, {"end-of-central-directory"});
  with("cd_past.npz", [&](auto& b) { set_u32(b, eocd(b) + 16, cd + 100); }, {"central directory"});
  with("cd_sig.npz", [&](auto& b) { b[cd] = 'Q'; }, {"bad central directory signature"});
  with("local_sig.npz", [&](auto& b) { b[0] = 'Q'; }, {"bad local header signature"});
  with("local_off.npz", [&](auto& b) { set_u32(b, cd + 42, uint32_t(cd) - 10); }, {"local header offset"});
  with("size_past.npz", [&](auto& b) { set_u32(b, cd + 20, 1u << 20); set_u32(b, cd + 24, 1u << 20); },
       {"runs past the member area"});
  with("crc.npz", [&](auto& b) { b[cd - 1] ^= 0x40; }, {"CRC-32 mismatch", "x.npy"});
  with("zip64.npz", [&](auto& b) { set_u32(b, eocd(b) + 16, 0xFFFFFFFF); }, {"zip64"});
  with("zip64_entry.npz", [&](auto& b) { set_u32(b, cd + 20, 0xFFFFFFFF); }, {"zip64"});
  with("encrypted.npz", [&](auto& b) { set_u16(b, cd + 8, 1); }, {"encrypted"});
  with("method.npz", [&](auto& b) { set_u16(b, cd + 10, 12); }, {"compression method 12"});
  with("disk.npz", [&](auto& b) { set_u16(b, eocd(b) + 4, 1); }, {"multi-disk"});
  with("cd_count.npz", [&](auto& b) { set_u16(b, eocd(b) + 8, 2); set_u16(b, eocd(b) + 10, 2); },
       {"truncated central directory"});
  with("stored_sizes.npz", [&](auto& b) { set_u32(b, cd + 24, 3); }, {"stored member"});

  // A member that is not .npy, and one that is a broken .npy (the member is named).
  nx::savez(tmp("named.npz"), in, false);
  {
    std::vector<char> b = get(tmp("named.npz"));
    b[30 + 2] = 'q'; // "x.npy" -> "x.qpy" in the local header
    b[cd + 46 + 2] = 'q';
    put(tmp("not_npy.npz"), b);
    expect_runtime_error([] { nx::load_npz(tmp("not_npy.npz")); }, {"not_npy.npz", "x.qpy", "not a .npy"});
  }
  {
    std::vector<char> b = good;
    b[30 + 5] = 'Z'; // the .npy magic; fix the CRCs so the member reaches the .npy decoder
    const uint32_t crc = crc32_of(b.data() + 35, cd - 35);
    set_u32(b, 14, crc);
    set_u32(b, cd + 16, crc);
    put(tmp("bad_member.npz"), b);
    expect_runtime_error([] { nx::load_npz(tmp("bad_member.npz")); },
                         {"bad_member.npz", "member 'x.npy'", "not a .npy file"});
  }
  // Corrupt deflate data is caught by zlib or the CRC, never returned.
  nx::savez(tmp("gz.npz"), {{"x", random_of({64}, nx::float32)}}, true);
  {
    std::vector<char> b = get(tmp("gz.npz"));
    const size_t cdc = u32_at(b, eocd(b) + 16);
    for (size_t p = 35; p < cdc; p += 7) b[p] ^= 0x55;
    put(tmp("gz_bad.npz"), b);
    expect_runtime_error([] { nx::load_npz(tmp("gz_bad.npz")); }, {"gz_bad.npz", "x.npy"});
  }
}

TEST(Npz, EveryTruncationAndRandomCorruptionIsAnErrorNotACrash) {
  std::unordered_map<std::string, nx::array> in = {{"a", random_of({3, 2}, nx::float32)},
                                                    {"bb", random_of({4}, nx::int16)}};
  for (bool compressed : {false, true}) {
    nx::savez(tmp("t.npz"), in, compressed);
    const std::vector<char> good = get(tmp("t.npz"));
    const std::vector<char> end(good.end() - 22, good.end());
    const std::string f = tmp(compressed ? "trunc_c.npz" : "trunc_s.npz");
    for (size_t n = 0; n < good.size(); ++n) {
      SCOPED_TRACE(n);
      std::vector<char> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
      put(f, cut);
      expect_runtime_error([&] { nx::load_npz(f); }, {f, "[load_npz]"});
      // The prefix with the original end record appended: its offsets now point past the data.
      cut.insert(cut.end(), end.begin(), end.end());
      if (cut.size() < good.size()) {
        put(f, cut);
        expect_runtime_error([&] { nx::load_npz(f); }, {f, "[load_npz]"});
      }
    }
    std::uniform_int_distribution<size_t> pos(0, good.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255), flips(1, 4);
    for (int trial = 0; trial < 400; ++trial) {
      std::vector<char> b = good;
      for (int k = flips(rng()); k > 0; --k) b[pos(rng())] = static_cast<char>(byte(rng()));
      load_or_runtime_error(b, f, [](const std::string& file) { nx::load_npz(file); });
    }
  }
}

// ====================================================================================
// GGUF

namespace {

const nx::Dtype kGgufDtypes[] = {nx::float32, nx::float16, nx::bfloat16, nx::float64,
                                 nx::int8, nx::int16, nx::int32, nx::int64};
const nx::Dtype kMetaDtypes[] = {nx::bool_, nx::uint8, nx::int8, nx::uint16, nx::int16, nx::uint32,
                                 nx::int32, nx::uint64, nx::int64, nx::float32, nx::float64};

void expect_same_meta(const nx::GGUFMetaData& got, const nx::GGUFMetaData& want) {
  ASSERT_EQ(got.index(), want.index());
  if (auto* a = std::get_if<nx::array>(&want)) {
    expect_same(std::get<nx::array>(got), *a);
  } else if (auto* s = std::get_if<std::string>(&want)) {
    EXPECT_EQ(std::get<std::string>(got), *s);
  } else if (auto* v = std::get_if<std::vector<std::string>>(&want)) {
    EXPECT_EQ(std::get<std::vector<std::string>>(got), *v);
  }
}

// A GGUF v3 file written from the spec by hand: 4 metadata pairs (alignment 64, a string,
// an int32 array, a bool) and 4 tensors of types F32, I32, F16, BF16.
std::vector<char> spec_gguf() {
  Bytes f;
  f.b = {'G', 'G', 'U', 'F'};
  f.u32(3).u64(4).u64(4);
  f.str("general.alignment").u32(4).u32(64);
  f.str("general.name").u32(8).str("tiny");
  f.str("tiny.ids").u32(9).u32(5).u64(3).u32(uint32_t(-1)).u32(0).u32(7);
  f.str("tiny.flag").u32(7).u8(1);
  // dims are listed fastest-varying first: ne = [3, 2] is a 2 x 3 row-major matrix.
  f.str("w").u32(2).u64(3).u64(2).u32(0).u64(0);
  f.str("n").u32(1).u64(5).u32(26).u64(64);
  f.str("h").u32(1).u64(2).u32(1).u64(128);
  f.str("bf").u32(3).u64(1).u64(1).u64(2).u32(30).u64(192);
  f.pad(64);
  for (int i = 0; i < 6; ++i) f.f32(float(i) + 0.5f);
  f.pad(64);
  for (int v : {10, -20, 30, -40, 50}) f.u32(uint32_t(v));
  f.pad(64);
  f.u16(0x3C00).u16(0xC000); // 1.0, -2.0 in IEEE half
  f.pad(64);
  f.u16(0x3F80).u16(0x4040); // 1.0, 3.0 in bfloat16
  return f.b;
}

} // namespace

TEST(Gguf, RoundTripEveryPlainDtypeAndShape) {
  std::unordered_map<std::string, nx::array> in;
  for (auto dtype : kGgufDtypes) {
    for (size_t s = 0; s < kShapes.size(); ++s) {
      in.insert_or_assign(nx::dtype_name(dtype) + "." + std::to_string(s), random_of(kShapes[s], dtype));
    }
  }
  in.insert_or_assign("view", nx::transpose(random_of({5, 3}, nx::float32)));
  nx::save_gguf(tmp("rt"), in); // ".gguf" is appended
  auto [out, meta] = nx::load_gguf(tmp("rt.gguf"));
  EXPECT_TRUE(meta.empty());
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, a] : in) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(out.count(name));
    expect_same(out.at(name), a);
  }
}

TEST(Gguf, MetadataOfEveryValueTypeRoundTrips) {
  std::unordered_map<std::string, nx::GGUFMetaData> meta;
  for (auto dtype : kMetaDtypes) {
    meta["scalar." + nx::dtype_name(dtype)] = random_of({}, dtype);
    meta["array." + nx::dtype_name(dtype)] = random_of({6}, dtype);
  }
  meta["string"] = std::string("héllo, gguf");
  meta["string.empty"] = std::string();
  meta["strings"] = std::vector<std::string>{"a", "", "tokens with spaces", std::string(300, 'z')};
  meta["strings.empty"] = std::vector<std::string>{};
  meta["general.alignment"] = nx::array(uint32_t(64), nx::uint32);
  std::unordered_map<std::string, nx::array> arrays = {{"t", random_of({3, 3}, nx::float32)},
                                                       {"u", random_of({5}, nx::int8)}};
  nx::save_gguf(tmp("meta.gguf"), arrays, meta);
  auto [out, got] = nx::load_gguf(tmp("meta.gguf"));
  ASSERT_EQ(got.size(), meta.size());
  for (const auto& [k, v] : meta) {
    SCOPED_TRACE(k);
    ASSERT_TRUE(got.count(k));
    expect_same_meta(got.at(k), v);
  }
  expect_same(out.at("t"), arrays.at("t"));
  expect_same(out.at("u"), arrays.at("u"));
  // With alignment 64 every tensor's data starts at a multiple of 64 in the file: the
  // second tensor's offset field (the last 8 bytes of the header before padding) is 64.
  const std::vector<char> b = get(tmp("meta.gguf"));
  EXPECT_EQ(b.size() % 64, 5u); // 5 int8s after the padded 36-byte first tensor
}

TEST(Gguf, ReadsAFileBuiltFromTheSpec) {
  put(tmp("spec.gguf"), spec_gguf());
  auto [arrays, meta] = nx::load_gguf(tmp("spec.gguf"));
  ASSERT_EQ(meta.size(), 4u);
  EXPECT_EQ(std::get<nx::array>(meta.at("general.alignment")).item<uint32_t>(), 64u);
  EXPECT_EQ(std::get<std::string>(meta.at("general.name")), "tiny");
  const auto& ids = std::get<nx::array>(meta.at("tiny.ids"));
  EXPECT_EQ(ids.dtype(), nx::int32);
  nx::testing::expect_close(ids, {3}, {-1, 0, 7}, 0, 0);
  const auto& flag = std::get<nx::array>(meta.at("tiny.flag"));
  EXPECT_EQ(flag.dtype(), nx::bool_);
  EXPECT_EQ(flag.ndim(), 0u);
  EXPECT_TRUE(flag.item<bool>());

  ASSERT_EQ(arrays.size(), 4u);
  EXPECT_EQ(arrays.at("w").dtype(), nx::float32);
  nx::testing::expect_close(arrays.at("w"), {2, 3}, {0.5, 1.5, 2.5, 3.5, 4.5, 5.5}, 0, 0);
  EXPECT_EQ(arrays.at("n").dtype(), nx::int32);
  nx::testing::expect_close(arrays.at("n"), {5}, {10, -20, 30, -40, 50}, 0, 0);
  EXPECT_EQ(arrays.at("h").dtype(), nx::float16);
  nx::testing::expect_close(arrays.at("h"), {2}, {1.0, -2.0}, 0, 0);
  EXPECT_EQ(arrays.at("bf").dtype(), nx::bfloat16);
  nx::testing::expect_close(arrays.at("bf"), {2, 1, 1}, {1.0, 3.0}, 0, 0);
}

TEST(Gguf, WriterFollowsTheSpecLayout) {
  // A 2 x 3 float32 tensor: header fields at the spec's offsets, dims reversed, data at 32.
  nx::save_gguf(tmp("layout.gguf"), {{"m", nx::reshape(nx::arange(6.0, nx::float32), {2, 3})}},
                {{"k", std::string("v")}});
  Bytes want;
  want.b = {'G', 'G', 'U', 'F'};
  want.u32(3).u64(1).u64(1);
  want.str("k").u32(8).str("v");
  want.str("m").u32(2).u64(3).u64(2).u32(0).u64(0);
  want.pad(32);
  for (int i = 0; i < 6; ++i) want.f32(float(i));
  EXPECT_EQ(get(tmp("layout.gguf")), want.b);
}

TEST(Gguf, UnsupportedAndMalformedFilesGiveClearErrors) {
  const std::vector<char> good = spec_gguf();
  auto with = [&](const std::string& name, std::vector<char> b, std::vector<std::string> parts) {
    const std::string f = tmp(name);
    put(f, b);
    parts.insert(parts.begin(), f);
    parts.insert(parts.begin(), "[load_gguf]");
    expect_runtime_error([&] { nx::load_gguf(f); }, parts);
  };
  // A minimal file: one tensor info with the given type, dims and offset, and `data` bytes.
  auto one_tensor = [](uint32_t type, std::vector<uint64_t> dims, uint64_t offset, size_t data) {
    Bytes f;
    f.b = {'G', 'G', 'U', 'F'};
    f.u32(3).u64(1).u64(0).str("t").u32(uint32_t(dims.size()));
    for (auto d : dims) f.u64(d);
    f.u32(type).u64(offset).pad(32);
    f.b.resize(f.b.size() + data, 0);
    return f.b;
  };
  auto one_kv = [](const std::function<void(Bytes&)>& value) {
    Bytes f;
    f.b = {'G', 'G', 'U', 'F'};
    f.u32(3).u64(0).u64(1).str("k");
    value(f);
    return f.b;
  };
  expect_runtime_error([] { nx::load_gguf(tmp("missing.gguf")); }, {"missing.gguf", "cannot open"});
  with("empty.gguf", {}, {"not a GGUF file"});
  with("magic.gguf", [&] { auto b = good; b[0] = 'X'; return b; }(), {"not a GGUF file"});
  with("v1.gguf", [&] { auto b = good; set_u32(b, 4, 1); return b; }(), {"version 1"});
  with("v9.gguf", [&] { auto b = good; set_u32(b, 4, 9); return b; }(), {"unsupported GGUF version 9"});
  with("be.gguf", [&] { auto b = good; set_u32(b, 4, 0x03000000); return b; }(), {"big-endian"});
  with("counts.gguf", [&] { auto b = good; b[15] = 0x7F; return b; }(), {"truncated file"});
  with("q4.gguf", one_tensor(2, {32}, 0, 18), {"Q4_0", "not supported yet"});
  with("q8k.gguf", one_tensor(15, {256}, 0, 292), {"Q8_K", "not supported yet"});
  with("type.gguf", one_tensor(999, {4}, 0, 16), {"unknown or unsupported ggml type 999"});
  with("unaligned.gguf", one_tensor(0, {4}, 4, 32), {"not a multiple of the alignment"});
  with("offset.gguf", one_tensor(0, {4}, 32, 16), {"runs past the end"});
  with("dim.gguf", one_tensor(0, {uint64_t(1) << 31}, 0, 0), {"over 2^31 - 1"});
  with("overflow.gguf", one_tensor(0, {0x7FFFFFFF, 0x7FFFFFFF, 0x7FFFFFFF}, 0, 0), {"overflows"});
  with("ndims.gguf", one_tensor(0, std::vector<uint64_t>(17, 1), 0, 4), {"17 dimensions"});
  with("dup.gguf", [&] {
    Bytes f;
    f.b = {'G', 'G', 'U', 'F'};
    f.u32(3).u64(2).u64(0).str("t").u32(1).u64(1).u32(0).u64(0).str("t").u32(1).u64(1).u32(0).u64(0).pad(32);
    f.b.resize(f.b.size() + 4, 0);
    return f.b;
  }(), {"duplicate tensor name 't'"});
  with("vtype.gguf", one_kv([](Bytes& f) { f.u32(13).u32(0); }), {"unknown value type 13"});
  with("nested.gguf", one_kv([](Bytes& f) { f.u32(9).u32(9).u64(1); }), {"nested arrays"});
  with("bool.gguf", one_kv([](Bytes& f) { f.u32(7).u8(2); }), {"bool"});
  with("strlen.gguf", one_kv([](Bytes& f) { f.u32(8).u64(uint64_t(-1)); }), {"truncated file"});
  with("arrlen.gguf", one_kv([](Bytes& f) { f.u32(9).u32(12).u64(uint64_t(1) << 61); }), {"claims"});
  with("strs.gguf", one_kv([](Bytes& f) { f.u32(9).u32(8).u64(uint64_t(1) << 62); }), {"truncated file"});
  with("align_type.gguf", [] {
    Bytes f;
    f.b = {'G', 'G', 'U', 'F'};
    f.u32(3).u64(0).u64(1).str("general.alignment").u32(10).u64(32);
    return f.b;
  }(), {"general.alignment", "uint32"});
  with("align_value.gguf", [] {
    Bytes f;
    f.b = {'G', 'G', 'U', 'F'};
    f.u32(3).u64(0).u64(1).str("general.alignment").u32(4).u32(48);
    return f.b;
  }(), {"power of two"});
}

TEST(Gguf, EveryTruncationAndRandomCorruptionIsAnErrorNotACrash) {
  nx::save_gguf(tmp("w.gguf"), {{"a", random_of({3, 2}, nx::float32)}, {"b", random_of({4}, nx::int64)}},
                {{"s", std::string("str")}, {"v", std::vector<std::string>{"x", "yz"}},
                 {"n", random_of({3}, nx::uint16)}, {"f", nx::array(0.5)}});
  for (const auto& good : {spec_gguf(), get(tmp("w.gguf"))}) {
    const std::string f = tmp("trunc.gguf");
    for (size_t n = 0; n < good.size(); ++n) {
      SCOPED_TRACE(n);
      put(f, std::vector<char>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)));
      expect_runtime_error([&] { nx::load_gguf(f); }, {f, "[load_gguf]"});
    }
    std::uniform_int_distribution<size_t> pos(0, good.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255), flips(1, 4);
    for (int trial = 0; trial < 400; ++trial) {
      std::vector<char> b = good;
      for (int k = flips(rng()); k > 0; --k) b[pos(rng())] = static_cast<char>(byte(rng()));
      load_or_runtime_error(b, f, [](const std::string& file) { nx::load_gguf(file); });
    }
  }
}

TEST(Gguf, SaveRejectsWhatGgufCannotHold) {
  // MLX's exception types: std::runtime_error for tensor dtypes, metadata arrays of 2 or more
  // dimensions or of no elements and empty values; std::invalid_argument for the rest.
  auto bad = [](auto type_tag, std::unordered_map<std::string, nx::array> a,
                std::unordered_map<std::string, nx::GGUFMetaData> m) {
    nx::testing::expect_throws_naming<decltype(type_tag)>(
        [&] { nx::save_gguf(tmp("bad.gguf"), a, m); }, "[save_gguf]");
  };
  const std::runtime_error runtime("");
  const std::invalid_argument invalid("");
  bad(runtime, {{"t", nx::array(true)}}, {});
  bad(runtime, {{"t", nx::zeros({2}, nx::uint8)}}, {});
  bad(runtime, {{"t", nx::zeros({2}, nx::complex64)}}, {});
  bad(invalid, {{"", nx::zeros({2})}}, {});
  bad(runtime, {}, {{"m", nx::zeros({2, 2})}});
  bad(runtime, {}, {{"m", nx::zeros({0}, nx::int32)}});
  bad(invalid, {}, {{"m", nx::zeros({2}, nx::float16)}});
  bad(runtime, {}, {{"m", std::monostate{}}});
  bad(invalid, {}, {{"", std::string("x")}});
  bad(invalid, {}, {{"general.alignment", nx::array(uint32_t(48), nx::uint32)}});
  bad(invalid, {}, {{"general.alignment", std::string("32")}});
  EXPECT_FALSE(fs::exists(tmp("bad.gguf"))); // validation happens before the file is opened
}
