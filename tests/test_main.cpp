// nuvec: the main of every test program. NUVEC_TEST_DEVICE=gpu runs the whole program with
// the GPU as the default device (CTest registers each test a second time that way), so the
// same assertions check the CUDA backend; without a GPU those runs are skipped.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "nuvec/device.h"

namespace {

class DeviceEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* v = std::getenv("NUVEC_TEST_DEVICE");
    std::string dev = v ? v : "cpu";
    if (dev == "gpu") {
      if (!nuvec::is_available(nuvec::Device::gpu)) GTEST_SKIP() << "no GPU";
      nuvec::set_default_device(nuvec::Device::gpu);
    } else {
      nuvec::set_default_device(nuvec::Device::cpu);
    }
  }
};

} // namespace

// CTest's skip code for the .gpu runs (SKIP_RETURN_CODE in tests/CMakeLists.txt).
constexpr int kSkipped = 77;

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* v = std::getenv("NUVEC_TEST_DEVICE");
  if (v && std::string(v) == "gpu" && !nuvec::is_available(nuvec::Device::gpu)) {
    // Not a pass: nothing ran. (A skip inside the environment's SetUp exits 0.)
    std::printf("NUVEC_TEST_DEVICE=gpu: no GPU available, skipped\n");
    return kSkipped;
  }
  ::testing::AddGlobalTestEnvironment(new DeviceEnvironment);
  return RUN_ALL_TESTS();
}
