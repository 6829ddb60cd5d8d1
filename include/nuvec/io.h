// nuvec: saving and loading arrays (MLX's io.h API). Every format is read from an io::Reader
// and written to an io::Writer (nuvec/io/load.h, MLX's mlx/io/load.h); the file-name overloads
// open a file stream and delegate, so each format has one reader and one writer (src/io/).
// Safetensors (https://github.com/huggingface/safetensors, format spec in its README) is read
// and written by src/io/safetensors.cpp, .npy by src/io/npy.cpp.
//
// Reading is eager: load and load_safetensors read the data when called and return evaluated
// arrays (MLX records lazy Load nodes instead); `s` is accepted for MLX's signatures.
// Where nuvec differs from MLX: empty arrays can be saved (MLX throws std::invalid_argument),
// float64 is written to safetensors as "F64" and to GGUF as F64, int64 and bfloat16 tensors
// to GGUF (MLX refuses these three), and truncated or corrupt files always throw
// std::runtime_error before any read past the end.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "nuvec/array.h"
#include "nuvec/io/load.h"
#include "nuvec/stream.h"

namespace nuvec {

/// Names to arrays, as the safetensors functions take and return them.
using SafetensorsMap = std::unordered_map<std::string, array>;
/// The string-to-string `__metadata__` block of a safetensors file.
using SafetensorsMetadata = std::unordered_map<std::string, std::string>;
/// What load_safetensors returns: the arrays by name, and the `__metadata__` block (MLX's
/// SafetensorsLoad).
using SafetensorsLoad = std::pair<
    std::unordered_map<std::string, array>,
    std::unordered_map<std::string, std::string>>;

/// Writes `a` (evaluating it first) and `metadata` to `out_stream` in the safetensors format:
/// an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}
/// with the names sorted (and `__metadata__` when `metadata` is not empty), padded with
/// spaces to a multiple of 8 bytes, then the row-major data of each array.
/// Dtypes: every dtype, by the codes MLX writes: BOOL, U8, U16, U32, U64, I8, I16, I32, I64,
/// F16, BF16, F32, C64 (complex64, not yet in the spec), and F64 for float64 (a nuvec
/// addition; MLX refuses float64).
/// Throws std::invalid_argument for an empty name, the name "__metadata__" or a null writer;
/// std::runtime_error ("[save_safetensors] <label>: ...") when the writer is not open or not
/// good before writing, throws while writing, or reports good() false after a write.
/// Source: MLX save_safetensors (mlx/io/safetensors.cpp); the safetensors format spec.
void save_safetensors(
    std::shared_ptr<io::Writer> out_stream,
    std::unordered_map<std::string, array> a,
    std::unordered_map<std::string, std::string> metadata = {});

/// Writes `a` and `metadata` to the file `file` as the stream overload does, ".safetensors"
/// appended to `file` when it does not end with it (as MLX does). The arguments are checked
/// and the arrays evaluated before the file is opened.
/// Throws as the stream overload does; std::runtime_error ("... cannot open the file for
/// writing (<reason>)") when the file cannot be created.
/// Source: MLX save_safetensors.
void save_safetensors(
    std::string file,
    std::unordered_map<std::string, array> a,
    std::unordered_map<std::string, std::string> metadata = {});

/// Reads a safetensors stream (the whole of `in_stream`, from offset 0): its arrays
/// (evaluated, on the host, each read straight into its buffer) and its `__metadata__`
/// (a null `__metadata__`, as MLX writes when there is none, reads as empty). Every header
/// field is validated against the stream's size before any data is read, so a truncated or
/// malformed file never reads out of bounds.
/// Dtypes: those save_safetensors writes (C64 as complex64, F64 as float64).
/// Throws std::invalid_argument for a null reader; std::runtime_error ("[load_safetensors]
/// ...") when the reader is not open or not good, its size cannot be found, a read throws or
/// leaves it not good, the stream is shorter than its header says, the header is not valid
/// JSON or not of the expected form, names an unknown dtype, or has data offsets outside
/// the data block or inconsistent with the shape and dtype.
/// Source: MLX load_safetensors; the safetensors format spec.
SafetensorsLoad load_safetensors(std::shared_ptr<io::Reader> in_stream, StreamOrDevice s = {});

/// Reads the safetensors file `file` as the stream overload does.
/// Throws as the stream overload does; std::runtime_error ("[load_safetensors] file <file>:
/// cannot open the file (<reason>)") when it cannot be opened.
/// Source: MLX load_safetensors.
SafetensorsLoad load_safetensors(const std::string& file, StreamOrDevice s = {});

} // namespace nuvec

