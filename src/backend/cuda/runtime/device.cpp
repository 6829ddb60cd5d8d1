// nuvec: CUDA device discovery and error checking: gpu:: and cu:: is_available/device_count/
// device_info (the keys of MLX's mlx/backend/cuda/device_info.cpp, from
// cudaGetDeviceProperties), and the check helpers every CUDA file uses.
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/runtime/launch.h"
#include "backend/gpu.h"
#include "nuvec/backend/cuda/cuda.h"

namespace nuvec {

namespace cu {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("[cuda] ") + what + ": " + cudaGetErrorString(err));
  }
}

void check_launch(const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw std::runtime_error(
        std::string("[cuda] launch of ") + kernel + " failed: " + cudaGetErrorString(err));
  }
}

namespace {

struct Devices {
  int count{0};
  std::vector<cudaDeviceProp> props;
  std::vector<std::unordered_map<std::string, std::variant<std::string, size_t>>> info;
};

// Queried once; a machine without a driver or GPU reports zero devices (no error).
const Devices& devices() {
  // Leaked on purpose: stream workers may still launch kernels during static destruction.
  static const Devices& d = *new Devices([] {
    Devices d;
    if (cudaGetDeviceCount(&d.count) != cudaSuccess) {
      cudaGetLastError(); // clear the sticky "no driver" error
      d.count = 0;
    }
    d.props.resize(d.count);
    d.info.resize(d.count);
    for (int i = 0; i < d.count; ++i) {
      check(cudaGetDeviceProperties(&d.props[i], i), "cudaGetDeviceProperties");
      auto& p = d.props[i];
      auto& m = d.info[i];
      m["device_name"] = std::string(p.name);
      m["architecture"] = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
      m["total_memory"] = static_cast<size_t>(p.totalGlobalMem);
      m["memory_size"] = static_cast<size_t>(p.totalGlobalMem);
      m["multiprocessor_count"] = static_cast<size_t>(p.multiProcessorCount);
      m["l2_cache_size"] = static_cast<size_t>(p.l2CacheSize);
      m["max_shared_memory_per_block"] = static_cast<size_t>(p.sharedMemPerBlockOptin);
      m["max_threads_per_block"] = static_cast<size_t>(p.maxThreadsPerBlock);
      m["compute_capability_major"] = static_cast<size_t>(p.major);
      m["compute_capability_minor"] = static_cast<size_t>(p.minor);
      char text[64];
      const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
      std::snprintf(
          text, sizeof(text),
          "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
          u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
      m["uuid"] = std::string(text);
      std::snprintf(
          text, sizeof(text), "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
      m["pci_bus_id"] = std::string(text);
    }
    return d;
  }());
  return d;
}

} // namespace

const cudaDeviceProp& device_props() {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  return devices().props.at(dev);
}

unsigned grid_for(size_t n, unsigned threads) {
  static const size_t cap = [] {
    auto& d = devices();
    size_t sms = d.count > 0 ? size_t(d.props[0].multiProcessorCount) : 132;
    return sms * 32; // enough resident blocks for several waves; loops stride beyond
  }();
  size_t blocks = (n + threads - 1) / threads;
  if (blocks == 0) blocks = 1;
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

} // namespace cu

namespace gpu {

bool is_available() {
  return cu::devices().count > 0;
}

int device_count() {
  return cu::devices().count;
}

const std::unordered_map<std::string, std::variant<std::string, size_t>>& device_info(int index) {
  auto& d = cu::devices();
  // MLX's answer on a host without a GPU is an empty property map, not an error (a CUDA
  // build runs on such hosts: CI does).
  static const std::unordered_map<std::string, std::variant<std::string, size_t>> no_gpu;
  if (d.count == 0) {
    return no_gpu;
  }
  if (index < 0 || index >= d.count) {
    throw std::invalid_argument(
        "[device_info] GPU index " + std::to_string(index) + " out of range: " +
        std::to_string(d.count) + " device(s).");
  }
  // The properties are queried once; "free_memory" changes, so each call answers with a
  // per-thread copy that has it refreshed (as MLX does), from cudaMemGetInfo on that device.
  thread_local std::unordered_map<std::string, std::variant<std::string, size_t>> info;
  info = d.info[index];
  int previous = 0;
  size_t free_bytes = 0, total_bytes = 0;
  bool ok = cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(index) == cudaSuccess;
  if (ok) {
    ok = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
    ok = cudaSetDevice(previous) == cudaSuccess && ok;
  }
  if (ok) {
    info["free_memory"] = free_bytes;
  } else {
    cudaGetLastError(); // leave no error behind for this thread's next check
  }
  return info;
}

} // namespace gpu

namespace cu {

bool is_available() {
  return true;
}

const std::unordered_map<std::string, std::variant<std::string, size_t>>& device_info(int index) {
  return gpu::device_info(index);
}

} // namespace cu

} // namespace nuvec
