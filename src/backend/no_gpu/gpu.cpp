// nuvec: the GPU entry points of a CPU-only build: no device, and a clear error if a GPU
// stream is ever asked to run a node.
#include <stdexcept>

#include "backend/gpu.h"
#include "nuvec/primitives.h"

namespace nuvec::gpu {

bool is_available() {
  return false;
}
int device_count() {
  return 0;
}
const std::unordered_map<std::string, std::variant<std::string, size_t>>& device_info(int) {
  throw std::invalid_argument("[device_info] no GPU is available in this build.");
}
void eval(array& arr) {
  throw std::runtime_error(
      std::string("[eval] ") + arr.primitive().name() +
      ": this build has no GPU backend.");
}
void finalize(Stream) {}

} // namespace nuvec::gpu
