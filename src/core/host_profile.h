// nuvec: an opt-in account of where the host's time goes per eval (NUVEC_HOST_PROFILE=1):
// the graph walk, the scheduling loop, the backend's dispatch and, on the stream workers,
// each primitive's eval by name. Printed to stderr at exit. For finding per-node costs of
// small-kernel workloads (a decode step) where the host, not the device, sets the pace.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace nuvec::host_profile {

inline bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("NUVEC_HOST_PROFILE");
    return v && v[0] == '1';
  }();
  return on;
}

struct Table {
  std::mutex mtx;
  std::map<std::string, std::pair<double, long>> rows; // name -> (seconds, count)
  ~Table() {
    if (rows.empty()) return;
    std::fprintf(stderr, "[nuvec host profile] %-28s %10s %9s %9s\n", "what", "ms", "count", "us/each");
    for (auto& [name, r] : rows) {
      std::fprintf(stderr, "[nuvec host profile] %-28s %10.2f %9ld %9.2f\n", name.c_str(), r.first * 1e3, r.second,
                   r.second ? r.first * 1e6 / r.second : 0.0);
    }
  }
};

inline Table& table() {
  static Table t;
  return t;
}

inline void add(const std::string& name, double seconds, long count = 1) {
  auto& t = table();
  std::lock_guard<std::mutex> lk(t.mtx);
  auto& r = t.rows[name];
  r.first += seconds;
  r.second += count;
}

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace nuvec::host_profile
