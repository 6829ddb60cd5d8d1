// nuvec io: NumPy .npz archives (numpy.savez / savez_compressed / load): a ZIP archive
// (src/io/zip.cpp) whose members are "<name>.npy" files in NEP 1's format (src/io/npy.cpp).
#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/io_common.h"
#include "io/stream.h"
#include "io/zip.h"
#include "nuvec/io.h"

namespace nuvec {

namespace {

constexpr const char* kNpy = ".npy";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

void savez(const std::string& file_in, const std::unordered_map<std::string, array>& arrays,
           bool compressed) {
  std::string file = file_in;
  if (!ends_with(file, ".npz")) file += ".npz";
  // Sorted names make the archive deterministic.
  std::vector<std::string> names;
  names.reserve(arrays.size());
  for (const auto& [name, a] : arrays) names.push_back(name);
  std::sort(names.begin(), names.end());

  std::vector<io_detail::ZipMember> members;
  members.reserve(names.size());
  for (const auto& name : names) {
    members.push_back({name + kNpy, io_detail::npy_encode(arrays.at(name))});
  }
  const std::vector<char> zip = io_detail::zip_build(members, compressed, "savez", file);
  io_detail::write_parts(*io_detail::open_file_writer(file, "savez"), "savez", {{zip.data(), zip.size()}});
}

std::unordered_map<std::string, array> load_npz(const std::string& path, StreamOrDevice /*s*/) {
  const io_detail::SizedReader in(io_detail::open_file_reader(path, "load_npz"), "load_npz");
  const std::string& file = in.where();
  std::vector<io_detail::ZipMember> members = io_detail::zip_read(in.read_all(), "load_npz", file);
  std::unordered_map<std::string, array> out;
  for (auto& m : members) {
    if (!ends_with(m.name, kNpy)) {
      io_detail::throw_file_error("load_npz", file, "member '", m.name, "' is not a .npy file "
                                  "(an .npz holds only '<name>.npy' members).");
    }
    std::string key = m.name.substr(0, m.name.size() - 4);
    array a = io_detail::npy_read(io_detail::SizedReader(
        std::make_shared<io_detail::MemoryReader>(m.data.data(), m.data.size(),
                                                  file + " (member '" + m.name + "')"),
        "load_npz"));
    // Drop the member's bytes now: the array holds its own copy.
    std::vector<char>().swap(m.data);
    out.insert_or_assign(std::move(key), std::move(a));
  }
  return out;
}

} // namespace nuvec
