// nuvec: the GPU entry points of a CPU-only build: no device (gpu:: and cu:: report none, as
// MLX's no_gpu and no_cuda backends), and a clear error if a GPU stream is ever asked to run
// a node.
#include <stdexcept>

#include "backend/gpu.h"
#include "nuvec/backend/cuda/cuda.h"
#include "nuvec/primitives.h"

namespace nuvec {

namespace {
// MLX's answer for a GPU without one: an empty property map.
const std::unordered_map<std::string, std::variant<std::string, size_t>>& no_properties() {
  static const std::unordered_map<std::string, std::variant<std::string, size_t>> empty;
  return empty;
}
} // namespace

namespace cu {
bool is_available() {
  return false;
}
const std::unordered_map<std::string, std::variant<std::string, size_t>>& device_info(int) {
  return no_properties();
}
} // namespace cu

namespace gpu {

bool is_available() {
  return false;
}
int device_count() {
  return 0;
}
const std::unordered_map<std::string, std::variant<std::string, size_t>>& device_info(int) {
  return no_properties();
}
void eval(array& arr) {
  throw std::runtime_error(
      std::string("[eval] ") + arr.primitive().name() +
      ": this build has no GPU backend.");
}
void run_tape(detail::ReplayTape&, const std::vector<array>&, std::vector<array>&) {
  throw std::runtime_error("[eval] GraphReplay: this build has no GPU backend.");
}
void finalize(Stream) {}
void synchronize(Stream) {}

// Without a GPU no buffer lives on a device: host buffers are always present.
void ensure_host(array::Data&) {}
void free_device(void*, size_t) {}

size_t active_memory() {
  return 0;
}
size_t peak_memory() {
  return 0;
}
void reset_peak_memory() {}
size_t cache_memory() {
  return 0;
}
void clear_cache() {}
void set_cache_limit(size_t) {}

} // namespace gpu

} // namespace nuvec
