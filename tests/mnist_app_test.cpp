// nuvec tests: the nuvec-mnist program end to end on a tiny synthetic IDX dataset written here
// (a few hundred images, one of them gzipped): it trains, writes weights, optimizer state and
// the CSV, resumes, and fails with a helpful message (never a crash) on bad data or flags.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "nuvec/device.h"

namespace fs = std::filesystem;

namespace {

// The program sits in <build>/examples/ beside this test's <build>/tests/ (or NUVEC_MNIST_BIN).
fs::path program() {
  if (const char* p = std::getenv("NUVEC_MNIST_BIN")) return p;
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "examples" / "nuvec-mnist";
}

struct Result {
  int code; // exit status, or 128 + signal when killed
  std::string output;
};

Result run(const std::string& args) {
  const std::string cmd = "'" + program().string() + "' " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, out};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

int count_lines(const fs::path& file) {
  std::ifstream f(file);
  int n = 0;
  for (std::string line; std::getline(f, line);) ++n;
  return n;
}

void write_idx(const fs::path& file, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  const char head[4] = {0, 0, 0x08, static_cast<char>(dims.size())};
  f.write(head, 4);
  for (uint32_t d : dims) {
    const char be[4] = {char(d >> 24), char(d >> 16), char(d >> 8), char(d)};
    f.write(be, 4);
  }
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// n images whose class is the bright horizontal band (rows 2c..2c+5), with noise.
void write_split(const fs::path& dir, const std::string& prefix, int n, std::mt19937& gen) {
  std::vector<uint8_t> images(static_cast<size_t>(n) * 784), labels(n);
  std::uniform_int_distribution<int> noise(0, 60);
  for (int i = 0; i < n; ++i) {
    const int c = i % 10;
    labels[i] = static_cast<uint8_t>(c);
    for (int r = 0; r < 28; ++r) {
      for (int col = 0; col < 28; ++col) {
        const bool band = r >= 2 * c + 2 && r < 2 * c + 8;
        images[static_cast<size_t>(i) * 784 + r * 28 + col] =
            static_cast<uint8_t>((band ? 180 : 0) + noise(gen));
      }
    }
  }
  write_idx(dir / (prefix + "-images-idx3-ubyte"), {uint32_t(n), 28, 28}, images);
  write_idx(dir / (prefix + "-labels-idx1-ubyte"), {uint32_t(n)}, labels);
}

class MnistApp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(program())) {
      GTEST_SKIP() << program() << " is not built (configure with NUVEC_BUILD_EXAMPLES=ON)";
    }
    root_ = fs::temp_directory_path() / ("nuvec_mnist_app_" + std::to_string(getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    data_ = root_ / "data";
    fs::create_directories(data_);
    std::mt19937 gen(1234);
    write_split(data_, "train", 320, gen);
    write_split(data_, "t10k", 100, gen);
    // Debian ships the files gzipped: exercise that path for the training images.
    const std::string gz = "gzip -f '" + (data_ / "train-images-idx3-ubyte").string() + "'";
    ASSERT_EQ(std::system(gz.c_str()), 0);
    ASSERT_TRUE(fs::exists(data_ / "train-images-idx3-ubyte.gz"));
  }
  void TearDown() override {
    std::error_code ec;
    if (!root_.empty()) fs::remove_all(root_, ec);
  }
  std::string common(const fs::path& out) const {
    return "--data '" + data_.string() + "' --out '" + out.string() + "' --batch-size 32 --no-progress";
  }

  fs::path root_, data_;
};

} // namespace

TEST_F(MnistApp, TrainsWritesFilesAndResumes) {
  const fs::path out = root_ / "run";
  auto r1 = run(common(out) + " --epochs 1 --no-plot");
  ASSERT_EQ(r1.code, 0) << r1.output;
  EXPECT_TRUE(contains(r1.output, "epoch 1/1")) << r1.output;
  EXPECT_TRUE(contains(r1.output, "test accuracy")) << r1.output;
  EXPECT_TRUE(contains(r1.output, "320 train, 100 test images")) << r1.output;
  EXPECT_TRUE(fs::exists(out / "mlp_weights.safetensors"));
  EXPECT_TRUE(fs::exists(out / "mlp_optimizer.safetensors"));
  ASSERT_TRUE(fs::exists(out / "mlp_curve.csv"));
  EXPECT_EQ(count_lines(out / "mlp_curve.csv"), 2); // header + epoch 1

  // Resume up to 2 epochs in total: only epoch 2 runs, the CSV grows by one row, the plot
  // is drawn when gnuplot is installed.
  auto r2 = run(common(out) + " --epochs 2 --resume");
  ASSERT_EQ(r2.code, 0) << r2.output;
  EXPECT_TRUE(contains(r2.output, "resumed mlp")) << r2.output;
  EXPECT_TRUE(contains(r2.output, "after epoch 1 (optimizer step 10)")) << r2.output;
  EXPECT_TRUE(contains(r2.output, "epoch 2/2")) << r2.output;
  EXPECT_FALSE(contains(r2.output, "epoch 1/2")) << r2.output;
  EXPECT_EQ(count_lines(out / "mlp_curve.csv"), 3);
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    EXPECT_TRUE(fs::exists(out / "mlp_curve.png")) << r2.output;
  } else {
    EXPECT_TRUE(contains(r2.output, "gnuplot not found")) << r2.output;
  }

  // Nothing left to do: reports the accuracy of the saved weights.
  auto r3 = run(common(out) + " --epochs 2 --resume --no-plot");
  ASSERT_EQ(r3.code, 0) << r3.output;
  EXPECT_TRUE(contains(r3.output, "already trained for 2 epochs")) << r3.output;

  // A corrupt weights file: a clear message, exit 3.
  {
    std::ofstream f(out / "mlp_weights.safetensors", std::ios::binary | std::ios::trunc);
    f << "garbage";
  }
  auto r4 = run(common(out) + " --epochs 3 --resume --no-plot");
  EXPECT_EQ(r4.code, 3) << r4.output;
  EXPECT_TRUE(contains(r4.output, "cannot restore the saved run")) << r4.output;
}

