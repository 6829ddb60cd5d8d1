// nuvec: saving and loading arrays (MLX's io.h API). Safetensors
// (https://github.com/huggingface/safetensors, format spec in its README) is read and written
// by src/io/safetensors.cpp.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>

#include "nuvec/array.h"
#include "nuvec/stream.h"

namespace nuvec {

/// Names to arrays, as the safetensors functions take and return them.
using SafetensorsMap = std::unordered_map<std::string, array>;
/// The string-to-string `__metadata__` block of a safetensors file.
using SafetensorsMetadata = std::unordered_map<std::string, std::string>;

/// Writes `a` (evaluating it first) and `metadata` to `file` in the safetensors format: an
/// 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} with
/// the names sorted, then the row-major data of each array. ".safetensors" is appended to
/// `file` when it does not end with it (as MLX does).
/// Dtypes: bool, (u)int8-64, float16, bfloat16, float32, float64 (complex64 has no
/// safetensors code). Throws std::invalid_argument for a complex64 array or an empty name,
/// std::runtime_error when the file cannot be written.
/// Source: MLX save_safetensors.
void save_safetensors(
    std::string file,
    std::unordered_map<std::string, array> a,
    std::unordered_map<std::string, std::string> metadata = {});

/// Reads a safetensors file: its arrays (evaluated, on the host) and its `__metadata__`.
/// Every header field is validated against the file's size before any data is read, so a
/// truncated or malformed file never reads out of bounds.
/// Throws std::runtime_error ("[load_safetensors] ...") when the file cannot be opened, is
/// shorter than its header says, has a header that is not valid JSON or not of the expected
/// form, names an unknown dtype, or has data offsets outside the data block or inconsistent
/// with the shape and dtype.
/// Source: MLX load_safetensors; the safetensors format spec.
std::pair<
    std::unordered_map<std::string, array>,
    std::unordered_map<std::string, std::string>>
load_safetensors(const std::string& file, StreamOrDevice s = {});

} // namespace nuvec

// ---------------------------------------------------------------------------------------
// NumPy .npy files (src/io/npy.cpp; format: NumPy's NEP 1 "A simple file format for NumPy
// arrays") and IDX files, the MNIST format (src/io/idx.cpp; format: LeCun's MNIST page).

namespace nuvec {

/// Writes `a` (evaluating it first) to `file` in NumPy's .npy format (version 1.0, or 2.0
/// when the header needs it): little-endian, C order. ".npy" is appended to `file` when it
/// does not end with it (as MLX does). bfloat16 is written as "<V2" (NumPy has no bfloat16,
/// MLX does the same).
/// Throws std::runtime_error ("[save] ...") when the file cannot be written.
/// Source: MLX save; NumPy's NEP 1.
void save(const std::string& file, array a);

/// Reads a .npy file (versions 1.0-3.0; any byte order; C or Fortran order) into an
/// evaluated array of the stored dtype and shape. Reading is eager (the file is read when
/// load is called); `s` is accepted for MLX's signature.
/// Throws std::runtime_error ("[load] <file>: ...") when the file cannot be opened, lacks the
/// magic string, has an unknown version, a header that is not a well-formed dict with
/// 'descr', 'fortran_order' and 'shape', an unsupported dtype (object, strings, structured),
/// a negative or too large dimension, or a data block shorter or longer than the shape
/// says. Never reads out of bounds.
/// Source: MLX load; NumPy's NEP 1.
array load(const std::string& file, StreamOrDevice s = {});

/// Reads an IDX file (the MNIST format): 2 zero bytes, a type byte (0x08 uint8, 0x09 int8,
/// 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64), the number of dimensions, the
/// dimensions as big-endian uint32, then the big-endian data in row-major order.
/// gzip-compressed files (as Debian's dataset-fashion-mnist ships them) are recognised by
/// their magic bytes and decompressed with zlib, whatever their name.
/// Shapes: the dimensions in the header. Dtypes: uint8, int8, int16, int32, float32,
/// float64, following the type byte.
/// Throws std::runtime_error ("[load_idx] <file>: ...") when the file cannot be opened,
/// is empty, has a bad magic number or type byte, a dimension over 2^31 - 1, a data block
/// shorter or longer than its dimensions say, or a corrupt gzip stream. Never reads out
/// of bounds: data is read in chunks, so a header claiming huge dimensions fails at the
/// end of the real data rather than allocating its claim.
/// Source: http://yann.lecun.com/exdb/mnist/ (file formats section).
array load_idx(const std::string& file);

} // namespace nuvec
