// nuvec io: the ZIP writer and reader behind .npz (PKWARE APPNOTE.TXT sections 4.3.7 local
// file header, 4.3.12 central directory header, 4.3.16 end of central directory record).
// Reading trusts only the central directory and checks every offset before touching bytes.
#include "io/zip.h"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "io/io_common.h"

namespace nuvec::io_detail {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kLocalFixed = 30;
constexpr size_t kCentralFixed = 46;
constexpr size_t kEndFixed = 22;
constexpr uint16_t kStored = 0;
constexpr uint16_t kDeflated = 8;
constexpr uint16_t kVersion = 20; // 2.0: deflate; host 0 (MS-DOS attributes)
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1; // 1980-01-01, the earliest DOS date
constexpr uint16_t kFlagEncrypted = 1 << 0;
constexpr uint16_t kFlagUtf8 = 1 << 11;
// zlib's deflate never expands input by more than this factor in reverse (its documented
// maximum compression ratio is 1032:1), so a larger claimed size is a corrupt header.
constexpr uint64_t kMaxInflateRatio = 1032;

uint32_t crc_of(const char* p, size_t n) {
  return static_cast<uint32_t>(crc32_z(0L, reinterpret_cast<const Bytef*>(p), n));
}

std::vector<char> deflate_raw(const std::vector<char>& in, const char* op, const std::string& file,
                              const std::string& name) {
  z_stream z{};
  // windowBits -15: a raw deflate stream, as ZIP stores it (no zlib header or trailer).
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw_file_error(op, file, "zlib deflateInit2 failed.");
  }
  std::vector<char> out(deflateBound(&z, static_cast<uLong>(in.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const size_t produced = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw_file_error(op, file, "zlib deflate failed for '", name, "' (", rc, ").");
  out.resize(produced);
  return out;
}

// Appends the fields a local header and a central directory entry share, from "version
// needed" through the name and extra lengths.
void append_common(std::vector<char>& b, uint16_t flags, uint16_t method, uint32_t crc,
                   uint32_t csize, uint32_t usize, uint16_t name_len) {
  append_le<uint16_t>(b, kVersion);
  append_le<uint16_t>(b, flags);
  append_le<uint16_t>(b, method);
  append_le<uint16_t>(b, 0); // time 00:00:00
  append_le<uint16_t>(b, kDosDate);
  append_le<uint32_t>(b, crc);
  append_le<uint32_t>(b, csize);
  append_le<uint32_t>(b, usize);
  append_le<uint16_t>(b, name_len);
  append_le<uint16_t>(b, 0); // extra field length
}

std::vector<char> inflate_raw(const char* in, size_t csize, size_t usize, const char* op,
                              const std::string& file, const std::string& name) {
  // One spare byte reveals a stream that inflates to more than the header says.
  std::vector<char> out(usize + 1);
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) throw_file_error(op, file, "zlib inflateInit2 failed.");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
  z.avail_in = static_cast<uInt>(csize);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  const size_t produced = z.total_out;
  const size_t unused = z.avail_in;
  const std::string msg = z.msg != nullptr ? z.msg : "";
  inflateEnd(&z);
  if (produced > usize) {
    throw_file_error(op, file, "member '", name, "' inflates to more than its declared ", usize,
                     " bytes.");
  }
  if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR) {
    throw_file_error(op, file, "member '", name, "' has corrupt deflate data (zlib: ",
                     msg.empty() ? "error " + std::to_string(rc) : msg, ").");
  }
  if (rc != Z_STREAM_END) {
    throw_file_error(op, file, "member '", name, "' has truncated deflate data (", produced,
                     " of ", usize, " bytes inflated).");
  }
  if (produced != usize || unused != 0) {
    throw_file_error(op, file, "member '", name, "' inflates to ", produced, " bytes from ",
                     csize - unused, " of its ", csize, " compressed bytes; the header says ",
                     usize, " from ", csize, ".");
  }
  out.resize(usize);
  return out;
}

} // namespace

