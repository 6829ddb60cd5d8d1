// nuvec io: a minimal ZIP archive writer and reader (the container of NumPy's .npz files).
// Format: PKWARE's APPNOTE.TXT (local headers, central directory, end of central directory);
// members stored (method 0) or raw-deflated through zlib (method 8); no zip64, no encryption.
#pragma once

#include <string>
#include <vector>

namespace nuvec::io_detail {

/// One archive member: its name (as stored, '/'-separated) and its uncompressed bytes.
struct ZipMember {
  std::string name;
  std::vector<char> data;
};

/// The bytes of a ZIP archive holding `members` in the given order, each stored or (when
/// `compressed`) deflated, with CRC-32s, a fixed 1980-01-01 timestamp (so equal inputs give
/// equal files) and the UTF-8 name flag for non-ASCII names.
/// Throws std::runtime_error "[op] <file>: ..." when the archive would need zip64 (a member
/// or the archive of 4 GiB or more, 65535 members or more) or zlib fails.
std::vector<char> zip_build(const std::vector<ZipMember>& members, bool compressed,
                            const char* op, const std::string& file);

/// The members of the ZIP archive `bytes`, in central-directory order, decompressed and
/// CRC-checked. Everything comes from the central directory (local headers are checked
/// against it and their extra fields skipped, so files whose local headers carry zip64
/// extras, as NumPy's savez writes them, are read).
/// Throws std::runtime_error "[op] <file>: ..." for a missing end-of-central-directory
/// record, bad signatures, a truncated central directory, offsets or sizes past the end of
/// the archive, zip64 or multi-disk archives, encrypted members, methods other than stored
/// and deflate, corrupt deflate data, size or CRC-32 mismatches and duplicate names. Every
/// read is bounds-checked first.
std::vector<ZipMember> zip_read(const std::vector<char>& bytes, const char* op,
                                const std::string& file);

} // namespace nuvec::io_detail
