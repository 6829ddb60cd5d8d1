// nuvec: eval_gpu of the fused primitives (Softmax, LogSumExp and their backwards, the norms,
// cross_entropy, Rope, NormRope, the depthwise conv1d ones, the attention primitives,
// GatedDelta) in a CPU-only build (see no_gpu.h).
#include "backend/no_gpu/no_gpu.h"
#include "fast/attention.h"
#include "fast/cross_entropy.h"
#include "fast/depthwise_conv1d.h"
#include "fast/gated_delta.h"
#include "fast/logsumexp.h"
#include "fast/norm_rope.h"
#include "fast/norms.h"
#include "fast/rope.h"
#include "fast/softmax.h"

namespace nuvec {

NUVEC_NO_GPU(Softmax)
NUVEC_NO_GPU(SoftmaxVjp)
NUVEC_NO_GPU(LogSumExp)
NUVEC_NO_GPU(LogSumExpVjp)
NUVEC_NO_GPU(RmsNorm)
NUVEC_NO_GPU(RmsNormVjp)
NUVEC_NO_GPU(AddRmsNorm)
NUVEC_NO_GPU(LayerNorm)
NUVEC_NO_GPU(LayerNormVjp)
NUVEC_NO_GPU(CrossEntropy)
NUVEC_NO_GPU(CrossEntropyVjp)
NUVEC_NO_GPU(Rope)
NUVEC_NO_GPU(NormRope)
NUVEC_NO_GPU(DepthwiseConv1d)
NUVEC_NO_GPU(CausalConv1dStep)
NUVEC_NO_GPU(ScaledDotProductAttention)
NUVEC_NO_GPU(ScaledDotProductAttentionVjp)
NUVEC_NO_GPU(PagedAttention)
NUVEC_NO_GPU(PagedWrite)
NUVEC_NO_GPU(GatedDelta)
NUVEC_NO_GPU(GatedDeltaVjp)

} // namespace nuvec