std::vector<char> zip_build(const std::vector<ZipMember>& members, bool compressed,
                            const char* op, const std::string& file) {
  constexpr uint64_t kMax32 = std::numeric_limits<uint32_t>::max();
  if (members.size() >= 0xFFFF) {
    throw_file_error(op, file, members.size(), " members need zip64, which nuvec does not write "
                     "(at most 65534).");
  }
  std::vector<char> out;
  std::vector<char> central;
  for (const auto& m : members) {
    if (m.name.size() > 0xFFFF) throw_file_error(op, file, "a member name is over 65535 bytes.");
    if (m.data.size() >= kMax32) {
      throw_file_error(op, file, "member '", m.name, "' is ", m.data.size(),
                       " bytes; 4 GiB or more needs zip64, which nuvec does not write.");
    }
    const uint32_t crc = crc_of(m.data.data(), m.data.size());
    std::vector<char> packed;
    if (compressed) packed = deflate_raw(m.data, op, file, m.name);
    const std::vector<char>& body = compressed ? packed : m.data;
    const uint64_t offset = out.size();
    if (offset + kLocalFixed + m.name.size() + body.size() >= kMax32) {
      throw_file_error(op, file, "the archive reaches 4 GiB; that needs zip64, which nuvec does "
                       "not write.");
    }
    bool ascii = true;
    for (unsigned char c : m.name) ascii = ascii && c < 0x80;
    const uint16_t flags = ascii ? 0 : kFlagUtf8;
    const uint16_t method = compressed ? kDeflated : kStored;
    const auto name_len = static_cast<uint16_t>(m.name.size());

    append_le<uint32_t>(out, kLocalSig);
    append_common(out, flags, method, crc, static_cast<uint32_t>(body.size()),
                  static_cast<uint32_t>(m.data.size()), name_len);
    out.insert(out.end(), m.name.begin(), m.name.end());
    out.insert(out.end(), body.begin(), body.end());

    append_le<uint32_t>(central, kCentralSig);
    append_le<uint16_t>(central, kVersion); // version made by
    append_common(central, flags, method, crc, static_cast<uint32_t>(body.size()),
                  static_cast<uint32_t>(m.data.size()), name_len);
    append_le<uint16_t>(central, 0); // comment length
    append_le<uint16_t>(central, 0); // disk number start
    append_le<uint16_t>(central, 0); // internal attributes
    append_le<uint32_t>(central, 0); // external attributes
    append_le<uint32_t>(central, static_cast<uint32_t>(offset));
    central.insert(central.end(), m.name.begin(), m.name.end());
  }
  const uint64_t cd_offset = out.size();
  if (cd_offset + central.size() + kEndFixed >= kMax32) {
    throw_file_error(op, file, "the archive reaches 4 GiB; that needs zip64, which nuvec does "
                     "not write.");
  }
  out.insert(out.end(), central.begin(), central.end());
  append_le<uint32_t>(out, kEndSig);
  append_le<uint16_t>(out, 0); // this disk
  append_le<uint16_t>(out, 0); // disk with the central directory
  append_le<uint16_t>(out, static_cast<uint16_t>(members.size()));
  append_le<uint16_t>(out, static_cast<uint16_t>(members.size()));
  append_le<uint32_t>(out, static_cast<uint32_t>(central.size()));
  append_le<uint32_t>(out, static_cast<uint32_t>(cd_offset));
  append_le<uint16_t>(out, 0); // comment length
  return out;
}

