// nuvec: compile's entry points and its trace cache (MLX compile.cpp: CompilerCache,
// detail::compile, compile). A cache entry is keyed by the function's id, the default
// stream, shapeless, the inputs' ndims, shapes (unless shapeless) and dtypes, and the
// caller's constants; it holds the traced inputs, the simplified and fused tape and outputs.
#include <typeinfo>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "compile/graph.h"
#include "transforms/trace.h"
#include "core/errors.h"

namespace nuvec {

namespace detail {

namespace {

using ArrayFn = std::function<std::vector<array>(const std::vector<array>&)>;

struct CacheEntry {
  Stream stream;
  bool shapeless;
  std::vector<uint64_t> constants;
  std::vector<array> inputs;
  std::vector<array> outputs;
  std::vector<array> tape;
  // The graph holds the traced shapes in a form replay cannot follow: a constant made from a
  // shape (note_shape_baked), or a Broadcast to a fixed shape outside a fused node. A
  // shapeless call with other shapes then traces again (an exact-shape entry) instead.
  bool shape_baked = false;
  // The trace as one GraphReplay node runs it (made on first use; see replays_as_graph).
  std::shared_ptr<ReplayTape> replay;
};

// Whether calls of entry become one GraphReplay node (captured as a CUDA graph): a trace on a
// GPU stream, replayed at its own shapes, whose every node runs on that stream. Elsewhere
// (the CPU, shapeless replays, traces spanning streams) the tape is rebuilt as a graph.
bool replays_as_graph(const CacheEntry& e, bool shapeless) {
  static const bool off = [] {
    const char* v = std::getenv("NUVEC_CUDA_GRAPHS");
    return v && std::string(v) == "0";
  }();
  if (off || shapeless || e.outputs.empty() || e.stream.device.type != Device::gpu) return false;
  bool any_node = false;
  for (auto& a : e.tape) {
    if (!a.has_primitive()) continue;
    if (a.primitive().stream() != e.stream) return false;
    any_node = true;
  }
  return any_node;
}

class CompilerCache {
 public:
  // The entry matching this call, or null.
  std::shared_ptr<CacheEntry> find(
      std::uintptr_t fun_id,
      const std::vector<array>& inputs,
      bool shapeless,
      const std::vector<uint64_t>& constants) {
    auto it = cache_.find(fun_id);
    if (it == cache_.end()) return nullptr;
    Stream stream = default_stream(default_device());
    for (auto& entry : it->second) {
      if (entry->stream == stream && entry->shapeless == shapeless &&
          entry->constants == constants && same_signature(inputs, entry->inputs, shapeless)) {
        return entry;
      }
    }
    return nullptr;
  }

  // Adds a filled entry (only once its trace succeeded, so a throwing trace leaves no
  // half-filled entry behind).
  void insert(std::uintptr_t fun_id, std::shared_ptr<CacheEntry> entry) {
    cache_[fun_id].push_back(std::move(entry));
  }

  void erase(std::uintptr_t fun_id) { cache_.erase(fun_id); }
  void clear() { cache_.clear(); }

 private:
  static bool same_signature(
      const std::vector<array>& a,
      const std::vector<array>& b,
      bool shapeless) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].ndim() != b[i].ndim() || a[i].dtype() != b[i].dtype()) return false;
      if (!shapeless && a[i].shape() != b[i].shape()) return false;
    }
    return true;
  }

  std::unordered_map<std::uintptr_t, std::vector<std::shared_ptr<CacheEntry>>> cache_;
};

CompilerCache& compiler_cache() {
  static CompilerCache cache;
  return cache;
}

// Tracing runs user code, which may compile again: the lock must be re-entrant.
std::recursive_mutex& cache_mutex() {
  static std::recursive_mutex m;
  return m;
}

bool skip_compile() {
  return compile_mode() == CompileMode::disabled;
}

// Traces fun on placeholders of inputs, then orders, simplifies and fuses its graph.
std::shared_ptr<CacheEntry> build_entry(
    const ArrayFn& fun,
    const std::vector<array>& inputs,
    bool shapeless,
    const std::vector<uint64_t>& constants) {
  auto entry = std::make_shared<CacheEntry>(
      CacheEntry{default_stream(default_device()), shapeless, constants, {}, {}, {}, false, nullptr});
  const unsigned long baked_before = shape_baked_count();
  std::tie(entry->inputs, entry->outputs) = compile_trace(fun, inputs);
  entry->shape_baked = shape_baked_count() != baked_before;
  auto [tape, parents_map] = compile_dfs(entry->inputs, entry->outputs, inputs);
  if (compile_mode() != CompileMode::no_simplify) {
    compile_simplify(tape, parents_map, entry->outputs, /* passes */ 3);
  }
  if (compile_mode() != CompileMode::no_fuse) {
    compile_fuse(tape, parents_map, entry->inputs, entry->outputs);
  }
  for (auto& a : tape) {
    if (a.has_primitive() && typeid(a.primitive()) == typeid(Broadcast)) entry->shape_baked = true;
  }
  entry->tape = std::move(tape);
  return entry;
}

template <typename T, typename... U>
std::uintptr_t function_address(const std::function<T(U...)>& fun) {
  using FunType = T (*)(U...);
  const FunType* ptr = fun.template target<FunType>();
  return ptr ? reinterpret_cast<std::uintptr_t>(*ptr) : 0;
}

} // namespace

CompileMode& compile_mode() {
  static CompileMode mode = (std::getenv("MLX_DISABLE_COMPILE") || std::getenv("NUVEC_DISABLE_COMPILE"))
      ? CompileMode::disabled
      : CompileMode::enabled;
  return mode;
}

