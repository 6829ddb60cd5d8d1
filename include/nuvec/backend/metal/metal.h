// nuvec: MLX's Metal namespace (mlx/backend/metal/metal.h), for code written against MLX.
// nuvec runs on Linux with CPUs and CUDA GPUs: Metal is never available.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <variant>

namespace nuvec::metal {

/// Whether the Metal backend is available: always false.
bool is_available();

/// GPU trace capture (Metal only): does nothing.
void start_capture(std::string path = "");
void stop_capture();

/// Metal device properties: throws std::runtime_error (there is no Metal device), as MLX
/// does without its Metal backend.
const std::unordered_map<std::string, std::variant<std::string, size_t>>& device_info();

} // namespace nuvec::metal
