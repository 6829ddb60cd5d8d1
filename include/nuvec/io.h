// nuvec: saving and loading arrays (MLX's io.h API). Safetensors
// (https://github.com/huggingface/safetensors, format spec in its README) is read and written
// by src/io/safetensors.cpp.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

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

// ---------------------------------------------------------------------------------------
// NumPy .npz archives (src/io/npz.cpp over the ZIP reader and writer in src/io/zip.cpp;
// formats: NumPy's numpy.savez documentation and NEP 1, PKWARE's APPNOTE.TXT). MLX's C++ API
// has no .npz functions (its Python `savez`/`load` do this, and its C++ `load` reads only
// .npy), so these are nuvec additions and `load` does not dispatch on ".npz".

namespace nuvec {

/// Writes `arrays` (evaluating them) to `file` as NumPy's savez does: a ZIP archive with one
/// member "<name>.npy" per array (in the .npy format `save` writes), stored, or deflated
/// when `compressed` (numpy.savez_compressed). ".npz" is appended to `file` when it does not
/// end with it. Members are sorted by name and carry a fixed timestamp, so equal inputs give
/// equal files; NumPy's numpy.load reads them.
/// Dtypes: every nuvec dtype (bfloat16 as "<V2", as `save` writes it).
/// Throws std::runtime_error ("[savez] <file>: ...") when the file cannot be written or the
/// archive would need zip64 (a member or the archive of 4 GiB or more, 65535 arrays or more).
/// Source: numpy.savez / numpy.savez_compressed; PKWARE APPNOTE.TXT.
void savez(
    const std::string& file,
    const std::unordered_map<std::string, array>& arrays,
    bool compressed = false);

/// Reads a .npz archive (from `savez` or NumPy's savez/savez_compressed): each "<name>.npy"
/// member becomes the evaluated array `name`, as numpy.load's NpzFile keys them. Reading is
/// eager; `s` is accepted for symmetry with `load`.
/// Dtypes: those `load` reads.
/// Throws std::runtime_error ("[load_npz] <file>: ...") when the file cannot be opened, is not
/// a ZIP archive, has bad signatures, a truncated central directory, members or offsets past
/// the end of the archive, zip64 or multi-disk structures, encrypted members, compression
/// other than stored or deflate, corrupt deflate data, a size or CRC-32 mismatch, duplicate
/// or non-.npy members, or a member that is not a valid .npy file (the message then names the
/// member too). Never reads out of bounds.
/// Source: numpy.load (NpzFile); PKWARE APPNOTE.TXT; NEP 1.
std::unordered_map<std::string, array> load_npz(const std::string& file, StreamOrDevice s = {});

} // namespace nuvec

// ---------------------------------------------------------------------------------------
// GGUF files (src/io/gguf.cpp; format: the GGUF specification, ggml's docs/gguf.md, version
// 3; read without any GGUF library).

namespace nuvec {

/// One GGUF metadata value: a number or bool (a 0-d array), a numeric or bool array (a 1-d
/// array), a string, or an array of strings. std::monostate is "no value" and is not saved.
using GGUFMetaData = std::variant<std::monostate, array, std::string, std::vector<std::string>>;
/// What load_gguf returns: the tensors by name, and the metadata by key.
using GGUFLoad = std::pair<
    std::unordered_map<std::string, array>,
    std::unordered_map<std::string, GGUFMetaData>>;

/// Reads a GGUF file (versions 2 and 3, little-endian): every tensor as an evaluated array
/// and every metadata key-value pair. Tensor shapes are the GGUF dimensions reversed (GGUF
/// lists the fastest-varying dimension first). Metadata numbers become 0-d arrays of the
/// matching dtype (uint8-64, int8-64, float32, float64, bool), numeric arrays 1-d arrays,
/// strings std::string, string arrays std::vector<std::string> (MLX turns float64 metadata
/// into float32; nuvec keeps float64). Reading is eager; `s` is accepted for MLX's signature.
/// Dtypes: tensors of ggml types F32, F16, BF16, F64, I8, I16, I32, I64.
/// Throws std::runtime_error ("[load_gguf] <file>: ...") when the file cannot be opened, lacks
/// the "GGUF" magic, has version 1, another unknown version or big-endian byte order, a
/// count, string, array or tensor that runs past the end of the file, an unknown value
/// type, nested arrays, a bool byte other than 0 or 1, duplicate keys or tensor names, a
/// general.alignment that is not a power-of-two uint32, a dimension over 2^31 - 1 or a size
/// that overflows, a tensor offset that is unaligned or outside the data section, or a
/// quantized or unknown ggml type ("not supported yet"). Never reads out of bounds.
/// Source: MLX load_gguf; the GGUF specification (ggml docs/gguf.md).
GGUFLoad load_gguf(const std::string& file, StreamOrDevice s = {});

/// Writes `array_map` (evaluated, row-major) and `meta_data` to `file` as a GGUF version 3
/// file: header, metadata sorted by key, tensor infos sorted by name (dimensions reversed
/// into GGUF's order), zero padding to the alignment, then each tensor's data at an aligned
/// offset. The alignment is 32 unless `meta_data` sets "general.alignment" (a 0-d uint32
/// array holding a power of two). ".gguf" is appended to `file` when it does not end with it.
/// Metadata: std::string as STRING, std::vector<std::string> as an ARRAY of STRING, a 0-d
/// array as the scalar type of its dtype, a 1-d array as an ARRAY of it.
/// Dtypes: tensors float32, float16, bfloat16, float64, int8, int16, int32, int64 (ggml's F32,
/// F16, BF16, F64, I8, I16, I32, I64); metadata arrays bool, (u)int8-64, float32, float64.
/// Throws std::invalid_argument ("[save_gguf] ...") for a tensor of another dtype, an empty
/// or over-long name or key, a metadata array of another dtype or of 2 or more dimensions,
/// an empty (std::monostate) value or a bad general.alignment; std::runtime_error when the
/// file cannot be written.
/// Source: MLX save_gguf; the GGUF specification (ggml docs/gguf.md).
void save_gguf(
    std::string file,
    std::unordered_map<std::string, array> array_map,
    std::unordered_map<std::string, GGUFMetaData> meta_data = {});

} // namespace nuvec
