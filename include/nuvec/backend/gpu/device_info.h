// nuvec: the GPU's presence and properties (MLX's mlx/backend/gpu/device_info.h). The CUDA
// backend answers in a CUDA build (src/backend/cuda/device.cpp), src/backend/no_gpu otherwise.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <variant>

namespace nuvec::gpu {

/// Whether a GPU can run work: a CUDA build on a machine with a CUDA device.
bool is_available();

/// Number of GPUs present (0 without the CUDA backend or a device).
int device_count();

/// Properties of GPU `device_index`: see nuvec::device_info (MLX's keys plus nuvec's). An
/// empty map without a GPU (MLX's); throws std::invalid_argument for an index past the
/// devices present.
const std::unordered_map<std::string, std::variant<std::string, size_t>>&
device_info(int device_index = 0);

} // namespace nuvec::gpu
