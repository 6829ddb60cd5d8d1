// nuvec: devices. The GPU is reported by the CUDA backend when it is built (gpu_available
// comes from src/backend/cuda or the no_gpu stub).
#include "nuvec/device.h"

#include <mutex>
#include <stdexcept>

#include "backend/gpu.h"

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
    throw std::invalid_argument("[set_default_device] the device is not available (no CUDA backend in this build, no CUDA device found, or a GPU index other than 0).");
  }
  std::lock_guard<std::mutex> lk(default_device_mtx);
  default_device_ref() = d;
}

bool operator==(const Device& lhs, const Device& rhs) {
  return lhs.type == rhs.type && lhs.index == rhs.index;
}
bool operator!=(const Device& lhs, const Device& rhs) {
  return !(lhs == rhs);
}

bool is_available(const Device& d) {
  // One GPU per process for now: the device allocator and array residency track a single
  // device, so other indices are reported unavailable (streams on them are refused).
  return d.type == Device::cpu || (d.index == 0 && gpu::is_available());
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

} // namespace nuvec