// ---------------------------------------------------------------------------------------
// NumPy .npy files (src/io/npy.cpp; format: NumPy's NEP 1 "A simple file format for NumPy
// arrays") and IDX files, the MNIST format (src/io/idx.cpp; format: LeCun's MNIST page).

namespace nuvec {

/// Writes `a` (evaluating it first) to `out_stream` in NumPy's .npy format (version 1.0, or
/// 2.0 when the header needs it): little-endian, C order, the preamble padded to a multiple
/// of 64 bytes. bfloat16 is written as "<V2" (NumPy has no bfloat16; MLX does the same).
/// Empty arrays are written too (MLX refuses them).
/// Throws std::invalid_argument for a null writer; std::runtime_error ("[save] <label>: ...")
/// when the writer is not open or not good before writing, throws while writing, or reports
/// good() false after a write.
/// Source: MLX save (mlx/io/load.cpp); NumPy's NEP 1.
void save(std::shared_ptr<io::Writer> out_stream, array a);

/// Writes `a` to the file `file` as the stream overload does, ".npy" appended to `file` when
/// it does not end with it (as MLX does).
/// Throws as the stream overload does; std::runtime_error ("[save] file <file>: cannot open
/// the file for writing (<reason>)") when the file cannot be created.
/// Source: MLX save.
void save(std::string file, array a);

/// Reads a .npy stream (the whole of `in_stream`, from offset 0; versions 1.0-3.0; any byte
/// order; C or Fortran order) into an evaluated array of the stored dtype and shape, the data
/// read straight into the array's buffer. Reading is eager; `s` is accepted for MLX's
/// signature.
/// Throws std::invalid_argument for a null reader; std::runtime_error ("[load] <label>: ...")
/// when the reader is not open or not good, a read throws or leaves it not good, or the data
/// lacks the magic string, has an unknown version, a header that is not a well-formed dict
/// with 'descr', 'fortran_order' and 'shape', an unsupported dtype (object, strings,
/// structured), a negative or too large dimension, or a data block shorter or longer than
/// the shape says. Never reads out of bounds.
/// Source: MLX load; NumPy's NEP 1.
array load(std::shared_ptr<io::Reader> in_stream, StreamOrDevice s = {});

/// Reads the .npy file `file` as the stream overload does.
/// Throws as the stream overload does; std::runtime_error ("[load] file <file>: cannot open
/// the file (<reason>)") when it cannot be opened.
/// Source: MLX load.
array load(std::string file, StreamOrDevice s = {});

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
/// (MLX writes only float32, float16, int8, int16 and int32 tensors; nuvec adds the others.)
/// Throws, with MLX's exception types: std::runtime_error ("[save_gguf] ...") for a tensor of
/// another dtype, a metadata array of 2 or more dimensions or of no elements, or an empty
/// (std::monostate) value; std::invalid_argument for a metadata array of another dtype, an
/// empty or over-long name or key, or a bad general.alignment; std::runtime_error when the
/// file cannot be written. Everything is checked before the file is opened.
/// Source: MLX save_gguf; the GGUF specification (ggml docs/gguf.md).
void save_gguf(
    std::string file,
    std::unordered_map<std::string, array> array_map,
    std::unordered_map<std::string, GGUFMetaData> meta_data = {});

} // namespace nuvec
