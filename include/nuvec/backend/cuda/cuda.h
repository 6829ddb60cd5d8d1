// nuvec: the CUDA backend's presence (MLX's mlx/backend/cuda/cuda.h).
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <variant>

namespace nuvec::cu {

/// Whether this build has the CUDA backend (true even on a machine without a GPU, as MLX's;
/// gpu::is_available() says whether a device is present).
bool is_available();

/// Properties of CUDA device `device_index` (the same map as gpu::device_info).
const std::unordered_map<std::string, std::variant<std::string, size_t>>&
device_info(int device_index = 0);

} // namespace nuvec::cu
