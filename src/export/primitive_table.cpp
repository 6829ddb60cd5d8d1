// nuvec export: the table that writes and rebuilds every primitive family (one row each), and
// the input-shape rules of shapeless imports. A family's parameters are its state() tuple,
// written field by field and read back into its constructor (MLX's export.cpp scheme).
#include "export/primitive_table.h"

#include <sstream>
#include <typeindex>
#include <unordered_map>

#include "core/errors.h"
#include "primitives/fft.h"
#include "primitives/gather_scatter.h"
#include "primitives/linalg.h"
#include "primitives/primitives.h"
#include "primitives/random.h"
#include "primitives/scan.h"
#include "fast/attention.h"
#include "fast/cross_entropy.h"
#include "fast/depthwise_conv1d.h"
#include "fast/gated_delta.h"
#include "fast/logsumexp.h"
#include "fast/norm_rope.h"
#include "fast/norms.h"
#include "fast/rope.h"
#include "fast/softmax.h"
#include "primitives/partition.h"
#include "quantized/quantized.h"

namespace nuvec::export_detail {

namespace {

template <typename P>
concept HasState = requires(const P& p) { p.state(); };

template <typename P>
void save_state(Encoder& out, const Primitive& p) {
  if constexpr (HasState<P>) out.put(static_cast<const P&>(p).state());
}

template <typename P>
std::shared_ptr<Primitive> load_state(Decoder& in, Stream s) {
  if constexpr (HasState<P>) {
    using State = std::decay_t<decltype(std::declval<const P&>().state())>;
    auto state = in.get<State>();
    if constexpr (is_tuple_like<State>) {
      return std::apply(
          [&](auto&&... args) { return std::make_shared<P>(s, std::move(args)...); },
          std::move(state));
    } else {
      return std::make_shared<P>(s, std::move(state));
    }
  } else {
    return std::make_shared<P>(s);
  }
}

// A CustomTransforms node keeps its forward graph in its inputs, so it replays; its rules
// are C++ functions, which no file can hold. The rebuilt node says so when asked for one.
[[noreturn]] void no_custom_rule(const char* rule) {
  throw_invalid_argument(
      "import_function", "the custom ", rule,
      " rule of an exported custom_function is not stored in the file; differentiate or "
      "vmap the function before exporting it.");
}

void save_custom(Encoder& out, const Primitive& p) {
  out.put<int32_t>(static_cast<const CustomTransforms&>(p).num_outputs());
}

std::shared_ptr<Primitive> load_custom(Decoder& in, Stream s) {
  int n = in.get<int32_t>();
  return std::make_shared<CustomTransforms>(
      s, n,
      [](const std::vector<array>&, const std::vector<array>&, const std::vector<array>&)
          -> std::vector<array> { no_custom_rule("vjp"); },
      [](const std::vector<array>&, const std::vector<array>&, const std::vector<int>&)
          -> std::vector<array> { no_custom_rule("jvp"); },
      [](const std::vector<array>&, const std::vector<int>&)
          -> std::pair<std::vector<array>, std::vector<int>> { no_custom_rule("vmap"); });
}

struct Row {
  std::type_index type;
  PrimitiveCodec codec;
};

template <typename P>
Row row(const char* family, ShapeRule rule) {
  return {typeid(P), {family, rule, &save_state<P>, &load_state<P>}};
}

using R = ShapeRule;

// Every family of include/nuvec/primitive_families.h and src/primitives/*.h. The internal
// Synchronizer of eval never appears in a user's graph.
const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // element-wise
      row<Unary>("Unary", R::SameRank),
      row<Binary>("Binary", R::Elementwise),
      row<DivMod>("DivMod", R::Elementwise),
      row<Select>("Select", R::Elementwise),
      // copies, casts, plumbing
      row<AsType>("AsType", R::SameRank),
      row<View>("View", R::SameRank),
      row<Copy>("Copy", R::SameRank),
      row<Contiguous>("Contiguous", R::SameRank),
      row<StopGradient>("StopGradient", R::SameRank),
      row<Depends>("Depends", R::Any),
      row<AsStrided>("AsStrided", R::Pinned),
      row<Full>("Full", R::SameRank),
      row<Arange>("Arange", R::Pinned),
      {typeid(CustomTransforms), {"CustomTransforms", R::Any, &save_custom, &load_custom}},
      // shapes and views
      row<Reshape>("Reshape", R::Pinned),
      row<Transpose>("Transpose", R::SameRank),
      row<Broadcast>("Broadcast", R::Pinned),
      row<Squeeze>("Squeeze", R::Squeeze),
      row<ExpandDims>("ExpandDims", R::SameRank),
      row<Slice>("Slice", R::Pinned),
      row<SliceUpdate>("SliceUpdate", R::Pinned),
      row<DynamicSlice>("DynamicSlice", R::Pinned),
      row<DynamicSliceUpdate>("DynamicSliceUpdate", R::Pinned),
      row<Concatenate>("Concatenate", R::Concatenate),
      // reductions, sorting, scans
      row<Reduce>("Reduce", R::SameRank),
      row<ArgReduce>("ArgReduce", R::SameRank),
      row<Sort>("Sort", R::SameRank),
      row<ArgSort>("ArgSort", R::SameRank),
      row<Partition>("Partition", R::Pinned),
      row<ArgPartition>("ArgPartition", R::Pinned),
      row<Scan>("Scan", R::SameRank),
      row<Softmax>("Softmax", R::SameRank),
      row<SoftmaxVjp>("SoftmaxVjp", R::SameRank),
      row<LogSumExp>("LogSumExp", R::SameRank),
      row<LogSumExpVjp>("LogSumExpVjp", R::SameRank),
      row<RmsNorm>("RmsNorm", R::SameRank),
      row<RmsNormVjp>("RmsNormVjp", R::SameRank),
      row<AddRmsNorm>("AddRmsNorm", R::SameRank),
      row<LayerNorm>("LayerNorm", R::SameRank),
      row<LayerNormVjp>("LayerNormVjp", R::SameRank),
      row<CrossEntropy>("CrossEntropy", R::SameRank),
      row<CrossEntropyVjp>("CrossEntropyVjp", R::SameRank),
      row<Rope>("Rope", R::SameRank),
      // the cache window (offset, rows) is fixed by the traced shapes
      row<NormRope>("NormRope", R::Pinned),
      // attention: the plan (passes, key blocks) was made for the traced shapes
      row<ScaledDotProductAttention>("ScaledDotProductAttention", R::Pinned),
      row<ScaledDotProductAttentionVjp>("ScaledDotProductAttentionVjp", R::Pinned),
      row<PagedAttention>("PagedAttention", R::Pinned),
      row<PagedWrite>("PagedWrite", R::Pinned),
      // the recurrence's shapes (heads, state) are fixed by the traced ones
      row<GatedDelta>("GatedDelta", R::Pinned),
      row<GatedDeltaVjp>("GatedDeltaVjp", R::Pinned),
      // quantized and gathered products: the packed layout fixes the weight's shape
      row<QuantizedMatmul>("QuantizedMatmul", R::Pinned),
      row<GatherQmm>("GatherQmm", R::Pinned),
      row<GatherMm>("GatherMm", R::Pinned),
      row<QQMatmul>("QQMatmul", R::Pinned),
      // indexing
      row<GatherAxis>("GatherAxis", R::Pinned),
      row<ScatterAxis>("ScatterAxis", R::Pinned),
      row<Gather>("Gather", R::Pinned),
      row<Scatter>("Scatter", R::Pinned),
      row<MaskedRank>("MaskedRank", R::SameRank),
      // products, convolution, transforms, linear algebra, random
      row<Matmul>("Matmul", R::Product),
      row<AddMM>("AddMM", R::Product),
      row<Convolution>("Convolution", R::Pinned),
      row<DepthwiseConv1d>("DepthwiseConv1d", R::Pinned),
      row<CausalConv1dStep>("CausalConv1dStep", R::Pinned),
      row<FFT>("FFT", R::Pinned),
      row<Linalg>("Linalg", R::Pinned),
      row<RandomBits>("RandomBits", R::Pinned),
      row<CovarianceSqrt>("CovarianceSqrt", R::SameRank),
  };
  return table;
}

} // namespace

