// nuvec: devices (MLX's device.h API). A CPU-only build reports no GPU.
#pragma once

#include <ostream>
#include <string>
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
};

/// The device ops run on when none is given (the GPU when one is available, else the CPU).
const Device& default_device();

/// Sets the default device. Throws std::invalid_argument when d is not available.
void set_default_device(const Device& d);

/// Devices are equal when type and index are.
bool operator==(const Device& lhs, const Device& rhs);
bool operator!=(const Device& lhs, const Device& rhs);

/// Whether the device is available in this build and on this machine (GPUs: index 0 only,
/// one GPU per process for now).
bool is_available(const Device& d);

/// Number of devices of a type (1 for the CPU; CUDA devices for the GPU).
int device_count(Device::DeviceType type);

/// Properties of a device ("device_name", "architecture", "total_memory", ...).
const std::unordered_map<std::string, std::variant<std::string, size_t>>&
device_info(const Device& d = default_device());

/// Prints `Device(cpu, 0)` and `cpu` / `gpu`.
std::ostream& operator<<(std::ostream& os, const Device& d);
std::ostream& operator<<(std::ostream& os, const Device::DeviceType& t);

} // namespace nuvec
