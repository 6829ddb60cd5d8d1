// nuvec: devices (MLX's device.cpp rules: one CPU device; the GPU as the backend reports it,
// from src/backend/cuda or the no_gpu stub) and MLX's metal:: namespace, which reports no
// Metal.
#include "nuvec/device.h"

#include <mutex>
#include <stdexcept>

#include "backend/gpu.h"
#include "nuvec/backend/metal/metal.h"

namespace nuvec {

namespace {
std::mutex default_device_mtx;
Device& default_device_ref() {
  static Device d = gpu::is_available() ? Device(Device::gpu) : Device(Device::cpu);
  return d;
}
} // namespace

const Device& default_device() {
  std::lock_guard<std::mutex> lk(default_device_mtx);
  return default_device_ref();
}

void set_default_device(const Device& d) {
  if (!is_available(d)) {
    throw std::invalid_argument("[set_default_device] the device is not available (no CUDA backend in this build, no CUDA device found, or an index other than 0).");
  }
  std::lock_guard<std::mutex> lk(default_device_mtx);
  default_device_ref() = d;
}

bool is_available(const Device& d) {
  // One GPU per process for now: the device allocator and array residency track a single
  // device, so other indices are reported unavailable (streams on them are refused).
  return d.index == 0 && (d.type == Device::cpu || gpu::is_available());
}

int device_count(Device::DeviceType type) {
  return type == Device::cpu ? 1 : gpu::device_count();
}

const std::unordered_map<std::string, std::variant<std::string, size_t>>&
device_info(const Device& d) {
  if (d.type == Device::gpu) {
    return gpu::device_info(d.index);
  }
  static const auto info = [] {
    std::unordered_map<std::string, std::variant<std::string, size_t>> m;
    m["device_name"] = std::string("cpu");
    m["architecture"] = std::string("x86_64");
    return m;
  }();
  return info;
}

std::ostream& operator<<(std::ostream& os, const Device::DeviceType& t) {
  return os << (t == Device::cpu ? "cpu" : "gpu");
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << "Device(" << d.type << ", " << d.index << ")";
}

namespace metal {

bool is_available() {
  return false;
}

void start_capture(std::string) {}

void stop_capture() {}

const std::unordered_map<std::string, std::variant<std::string, size_t>>& device_info() {
  throw std::runtime_error("[metal::device_info] Cannot get device info without metal backend.");
}

} // namespace metal

} // namespace nuvec
