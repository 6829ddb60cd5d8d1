// nuvec export: tracing a function to a graph, writing it as a .nuvecfn file, reading it back
// and replaying it (MLX's export.cpp semantics: one trace per input signature, constants
// stored once, calls matched by input count, keyword names, dtypes and, unless shapeless,
// shapes). The file layout is documented in docs/EXPORT.md; primitives go through
// primitive_table.cpp.
#include "nuvec/export.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.h"
#include "export/codec.h"
#include "export/primitive_table.h"
#include "io/io_common.h"
#include "nuvec/ops.h"
#include "nuvec/utils.h"
#include "nuvec/version.h"
#include "primitives/primitives.h"
#include "transforms/graph_walk.h"
#include "transforms/trace.h"

namespace nuvec {

namespace export_detail {

namespace {

constexpr char kMagic[8] = {'N', 'U', 'V', 'E', 'C', 'F', 'N', '\0'};
// 2: NormRope's parameters gained `offsets` (its array-offset form); a version-1 file's
// NormRope node would be read one field short, so version 1 is refused by name.
// 3: PagedAttention's parameters gained `window` and `has_sinks` (gpt-oss's options on the
// decode kernel); version 2 is refused likewise.
constexpr uint32_t kFormatVersion = 3;

using FlatFn = std::function<std::vector<array>(const Args&, const Kwargs&)>;

// The input signature of one trace: positional inputs, then keyword inputs in key order.
struct Signature {
  size_t n_positional{0};
  std::vector<std::string> kwarg_keys;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
};

Signature signature_of(const Args& args, const Kwargs& kwargs) {
  Signature s;
  s.n_positional = args.size();
  auto add = [&](const array& a) {
    s.shapes.push_back(a.shape());
    s.dtypes.push_back(a.dtype());
  };
  for (auto& a : args) add(a);
  for (auto& [k, v] : kwargs) {
    s.kwarg_keys.push_back(k);
    add(v);
  }
  return s;
}

bool matches(const Signature& s, const Args& args, const Kwargs& kwargs, bool shapeless) {
  if (args.size() != s.n_positional || kwargs.size() != s.kwarg_keys.size()) return false;
  size_t i = 0;
  auto same = [&](const array& x) {
    bool ok = x.dtype() == s.dtypes[i] && (shapeless || x.shape() == s.shapes[i]);
    ++i;
    return ok;
  };
  for (auto& a : args) {
    if (!same(a)) return false;
  }
  size_t k = 0;
  for (auto& [key, v] : kwargs) {
    if (key != s.kwarg_keys[k++] || !same(v)) return false;
  }
  return true;
}

void print_signature(std::ostream& os, const Signature& s) {
  os << s.n_positional << " positional inputs and " << s.kwarg_keys.size() << " keyword inputs:\n";
  for (size_t j = 0; j < s.shapes.size(); ++j) {
    if (j < s.n_positional) {
      os << "   " << j + 1 << ": ";
    } else {
      os << "   \"" << s.kwarg_keys[j - s.n_positional] << "\": ";
    }
    os << s.shapes[j] << " " << s.dtypes[j] << "\n";
  }
}

Stream stream_of(const array& a) {
  return a.has_primitive() ? a.primitive().stream() : default_stream(default_device());
}

void put_shape(Encoder& e, const Shape& s) {
  e.put<uint32_t>(static_cast<uint32_t>(s.size()));
  for (auto d : s) e.put<int32_t>(d);
}

Shape get_shape(Decoder& d) {
  auto n = d.get<uint32_t>();
  if (n > 64) throw std::runtime_error("[import_function] " + d.what() + ": a rank of " + std::to_string(n) + " (corrupt file?).");
  Shape s(n);
  for (auto& x : s) x = d.get<int32_t>();
  return s;
}

bool is_default_stream(const Stream& s) {
  try {
    return default_stream(s.device) == s;
  } catch (const std::exception&) {
    return false;
  }
}

} // namespace

// The writing side of a FunctionExporter.
struct ExporterState {
  std::string path;
  std::ofstream os;
  FlatFn fun;
  bool shapeless{false};
  std::streamoff count_offset{0};
  uint32_t count{0};
  bool closed{false};
  std::vector<Signature> written;
  // Constants already in the file, kept alive so that their ids are never reused.
  std::unordered_map<std::uintptr_t, array> constants;

