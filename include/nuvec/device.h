// nuvec: devices (MLX's device.h API). A CPU-only build reports no GPU; nuvec never has Metal.
#pragma once

#include <ostream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>

namespace nuvec {

/// A compute device: its type and index.
struct Device {
  enum class DeviceType { cpu, gpu };

  static constexpr DeviceType cpu = DeviceType::cpu;
  static constexpr DeviceType gpu = DeviceType::gpu;

  Device(DeviceType type, int index = 0) : type(type), index(index) {}

  DeviceType type;
  int index;

  /// Devices are equal when type and index are.
  bool operator==(const Device&) const = default;
  /// A strict weak order consistent with ==: by type (cpu before gpu), then index (MLX's).
  bool operator<(const Device& rhs) const {
    return std::tie(type, index) < std::tie(rhs.type, rhs.index);
  }
};

/// A device matches a device type when its type is that type, whatever its index (MLX's rule:
/// `d == Device::gpu` asks "is d a GPU").
inline bool operator==(const Device& device, Device::DeviceType type) {
  return device.type == type;
}

/// The device ops run on when none is given: the GPU when one is available, else the CPU. It
/// is process-wide (every thread sees the same default device).
const Device& default_device();

/// Sets the default device (for every thread). Throws std::invalid_argument when d is not
/// available.
void set_default_device(const Device& d);

/// Whether the device is available in this build and on this machine: the CPU with index 0
/// (one CPU device, as MLX), the GPU with index 0 when a CUDA device is present (one GPU per
/// process for now).
bool is_available(const Device& d);

/// Number of devices of a type (1 for the CPU; CUDA devices for the GPU, 0 without one).
int device_count(Device::DeviceType type);

/// Properties of a device. The CPU: "device_name", "architecture". A CUDA GPU (from
/// cudaGetDeviceProperties): "device_name", "architecture" (`sm_90`), "total_memory",
/// "memory_size", "free_memory", "uuid", "pci_bus_id", "compute_capability_major"/"_minor",
/// and nuvec's "multiprocessor_count", "l2_cache_size", "max_shared_memory_per_block",
/// "max_threads_per_block". Without a GPU, `device_info(Device::gpu)` is an empty map
/// (MLX's). Throws std::invalid_argument for a GPU index past the devices present.
const std::unordered_map<std::string, std::variant<std::string, size_t>>&
device_info(const Device& d = default_device());

/// Prints `Device(cpu, 0)` and `cpu` / `gpu`.
std::ostream& operator<<(std::ostream& os, const Device& d);
std::ostream& operator<<(std::ostream& os, const Device::DeviceType& t);

} // namespace nuvec