std::function<std::vector<array>(const std::vector<array>&)> compile(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    std::uintptr_t fun_id,
    bool shapeless,
    std::vector<uint64_t> constants,
    bool graph) {
  if (skip_compile()) return fun;
  if (!fun) throw_invalid_argument("compile", "the function must have a target; got an empty one.");
  return [fun = std::move(fun), fun_id, shapeless, constants = std::move(constants), graph](
             const std::vector<array>& inputs) -> std::vector<array> {
    // Inside a transform or another trace: trace through the original function.
    for (auto& in : inputs) {
      if (in.is_tracer()) return fun(inputs);
    }
    std::shared_ptr<CacheEntry> entry;
    std::shared_ptr<ReplayTape> replay;
    bool replay_shapeless = shapeless;
    // The cached trace for these inputs (shapeless or exact-shape), traced now if missing.
    auto get = [&](bool sl) {
      std::lock_guard<std::recursive_mutex> lock(cache_mutex());
      auto e = compiler_cache().find(fun_id, inputs, sl, constants);
      if (!e) {
        e = build_entry(fun, inputs, sl, constants);
        compiler_cache().insert(fun_id, e);
      }
      return e;
    };
    {
      std::lock_guard<std::recursive_mutex> lock(cache_mutex());
      // A shapeless call first takes an exact-shape trace of these shapes, made when the
      // shapeless one could not follow them (shape_baked, or a ShapelessMismatch below).
      if (shapeless) entry = compiler_cache().find(fun_id, inputs, false, constants);
      if (entry) {
        replay_shapeless = false;
      } else {
        entry = get(shapeless);
      }
      if (replay_shapeless && entry->shape_baked) {
        bool same_shapes = true;
        for (size_t i = 0; i < inputs.size(); ++i) {
          same_shapes = same_shapes && inputs[i].shape() == entry->inputs[i].shape();
        }
        if (!same_shapes) {
          entry = get(false); // replaying would use the traced shapes: trace at these
          replay_shapeless = false;
        }
      }
      if (graph && replays_as_graph(*entry, replay_shapeless)) {
        if (!entry->replay) {
          entry->replay = std::make_shared<ReplayTape>();
          entry->replay->inputs = entry->inputs;
          entry->replay->outputs = entry->outputs;
          entry->replay->tape = entry->tape;
        }
        replay = entry->replay;
      }
    }
    if (replay) {
      std::vector<Shape> shapes;
      std::vector<Dtype> dtypes;
      for (auto& o : replay->outputs) {
        shapes.push_back(o.shape());
        dtypes.push_back(o.dtype());
      }
      return array::make_arrays(std::move(shapes), dtypes, std::make_shared<GraphReplay>(entry->stream, replay), inputs);
    }
    if (replay_shapeless) {
      try {
        return compile_replace(entry->tape, entry->inputs, entry->outputs, inputs, true);
      } catch (const ShapelessMismatch&) {
        // A node cannot follow these shapes (its checks or parameters hold the traced ones):
        // trace again at them, as the uncompiled function would run.
        entry = get(false);
      }
    }
    return compile_replace(entry->tape, entry->inputs, entry->outputs, inputs, false);
  };
}

void compile_erase(std::uintptr_t fun_id) {
  std::lock_guard<std::recursive_mutex> lock(cache_mutex());
  compiler_cache().erase(fun_id);
}

void compile_clear_cache() {
  std::lock_guard<std::recursive_mutex> lock(cache_mutex());
  compiler_cache().clear();
}

} // namespace detail

namespace {

std::function<std::vector<array>(const std::vector<array>&)> compile_keyed(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    bool shapeless,
    bool graph) {
  if (detail::skip_compile()) return fun;
  if (auto fun_id = detail::function_address(fun)) {
    return detail::compile(std::move(fun), fun_id, shapeless, {}, graph);
  }
  // No address to key on (a lambda with captures): key on a private copy, whose cache
  // entries go when the last copy of the compiled function does.
  using Fn = std::function<std::vector<array>(const std::vector<array>&)>;
  auto owned = std::shared_ptr<Fn>(new Fn(std::move(fun)), [](Fn* p) {
    detail::compile_erase(reinterpret_cast<std::uintptr_t>(p));
    delete p;
  });
  auto fun_id = reinterpret_cast<std::uintptr_t>(owned.get());
  return detail::compile(
      [owned = std::move(owned)](const std::vector<array>& inputs) { return (*owned)(inputs); },
      fun_id, shapeless, {}, graph);
}

} // namespace

std::function<std::vector<array>(const std::vector<array>&)> compile(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    bool shapeless) {
  return compile_keyed(std::move(fun), shapeless, /* graph */ false);
}

std::function<std::vector<array>(const std::vector<array>&)> compile_graph(
    std::function<std::vector<array>(const std::vector<array>&)> fun) {
  return compile_keyed(std::move(fun), /* shapeless */ false, /* graph */ true);
}

std::function<std::vector<array>(const std::vector<array>&)> compile(
    std::vector<array> (*fun)(const std::vector<array>&),
    bool shapeless) {
  if (detail::skip_compile()) return fun;
  return detail::compile(fun, reinterpret_cast<std::uintptr_t>(fun), shapeless);
}

void disable_compile() {
  detail::compile_mode() = CompileMode::disabled;
}

void enable_compile() {
  detail::compile_mode() = CompileMode::enabled;
}

void set_compile_mode(CompileMode mode) {
  detail::compile_mode() = mode;
}

} // namespace nuvec