TEST_F(MnistApp, TrainsTheCnn) {
  const fs::path out = root_ / "cnn";
  auto r = run(common(out) + " --model cnn --epochs 1 --no-plot");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "nuvec-mnist: cnn")) << r.output;
  EXPECT_TRUE(contains(r.output, "epoch 1/1")) << r.output;
  EXPECT_TRUE(fs::exists(out / "cnn_weights.safetensors"));
  EXPECT_EQ(count_lines(out / "cnn_curve.csv"), 2);
}

TEST_F(MnistApp, BadDataGivesInstallHintNotACrash) {
  const std::string hint = "apt-get install dataset-fashion-mnist";
  // Missing directory.
  auto r1 = run("--data '" + (root_ / "nowhere").string() + "' --out '" + (root_ / "o").string() + "'");
  EXPECT_EQ(r1.code, 2) << r1.output;
  EXPECT_TRUE(contains(r1.output, "train-images-idx3-ubyte[.gz] not found")) << r1.output;
  EXPECT_TRUE(contains(r1.output, hint)) << r1.output;
  EXPECT_TRUE(contains(r1.output, "--data")) << r1.output;

  // Truncated test images.
  const fs::path f = data_ / "t10k-images-idx3-ubyte";
  fs::resize_file(f, fs::file_size(f) / 2);
  auto r2 = run(common(root_ / "o"));
  EXPECT_EQ(r2.code, 2) << r2.output;
  EXPECT_TRUE(contains(r2.output, "t10k-images-idx3-ubyte: truncated data")) << r2.output;
  EXPECT_TRUE(contains(r2.output, hint)) << r2.output;

  // A corrupt gzip file.
  const fs::path g = data_ / "train-images-idx3-ubyte.gz";
  fs::resize_file(g, fs::file_size(g) - 20);
  auto r3 = run(common(root_ / "o"));
  EXPECT_EQ(r3.code, 2) << r3.output;
  EXPECT_TRUE(contains(r3.output, "train-images-idx3-ubyte.gz")) << r3.output;

  // Labels that do not match the images.
  fs::remove(g);
  write_idx(data_ / "train-images-idx3-ubyte", {5, 28, 28}, std::vector<uint8_t>(5 * 784, 0));
  auto r4 = run(common(root_ / "o"));
  EXPECT_EQ(r4.code, 2) << r4.output;
  EXPECT_TRUE(contains(r4.output, "expected 5 uint8 labels")) << r4.output;
}

TEST_F(MnistApp, FlagsAndDevice) {
  auto r1 = run("--epochs zero");
  EXPECT_EQ(r1.code, 1) << r1.output;
  EXPECT_TRUE(contains(r1.output, "--epochs must be a number")) << r1.output;
  EXPECT_TRUE(contains(r1.output, "Usage: nuvec-mnist")) << r1.output;
  auto r2 = run("--frobnicate");
  EXPECT_EQ(r2.code, 1) << r2.output;
  auto r3 = run("--help");
  EXPECT_EQ(r3.code, 0);
  EXPECT_TRUE(contains(r3.output, "--resume")) << r3.output;
  auto r4 = run(common(root_ / "fresh") + " --resume");
  EXPECT_EQ(r4.code, 3) << r4.output;
  EXPECT_TRUE(contains(r4.output, "no saved run")) << r4.output;
  if (!nuvec::is_available(nuvec::Device(nuvec::Device::gpu))) {
    auto r5 = run(common(root_ / "gpu") + " --device gpu");
    EXPECT_EQ(r5.code, 2) << r5.output;
    EXPECT_TRUE(contains(r5.output, "no GPU is available")) << r5.output;
  }
}
