// nuvec: the GPU backend's entry points used by the core (implemented by src/backend/cuda,
// or by src/backend/no_gpu in a CPU-only build).
#pragma once

#include <string>
#include <unordered_map>
#include <variant>

#include "nuvec/array.h"

namespace nuvec::gpu {

bool is_available();
int device_count();
const std::unordered_map<std::string, std::variant<std::string, size_t>>& device_info(int index);

/// Runs arr's primitive on its GPU stream.
void eval(array& arr);
/// Flushes work recorded on a GPU stream.
void finalize(Stream s);

} // namespace nuvec::gpu