  void write_header(const std::string& metadata);
  void export_trace(const Args& args, const Kwargs& kwargs);
};

// One imported trace: values live in numbered slots (inputs, constants, node outputs).
struct Trace {
  struct Node {
    std::shared_ptr<Primitive> primitive;
    const PrimitiveCodec* codec;
    std::vector<uint32_t> inputs;
    std::vector<uint32_t> outputs;
  };
  Signature signature;
  std::vector<Shape> slot_shapes; // as traced
  std::vector<Dtype> slot_dtypes;
  std::vector<uint32_t> input_slots;
  std::vector<std::pair<uint32_t, array>> constants;
  std::vector<Node> nodes;
  std::vector<uint32_t> outputs;

  std::vector<array> replay(const std::vector<array>& inputs, bool shapeless) const;
};

struct FunctionTable {
  std::string metadata;
  bool shapeless{false};
  std::vector<Trace> traces;
};

void ExporterState::write_header(const std::string& metadata) {
  std::string bytes;
  Encoder e(bytes);
  e.put_bytes(kMagic, sizeof(kMagic));
  e.put<uint32_t>(kFormatVersion);
  e.put(version());
  e.put(metadata);
  e.put(shapeless);
  count_offset = static_cast<std::streamoff>(bytes.size());
  e.put<uint32_t>(0);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  os.flush();
  if (!os) throw std::runtime_error("[export_function] failed to write " + path);
}

void ExporterState::export_trace(const Args& args, const Kwargs& kwargs) {
  if (closed) {
    throw std::runtime_error("[export_function] Attempting to write after exporting is closed.");
  }
  for (auto& s : written) {
    if (matches(s, args, kwargs, shapeless)) {
      throw std::runtime_error(
          "[export_function] Attempting to export a function twice with the same signature is "
          "not allowed.");
    }
  }
  Signature sig = signature_of(args, kwargs);

  // Trace on tracer copies of the inputs (as vjp does); the walk stops at them.
  std::vector<array> tracers;
  std::vector<array> outputs;
  {
    detail::InTracing tracing;
    for (auto& a : args) tracers.push_back(copy(a, stream_of(a)));
    for (auto& [k, v] : kwargs) tracers.push_back(copy(v, stream_of(v)));
    for (auto& t : tracers) t.set_tracer(true);
    Args targs(tracers.begin(), tracers.begin() + args.size());
    Kwargs tkwargs;
    size_t i = args.size();
    for (auto& [k, v] : kwargs) tkwargs.emplace(k, tracers[i++]);
    outputs = fun(targs, tkwargs);
  }
  for (auto& t : tracers) t.set_tracer(false);

  std::unordered_set<std::uintptr_t> visited;
  for (auto& t : tracers) visited.insert(t.id());
  std::vector<array> nodes, leaves;
  for (auto& out : outputs) {
    detail::walk_post_order(
        out, visited, [](const array&) {},
        [&](const array& a) { (a.has_primitive() ? nodes : leaves).push_back(a); });
  }

  // Encode the whole trace first: an unsupported primitive throws before the file changes.
  std::string bytes;
  Encoder e(bytes);
  e.put<uint64_t>(sig.n_positional);
  e.put(sig.kwarg_keys);
  e.put<uint64_t>(tracers.size());
  for (auto& t : tracers) {
    e.put<uint64_t>(t.id());
    put_shape(e, t.shape());
    e.put(t.dtype());
  }

  std::vector<array> new_constants;
  e.put<uint64_t>(leaves.size());
  for (auto& c : leaves) {
    e.put<uint64_t>(c.id());
    bool stored = constants.count(c.id()) > 0;
    e.put(!stored);
    if (stored) continue;
    if (!c.data_shared_ptr() && c.status() == array::Status::unscheduled) {
      throw_invalid_argument("export_function", "a captured array has neither data nor a primitive.");
    }
    auto data = io_detail::row_major_bytes(c);
    put_shape(e, c.shape());
    e.put(c.dtype());
    e.put<uint64_t>(data.size());
    e.put_bytes(data.data(), data.size());
    new_constants.push_back(c);
  }

  std::vector<Stream> streams;
  auto stream_ref = [&](const Stream& s) -> uint32_t {
    for (uint32_t i = 0; i < streams.size(); ++i) {
      if (streams[i] == s && streams[i].device == s.device) return i;
    }
    streams.push_back(s);
    return static_cast<uint32_t>(streams.size() - 1);
  };
  std::string node_bytes;
  Encoder n(node_bytes);
  n.put<uint64_t>(nodes.size());
  for (auto& a : nodes) {
    Primitive& p = a.primitive();
    const PrimitiveCodec& codec = codec_for(p);
    std::string params;
    Encoder pe(params);
    codec.save(pe, p);
    n.put(std::string(codec.family));
    n.put(std::string(p.name()));
    n.put<uint32_t>(stream_ref(p.stream()));
    n.put<uint64_t>(a.inputs().size());
    for (auto& in : a.inputs()) n.put<uint64_t>(in.id());
    n.put(params);
    auto outs = a.outputs();
    n.put<uint64_t>(outs.size());
    for (auto& o : outs) {
      n.put<uint64_t>(o.id());
      put_shape(n, o.shape());
      n.put(o.dtype());
    }
  }
  e.put<uint64_t>(streams.size());
  for (auto& s : streams) {
    e.put<int32_t>(s.device.type == Device::gpu ? 1 : 0);
    e.put<int32_t>(s.device.index);
    e.put<int32_t>(s.index);
    e.put(is_default_stream(s));
  }
  e.put_bytes(node_bytes.data(), node_bytes.size());
  e.put<uint64_t>(outputs.size());
  for (auto& o : outputs) e.put<uint64_t>(o.id());

  os.seekp(0, std::ios::end);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  os.seekp(count_offset);
  std::string count_bytes;
  Encoder(count_bytes).put<uint32_t>(count + 1);
  os.write(count_bytes.data(), static_cast<std::streamsize>(count_bytes.size()));
  os.flush();
  if (!os) throw std::runtime_error("[export_function] failed to write " + path);
  ++count;
  written.push_back(std::move(sig));
  for (auto& c : new_constants) constants.emplace(c.id(), c);
}

std::vector<array> Trace::replay(const std::vector<array>& inputs, bool shapeless) const {
  std::vector<std::optional<array>> slots(slot_shapes.size());
  for (size_t i = 0; i < inputs.size(); ++i) slots[input_slots[i]] = inputs[i];
  for (auto& [slot, c] : constants) slots[slot] = c;
  for (auto& node : nodes) {
    std::vector<array> ins;
    ins.reserve(node.inputs.size());
    for (auto s : node.inputs) ins.push_back(*slots[s]);
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (auto s : node.outputs) dtypes.push_back(slot_dtypes[s]);
    if (shapeless) {
      std::vector<Shape> traced;
      for (auto s : node.inputs) traced.push_back(slot_shapes[s]);
      check_shapeless_inputs(node.codec->shape_rule, *node.primitive, traced, ins);
      shapes = node.primitive->output_shapes(ins);
    } else {
      for (auto s : node.outputs) shapes.push_back(slot_shapes[s]);
    }
    auto outs = array::make_arrays(std::move(shapes), dtypes, node.primitive, ins);
    for (size_t i = 0; i < outs.size(); ++i) slots[node.outputs[i]] = outs[i];
  }
  std::vector<array> result;
  for (auto s : outputs) result.push_back(*slots[s]);
  return result;
}

namespace {

// Reads one trace; `constants` (file id -> array) and `streams` persist across traces.
Trace read_trace(
    Decoder& d,
    std::unordered_map<uint64_t, array>& constants,
    std::map<std::tuple<int, int, int>, Stream>& streams) {
  Trace t;
  std::unordered_map<uint64_t, uint32_t> slot_of;
  auto new_slot = [&](uint64_t id, Shape shape, Dtype dtype) {
    uint32_t s = static_cast<uint32_t>(t.slot_shapes.size());
    slot_of[id] = s;
    t.slot_shapes.push_back(std::move(shape));
    t.slot_dtypes.push_back(dtype);
    return s;
  };
  auto slot = [&](uint64_t id) {
    auto it = slot_of.find(id);
    if (it == slot_of.end()) {
      throw std::runtime_error("[import_function] " + d.what() + ": a node reads an undefined value (corrupt file?).");
    }
    return it->second;
  };

  t.signature.n_positional = d.get<uint64_t>();
  t.signature.kwarg_keys = d.get<std::vector<std::string>>();
  auto n_inputs = d.get<uint64_t>();
  if (n_inputs != t.signature.n_positional + t.signature.kwarg_keys.size()) {
    throw std::runtime_error("[import_function] " + d.what() + ": input counts disagree (corrupt file?).");
  }
  for (uint64_t i = 0; i < n_inputs; ++i) {
    auto id = d.get<uint64_t>();
    auto shape = get_shape(d);
    auto dtype = d.get<Dtype>();
    t.signature.shapes.push_back(shape);
    t.signature.dtypes.push_back(dtype);
    t.input_slots.push_back(new_slot(id, shape, dtype));
  }

  auto n_constants = d.get<uint64_t>();
  for (uint64_t i = 0; i < n_constants; ++i) {
    auto id = d.get<uint64_t>();
    if (d.get<bool>()) {
      auto shape = get_shape(d);
      auto dtype = d.get<Dtype>();
      auto nbytes = d.get<uint64_t>();
      size_t expect = size_of(dtype);
      for (auto x : shape) expect *= static_cast<size_t>(x);
      if (nbytes != expect) {
        throw std::runtime_error("[import_function] " + d.what() + ": a constant's size disagrees with its shape (corrupt file?).");
      }
      std::vector<char> data(nbytes);
      d.get_bytes(data.data(), data.size());
      constants.insert_or_assign(id, io_detail::array_from_bytes(data.data(), shape, dtype));
    }
    auto it = constants.find(id);
    if (it == constants.end()) {
      throw std::runtime_error("[import_function] " + d.what() + ": a constant is referenced before it is stored (corrupt file?).");
    }
    t.constants.emplace_back(new_slot(id, it->second.shape(), it->second.dtype()), it->second);
  }

  std::vector<Stream> local_streams;
  auto n_streams = d.get<uint64_t>();
  for (uint64_t i = 0; i < n_streams; ++i) {
    auto type = d.get<int32_t>() == 1 ? Device::gpu : Device::cpu;
    auto dev_index = d.get<int32_t>();
    auto index = d.get<int32_t>();
    bool was_default = d.get<bool>();
    auto key = std::make_tuple(static_cast<int>(type), dev_index, index);
    auto it = streams.find(key);
    if (it == streams.end()) {
      // Stream indices mean nothing in another process: the exported default stream of a
      // device maps to that device's default stream, every other one to a new stream, and
      // a device missing here to the default device.
      Device dev(type, dev_index);
      if (!is_available(dev)) {
        it = streams.emplace(key, default_stream(default_device())).first;
      } else {
        it = streams.emplace(key, was_default ? default_stream(dev) : new_stream(dev)).first;
      }
    }
    local_streams.push_back(it->second);
  }

  auto n_nodes = d.get<uint64_t>();
  for (uint64_t i = 0; i < n_nodes; ++i) {
    auto family = d.get<std::string>();
    auto name = d.get<std::string>();
    auto sref = d.get<uint32_t>();
    if (sref >= local_streams.size()) {
      throw std::runtime_error("[import_function] " + d.what() + ": a node names an undefined stream (corrupt file?).");
    }
    Trace::Node node;
    for (auto id : d.get<std::vector<uint64_t>>()) node.inputs.push_back(slot(id));
    std::istringstream params(d.get<std::string>());
    Decoder pd(params, d.what());
    node.codec = &codec_named(family, d.what());
    node.primitive = node.codec->load(pd, local_streams[sref]);
    if (name != node.primitive->name() || params.peek() != std::char_traits<char>::eof()) {
      throw std::runtime_error(
          "[import_function] " + d.what() + ": the stored " + family + " node " + name +
          " rebuilds as " + node.primitive->name() +
          " (written by an incompatible nuvec version, or corrupt).");
    }
    auto n_out = d.get<uint64_t>();
    for (uint64_t j = 0; j < n_out; ++j) {
      auto id = d.get<uint64_t>();
      auto shape = get_shape(d);
      auto dtype = d.get<Dtype>();
      node.outputs.push_back(new_slot(id, std::move(shape), dtype));
    }
    t.nodes.push_back(std::move(node));
  }
  for (auto id : d.get<std::vector<uint64_t>>()) t.outputs.push_back(slot(id));
  return t;
}

} // namespace

} // namespace export_detail

using export_detail::ExporterState;
using export_detail::FunctionTable;

FunctionExporter::FunctionExporter(std::unique_ptr<ExporterState> state) : state_(std::move(state)) {}
FunctionExporter::~FunctionExporter() = default;

void FunctionExporter::operator()(const Args& args) {
  state_->export_trace(args, {});
}
void FunctionExporter::operator()(const Kwargs& kwargs) {
  state_->export_trace({}, kwargs);
}
void FunctionExporter::operator()(const Args& args, const Kwargs& kwargs) {
  state_->export_trace(args, kwargs);
}
void FunctionExporter::close() {
  state_->closed = true;
}

FunctionExporter exporter(
    const std::string& path,
    const std::function<std::vector<array>(const Args&, const Kwargs&)>& fun,
    bool shapeless,
    const std::string& metadata) {
  auto state = std::make_unique<ExporterState>();
  state->path = path;
  state->fun = fun;
  state->shapeless = shapeless;
  state->os.open(path, std::ios::binary | std::ios::out | std::ios::trunc);
  if (!state->os.is_open()) throw std::runtime_error("[export_function] Failed to open " + path);
  state->write_header(metadata);
  return FunctionExporter(std::move(state));
}

FunctionExporter exporter(
    const std::string& path,
    const std::function<std::vector<array>(const Args&)>& fun,
    bool shapeless,
    const std::string& metadata) {
  return exporter(
      path,
      std::function<std::vector<array>(const Args&, const Kwargs&)>(
          [fun](const Args& args, const Kwargs&) { return fun(args); }),
      shapeless, metadata);
}

FunctionExporter exporter(
    const std::string& path,
    const std::function<std::vector<array>(const Kwargs&)>& fun,
    bool shapeless,
    const std::string& metadata) {
  return exporter(
      path,
      std::function<std::vector<array>(const Args&, const Kwargs&)>(
          [fun](const Args&, const Kwargs& kwargs) { return fun(kwargs); }),
      shapeless, metadata);
}

void export_function(
    const std::string& path,
    const std::function<std::vector<array>(const Args&)>& fun,
    const Args& args,
    bool shapeless,
    const std::string& metadata) {
  exporter(path, fun, shapeless, metadata)(args);
}

void export_function(
    const std::string& path,
    const std::function<std::vector<array>(const Kwargs&)>& fun,
    const Kwargs& kwargs,
    bool shapeless,
    const std::string& metadata) {
  exporter(path, fun, shapeless, metadata)(kwargs);
}

void export_function(
    const std::string& path,
    const std::function<std::vector<array>(const Args&, const Kwargs&)>& fun,
    const Args& args,
    const Kwargs& kwargs,
    bool shapeless,
    const std::string& metadata) {
  exporter(path, fun, shapeless, metadata)(args, kwargs);
}

ImportedFunction::ImportedFunction(std::shared_ptr<FunctionTable> table) : table_(std::move(table)) {}

std::vector<array> ImportedFunction::operator()(const Args& args) const {
  return (*this)(args, Kwargs{});
}
std::vector<array> ImportedFunction::operator()(const Kwargs& kwargs) const {
  return (*this)(Args{}, kwargs);
}

std::vector<array> ImportedFunction::operator()(const Args& args, const Kwargs& kwargs) const {
  for (auto& t : table_->traces) {
    if (!export_detail::matches(t.signature, args, kwargs, table_->shapeless)) continue;
    std::vector<array> inputs = args;
    for (auto& [k, v] : kwargs) inputs.push_back(v);
    return t.replay(inputs, table_->shapeless);
  }
  std::ostringstream msg;
  msg << "[import_function::call] No imported function found which matches the given "
         "positional and keyword arguments. Possible functions include:\n";
  int n = 1;
  for (auto& t : table_->traces) {
    msg << " " << n++ << ". Function with ";
    export_detail::print_signature(msg, t.signature);
  }
  msg << "\nReceived function with ";
  export_detail::print_signature(msg, export_detail::signature_of(args, kwargs));
  throw std::invalid_argument(msg.str());
}

const std::string& ImportedFunction::metadata() const {
  return table_->metadata;
}

ImportedFunction import_function(const std::string& path) {
  using namespace export_detail;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) throw std::runtime_error("[import_function] Failed to open " + path);
  Decoder d(in, path);
  char magic[sizeof(kMagic)];
  d.get_bytes(magic, sizeof(magic));
  if (!std::equal(std::begin(magic), std::end(magic), std::begin(kMagic))) {
    throw std::runtime_error("[import_function] " + path + " is not a .nuvecfn file (bad magic).");
  }
  auto format = d.get<uint32_t>();
  if (format != kFormatVersion) {
    throw std::runtime_error(
        "[import_function] " + path + " has format version " + std::to_string(format) +
        "; this nuvec reads version " + std::to_string(kFormatVersion) + ".");
  }
  d.get<std::string>(); // the writer's nuvec version (informational)
  auto table = std::make_shared<FunctionTable>();
  table->metadata = d.get<std::string>();
  table->shapeless = d.get<bool>();
  auto count = d.get<uint32_t>();
  std::unordered_map<uint64_t, array> constants;
  std::map<std::tuple<int, int, int>, Stream> streams;
  for (uint32_t i = 0; i < count; ++i) table->traces.push_back(read_trace(d, constants, streams));
  return ImportedFunction(std::move(table));
}

} // namespace nuvec
