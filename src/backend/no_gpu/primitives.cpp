// nuvec: eval_gpu of every primitive in a CPU-only build. GPU streams cannot be created
// without a GPU, so reaching one of these means a bug; each says which primitive.
#include <stdexcept>
#include <string>

#include "primitives/primitives.h"

namespace nuvec {

namespace {
[[noreturn]] void no_gpu(const char* name) {
  throw std::runtime_error(std::string("[") + name + "] this build has no GPU backend.");
}
} // namespace

#define NUVEC_NO_GPU(Family)                                                        \
  void Family::eval_gpu(const std::vector<array>&, std::vector<array>&) {          \
    no_gpu(name());                                                                 \
  }

NUVEC_NO_GPU(Unary)
NUVEC_NO_GPU(Binary)
NUVEC_NO_GPU(DivMod)
NUVEC_NO_GPU(Select)
NUVEC_NO_GPU(AsType)
NUVEC_NO_GPU(View)
NUVEC_NO_GPU(Copy)
NUVEC_NO_GPU(Contiguous)
NUVEC_NO_GPU(StopGradient)
NUVEC_NO_GPU(Depends)
NUVEC_NO_GPU(AsStrided)
NUVEC_NO_GPU(Full)
NUVEC_NO_GPU(Arange)
NUVEC_NO_GPU(CustomTransforms)
NUVEC_NO_GPU(Reshape)
NUVEC_NO_GPU(Transpose)
NUVEC_NO_GPU(Broadcast)
NUVEC_NO_GPU(Squeeze)
NUVEC_NO_GPU(ExpandDims)
NUVEC_NO_GPU(Slice)
NUVEC_NO_GPU(SliceUpdate)
NUVEC_NO_GPU(DynamicSlice)
NUVEC_NO_GPU(DynamicSliceUpdate)
NUVEC_NO_GPU(Concatenate)
NUVEC_NO_GPU(Reduce)
NUVEC_NO_GPU(ArgReduce)
NUVEC_NO_GPU(Sort)
NUVEC_NO_GPU(ArgSort)
NUVEC_NO_GPU(GatherAxis)
NUVEC_NO_GPU(ScatterAxis)
NUVEC_NO_GPU(Matmul)
NUVEC_NO_GPU(AddMM)
NUVEC_NO_GPU(Convolution)

} // namespace nuvec
