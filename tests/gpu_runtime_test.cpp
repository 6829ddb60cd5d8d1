// nuvec: the CUDA runtime: device discovery, data moving between the host and the GPU on
// demand, views of GPU-only data, streams and events across devices, the device memory
// figures, the host fallback of factorizations, and errors raised on a GPU stream.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

namespace {

#define REQUIRE_GPU()                                                 \
  if (!is_available(Device::gpu)) GTEST_SKIP() << "no GPU available"

TEST(GpuRuntime, DeviceDiscovery) {
  if (!is_available(Device::gpu)) {
    EXPECT_EQ(device_count(Device::gpu), 0);
    EXPECT_THROW(new_stream(Device::gpu), std::invalid_argument);
    GTEST_SKIP() << "no GPU available";
  }
  EXPECT_GE(device_count(Device::gpu), 1);
  auto& info = device_info(Device::gpu);
  EXPECT_FALSE(std::get<std::string>(info.at("device_name")).empty());
  EXPECT_GT(std::get<size_t>(info.at("total_memory")), size_t(1) << 30);
  EXPECT_THROW(device_info(Device(Device::gpu, 1000)), std::invalid_argument);
}

// Host data goes up, is computed on, and comes back exactly (integers, every element).
TEST(GpuRuntime, RoundTripThroughTheDevice) {
  REQUIRE_GPU();
  array a = randint({1 << 16}, -1000, 1000, int32);
  eval(a);
  std::vector<double> host = to_vector(a);
  // A pure view on the GPU stream, then a copy kernel: the data crosses both ways.
  array b = contiguous(transpose(reshape(a, {256, 256}), Device::gpu), false, Device::gpu);
  eval(b);
  auto got = to_vector(b);
  for (int i = 0; i < 256; ++i) {
    for (int j = 0; j < 256; ++j) {
      ASSERT_EQ(got[i * 256 + j], host[j * 256 + i]);
    }
  }
}

// A GPU result read through views with offsets and steps on the host.
TEST(GpuRuntime, HostReadsViewsOfDeviceData) {
  REQUIRE_GPU();
  array x = randn({64, 48}, float32);
  array y = multiply(x, array(2.0f), Device::gpu);
  array v = slice(y, {3, 5}, {60, 45}, {2, 3}, Device::gpu);
  eval(v);
  auto xv = to_vector(x);
  auto vv = to_vector(v);
  size_t k = 0;
  for (int i = 3; i < 60; i += 2) {
    for (int j = 5; j < 45; j += 3) {
      ASSERT_FLOAT_EQ(float(vv[k++]), 2.0f * float(xv[i * 48 + j]));
    }
  }
  EXPECT_EQ(k, vv.size());
}

// A chain crossing devices: GPU -> CPU stream -> GPU, in one graph and across async evals.
TEST(GpuRuntime, StreamsAndEventsAcrossDevices) {
  REQUIRE_GPU();
  Stream g = new_stream(Device::gpu);
  Stream c = new_stream(Device::cpu);
  array x = uniform({1000}, 0.5, 2.0, float32);
  array a = exp(x, g);
  array b = log(a, c); // reads the GPU result on the CPU
  array d = multiply(b, array(3.0f), g); // and back
  async_eval({d});
  array e = add(d, x, c);
  eval(e);
  auto xv = to_vector(x);
  auto ev = to_vector(e);
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_NEAR(ev[i], 4.0 * xv[i], 1e-4 * (1 + xv[i]));
  synchronize(g);
}

// Device memory is counted by the memory API and goes back to the cache when freed.
TEST(GpuRuntime, MemoryApiCountsDeviceMemory) {
  REQUIRE_GPU();
  synchronize(default_stream(Device::gpu));
  size_t before = get_active_memory();
  {
    array big = full({1 << 24}, 1.5f, Device::gpu); // 64 MiB on the device
    eval(big);
    EXPECT_GE(get_active_memory(), before + (size_t(1) << 26));
    EXPECT_GE(get_peak_memory(), before + (size_t(1) << 26));
  }
  synchronize(default_stream(Device::gpu));
  EXPECT_LT(get_active_memory(), before + (size_t(1) << 26));
  EXPECT_GE(get_cache_memory(), size_t(1) << 26);
  clear_cache();
  EXPECT_LT(get_cache_memory(), size_t(1) << 26);
}

// Factorizations run on the host behind a GPU stream, transparently.
TEST(GpuRuntime, FactorizationsFallBackToTheHost) {
  REQUIRE_GPU();
  array a = add(randn({6, 6}, float32), multiply(array(8.0f), eye(6, float32)));
  array ai = linalg::inv(a, Device::gpu);
  array prod = matmul(a, ai, Device::gpu);
  expect_allclose(prod, eye(6, float32), 1e-4, 1e-4);
}

// An error raised while a GPU stream runs a node reaches the host at the next eval, with its
// type, and the stream keeps working afterwards.
TEST(GpuRuntime, KernelErrorsReachTheHost) {
  REQUIRE_GPU();
  array a = array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  array singular = array({1.0f, 2.0f, 2.0f, 4.0f}, {2, 2});
  EXPECT_ANY_THROW(eval(linalg::inv(singular, Device::gpu)));
  array ok = add(a, a, Device::gpu);
  expect_close(ok, {2, 2}, {2, 4, 6, 8});
}

// Zero-size arrays never launch a kernel and come back empty.
TEST(GpuRuntime, EmptyArrays) {
  REQUIRE_GPU();
  array z = zeros({0, 7}, float32, Device::gpu);
  array s = sum(add(z, array(1.0f), Device::gpu), 0, false, Device::gpu);
  eval(s);
  expect_close(s, {7}, std::vector<double>(7, 0.0));
}

} // namespace