std::vector<ZipMember> zip_read(const std::vector<char>& bytes, const char* op,
                                const std::string& file) {
  const char* b = bytes.data();
  const size_t size = bytes.size();
  if (size < kEndFixed) {
    throw_file_error(op, file, "not a ZIP archive: ", size, " bytes is shorter than the ",
                     kEndFixed, "-byte end-of-central-directory record.");
  }
  // The end record is the last thing in the file, followed only by its comment (< 64 KiB);
  // the last signature whose comment fits is taken.
  size_t end = std::numeric_limits<size_t>::max();
  const size_t lowest = size - kEndFixed > 0xFFFF ? size - kEndFixed - 0xFFFF : 0;
  for (size_t p = size - kEndFixed + 1; p-- > lowest;) {
    if (read_le<uint32_t>(b + p) == kEndSig &&
        p + kEndFixed + read_le<uint16_t>(b + p + 20) <= size) {
      end = p;
      break;
    }
  }
  if (end == std::numeric_limits<size_t>::max()) {
    throw_file_error(op, file, "not a ZIP archive, or a truncated one: no end-of-central-directory "
                     "record (signature PK\\5\\6) in the last ", size - lowest, " bytes.");
  }
  const uint16_t disk = read_le<uint16_t>(b + end + 4);
  const uint16_t cd_disk = read_le<uint16_t>(b + end + 6);
  const uint16_t on_disk = read_le<uint16_t>(b + end + 8);
  const uint16_t count = read_le<uint16_t>(b + end + 10);
  const uint32_t cd_size = read_le<uint32_t>(b + end + 12);
  const uint32_t cd_offset = read_le<uint32_t>(b + end + 16);
  if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF ||
      (end >= 20 && read_le<uint32_t>(b + end - 20) == kZip64LocatorSig)) {
    throw_file_error(op, file, "zip64 archives are not supported.");
  }
  if (disk != 0 || cd_disk != 0 || on_disk != count) {
    throw_file_error(op, file, "multi-disk (split) ZIP archives are not supported.");
  }
  if (static_cast<uint64_t>(cd_offset) + cd_size > end) {
    throw_file_error(op, file, "the central directory (", cd_size, " bytes at offset ", cd_offset,
                     ") runs past the end record at offset ", end, " (truncated archive?).");
  }

  std::vector<ZipMember> members;
  std::unordered_set<std::string> seen;
  const size_t cd_end = size_t(cd_offset) + cd_size;
  size_t p = cd_offset;
  for (uint16_t i = 0; i < count; ++i) {
    if (cd_end - p < kCentralFixed) {
      throw_file_error(op, file, "truncated central directory: entry ", i, " of ", count,
                       " does not fit in its ", cd_size, " bytes.");
    }
    if (read_le<uint32_t>(b + p) != kCentralSig) {
      throw_file_error(op, file, "bad central directory signature for entry ", i, " at offset ",
                       p, ".");
    }
    const uint16_t flags = read_le<uint16_t>(b + p + 8);
    const uint16_t method = read_le<uint16_t>(b + p + 10);
    const uint32_t crc = read_le<uint32_t>(b + p + 16);
    const uint32_t csize = read_le<uint32_t>(b + p + 20);
    const uint32_t usize = read_le<uint32_t>(b + p + 24);
    const uint16_t name_len = read_le<uint16_t>(b + p + 28);
    const uint16_t extra_len = read_le<uint16_t>(b + p + 30);
    const uint16_t comment_len = read_le<uint16_t>(b + p + 32);
    const uint16_t start_disk = read_le<uint16_t>(b + p + 34);
    const uint32_t local = read_le<uint32_t>(b + p + 42);
    const size_t entry_len = kCentralFixed + name_len + extra_len + comment_len;
    if (cd_end - p < entry_len) {
      throw_file_error(op, file, "truncated central directory: the name, extra field and comment "
                       "of entry ", i, " run past its end.");
    }
    std::string name(b + p + kCentralFixed, name_len);
    p += entry_len;

    if (csize == 0xFFFFFFFF || usize == 0xFFFFFFFF || local == 0xFFFFFFFF) {
      throw_file_error(op, file, "member '", name, "' needs zip64, which is not supported.");
    }
    if (start_disk != 0) throw_file_error(op, file, "member '", name, "' is on another disk.");
    if (flags & kFlagEncrypted) {
      throw_file_error(op, file, "member '", name, "' is encrypted, which is not supported.");
    }
    if (method != kStored && method != kDeflated) {
      throw_file_error(op, file, "member '", name, "' uses compression method ", method,
                       " (only 0, stored, and 8, deflate, are supported).");
    }
    if (!seen.insert(name).second) throw_file_error(op, file, "duplicate member name '", name, "'.");

    // The local header: its own name and extra lengths locate the data.
    if (local > cd_offset || cd_offset - local < kLocalFixed) {
      throw_file_error(op, file, "member '", name, "' has a local header offset ", local,
                       " outside the member area (before offset ", cd_offset, ").");
    }
    if (read_le<uint32_t>(b + local) != kLocalSig) {
      throw_file_error(op, file, "bad local header signature for member '", name, "' at offset ",
                       local, ".");
    }
    const uint16_t local_name_len = read_le<uint16_t>(b + local + 26);
    const uint16_t local_extra_len = read_le<uint16_t>(b + local + 28);
    const uint64_t data = uint64_t(local) + kLocalFixed + local_name_len + local_extra_len;
    if (data > cd_offset || csize > cd_offset - data) {
      throw_file_error(op, file, "member '", name, "' (", csize, " bytes at offset ", data,
                       ") runs past the member area, which ends at offset ", cd_offset,
                       " (truncated archive?).");
    }
    if (local_name_len != name_len || std::memcmp(b + local + kLocalFixed, name.data(), name_len) != 0) {
      throw_file_error(op, file, "member '", name, "' has a different name in its local header.");
    }
    const char* body = b + data;
    std::vector<char> out;
    if (method == kStored) {
      if (csize != usize) {
        throw_file_error(op, file, "stored member '", name, "' has compressed size ", csize,
                         " but uncompressed size ", usize, ".");
      }
      out.assign(body, body + csize);
    } else {
      if (usize > uint64_t(csize) * kMaxInflateRatio + 64) {
        throw_file_error(op, file, "member '", name, "' claims ", usize, " bytes from ", csize,
                         " compressed bytes, more than deflate can produce.");
      }
      out = inflate_raw(body, csize, usize, op, file, name);
    }
    const uint32_t actual = crc_of(out.data(), out.size());
    if (actual != crc) {
      throw_file_error(op, file, "CRC-32 mismatch in member '", name, "' (stored ", crc,
                       ", computed ", actual, ").");
    }
    members.push_back({std::move(name), std::move(out)});
  }
  return members;
}

} // namespace nuvec::io_detail
