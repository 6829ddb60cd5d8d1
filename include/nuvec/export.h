// nuvec: exporting a function's graph to a file and importing it in another process (MLX's
// export.h API, MLX 0.32, with its metadata string). The file format is nuvec's own,
// `.nuvecfn`, described in docs/EXPORT.md; the implementation is in src/export/.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nuvec/array.h"

namespace nuvec {

/// Positional arguments of an exported function.
using Args = std::vector<array>;
/// Keyword arguments of an exported function (replayed after the positional ones, in key
/// order).
using Kwargs = std::map<std::string, array>;

namespace export_detail {
struct ExporterState;
struct FunctionTable;
} // namespace export_detail

/// Writes traces of one function to one file, one per input signature (number of
/// positional and keyword inputs, their shapes and dtypes; dtypes only when shapeless).
/// Made by `exporter`; the file is complete after every call.
struct FunctionExporter {
  /// Traces the function on args and appends the trace. Throws std::runtime_error when the
  /// exporter is closed or a trace of the same signature was already written;
  /// std::invalid_argument naming a primitive the format cannot store (nothing of that
  /// trace is written then).
  void operator()(const std::initializer_list<array>& args) { (*this)(Args(args)); }
  void operator()(const Args& args);
  void operator()(const Kwargs& kwargs);
  void operator()(const Args& args, const Kwargs& kwargs);

  /// Refuses further traces (the file stays as written).
  void close();

  FunctionExporter(const FunctionExporter&) = delete;
  FunctionExporter& operator=(const FunctionExporter&) = delete;
  FunctionExporter(FunctionExporter&& other) = default;
  FunctionExporter& operator=(FunctionExporter&& other) = default;
  ~FunctionExporter();

 private:
  friend FunctionExporter exporter(
      const std::string&, const std::function<std::vector<array>(const Args&, const Kwargs&)>&,
      bool, const std::string&);
  explicit FunctionExporter(std::unique_ptr<export_detail::ExporterState> state);
  std::unique_ptr<export_detail::ExporterState> state_;
};

/// An exporter writing traces of fun to `path` (created or truncated; the header is written
/// at once). `shapeless`: the imported function accepts inputs of other shapes where its
/// primitives allow (docs/EXPORT.md lists the rules). `metadata`: any string, returned by
/// ImportedFunction::metadata(). Throws std::runtime_error when the file cannot be opened.
/// Source: MLX's exporter.
FunctionExporter exporter(
    const std::string& path,
    const std::function<std::vector<array>(const Args&)>& fun,
    bool shapeless = false,
    const std::string& metadata = "");
FunctionExporter exporter(
    const std::string& path,
    const std::function<std::vector<array>(const Kwargs&)>& fun,
    bool shapeless = false,
    const std::string& metadata = "");
FunctionExporter exporter(
    const std::string& path,
    const std::function<std::vector<array>(const Args&, const Kwargs&)>& fun,
    bool shapeless = false,
    const std::string& metadata = "");

/// Traces fun on the given inputs and writes the graph to `path`: exporter(...) called once.
/// The inputs' values are not stored, only their shapes and dtypes; arrays the function
/// captures are stored as constants. Throws as exporter and FunctionExporter::operator().
/// Source: MLX's export_function.
void export_function(
    const std::string& path,
    const std::function<std::vector<array>(const Args&)>& fun,
    const Args& args,
    bool shapeless = false,
    const std::string& metadata = "");
void export_function(
    const std::string& path,
    const std::function<std::vector<array>(const Kwargs&)>& fun,
    const Kwargs& kwargs,
    bool shapeless = false,
    const std::string& metadata = "");
void export_function(
    const std::string& path,
    const std::function<std::vector<array>(const Args&, const Kwargs&)>& fun,
    const Args& args,
    const Kwargs& kwargs,
    bool shapeless = false,
    const std::string& metadata = "");

/// A function read from a file by import_function. Calling it picks the trace whose
/// signature matches the inputs and replays its graph on them (lazily, like any op);
/// copies share the loaded graphs.
struct ImportedFunction {
  /// The outputs of the matching trace. Throws std::invalid_argument when no trace matches
  /// (number of inputs, keyword names, dtypes, shapes unless shapeless; the message lists
  /// the traces), or when a shapeless call changes a shape a primitive fixes.
  std::vector<array> operator()(const std::initializer_list<array>& args) const {
    return (*this)(Args(args));
  }
  std::vector<array> operator()(const Args& args) const;
  std::vector<array> operator()(const Kwargs& kwargs) const;
  std::vector<array> operator()(const Args& args, const Kwargs& kwargs) const;

  /// The metadata string given at export ("" when none was).
  const std::string& metadata() const;

 private:
  friend ImportedFunction import_function(const std::string&);
  explicit ImportedFunction(std::shared_ptr<export_detail::FunctionTable> table);
  std::shared_ptr<export_detail::FunctionTable> table_;
};

/// Reads every trace in `path` (a file written by export_function or exporter). Constants
/// are loaded into memory; primitives are rebuilt from their stored parameters on streams of
/// this process (docs/EXPORT.md). Throws std::runtime_error for a missing, truncated or
/// corrupt file, or one of an unknown format version or primitive family.
/// Source: MLX's import_function.
ImportedFunction import_function(const std::string& path);

} // namespace nuvec