const PrimitiveCodec& codec_for(const Primitive& p) {
  static const auto by_type = [] {
    std::unordered_map<std::type_index, const PrimitiveCodec*> m;
    for (auto& r : rows()) m.emplace(r.type, &r.codec);
    return m;
  }();
  auto it = by_type.find(typeid(p));
  if (it == by_type.end()) {
    throw_invalid_argument(
        "export_function", "unable to serialize primitive ", p.name(),
        ": no row of the export table covers it.");
  }
  return *it->second;
}

const PrimitiveCodec& codec_named(const std::string& family, const std::string& file) {
  static const auto by_name = [] {
    std::unordered_map<std::string, const PrimitiveCodec*> m;
    for (auto& r : rows()) m.emplace(r.codec.family, &r.codec);
    return m;
  }();
  auto it = by_name.find(family);
  if (it == by_name.end()) {
    throw std::runtime_error(
        "[import_function] " + file + ": unable to deserialize primitive family " + family + ".");
  }
  return *it->second;
}

void check_shapeless_inputs(
    ShapeRule rule,
    const Primitive& p,
    const std::vector<Shape>& traced,
    const std::vector<array>& inputs) {
  auto fail = [&](const char* why) {
    std::ostringstream shapes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      shapes << (i ? ", " : "") << traced[i] << " -> " << inputs[i].shape();
    }
    throw_invalid_argument(
        "import_function", "in a shapeless function, the inputs of ", p.name(), " ", why,
        "; got input shapes (traced -> called) ", shapes.str(), ".");
  };
  auto same_rank = [&] {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].ndim() != traced[i].size()) fail("must keep their traced ranks");
    }
  };
  switch (rule) {
    case ShapeRule::Any:
      return;
    case ShapeRule::Pinned:
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].shape() != traced[i]) fail("must keep their traced shapes (its parameters fix them)");
      }
      return;
    case ShapeRule::SameRank:
      same_rank();
      return;
    case ShapeRule::Squeeze:
      same_rank();
      for (int ax : static_cast<const Squeeze&>(p).state()) {
        if (inputs[0].shape(ax) != 1) fail("must keep size 1 on the squeezed axes");
      }
      return;
    case ShapeRule::Elementwise: {
      same_rank();
      const Shape* common = nullptr;
      for (auto& in : inputs) {
        if (in.ndim() == 0) continue;
        if (common && in.shape() != *common) fail("must share one shape");
        common = &in.shape();
      }
      return;
    }
    case ShapeRule::Product: {
      same_rank();
      const array& a = inputs[0];
      const array& b = inputs[1];
      if (a.ndim() < 2 || b.ndim() < 2 || a.shape(-1) != b.shape(-2)) {
        fail("must have matching inner dimensions");
      }
      Shape batch_a(a.shape().begin(), a.shape().end() - 2);
      Shape batch_b(b.shape().begin(), b.shape().end() - 2);
      bool traced_equal = Shape(traced[0].begin(), traced[0].end() - 2) ==
                          Shape(traced[1].begin(), traced[1].end() - 2);
      if (traced_equal && batch_a != batch_b) fail("must have equal batch shapes");
      if (inputs.size() == 3) {
        Shape out = batch_a;
        out.push_back(a.shape(-2));
        out.push_back(b.shape(-1));
        if (inputs[2].shape() != out) fail("must give the addend the product's shape");
      }
      return;
    }
    case ShapeRule::Concatenate: {
      same_rank();
      int axis = static_cast<const Concatenate&>(p).state();
      for (auto& in : inputs) {
        for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
          if (d != axis && in.shape(d) != inputs[0].shape(d)) fail("must agree off the concatenation axis");
        }
      }
      return;
    }
  }
}

} // namespace nuvec::export_detail
