// Model directories' safetensors files (see include/nuvec/lm/weights.h).
#include "nuvec/lm/weights.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "nuvec/io.h"

namespace nuvec::lm {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("[lm.load_weights] " + what);
}

void read_file_into(const fs::path& file, WeightMap& out) {
  if (!fs::exists(file)) {
    fail("missing file " + file.string());
  }
  SafetensorsLoad loaded;
  try {
    loaded = load_safetensors(file.string());
  } catch (const std::exception& e) {
    fail(file.string() + ": " + e.what());
  }
  for (auto& [name, a] : loaded.first) {
    if (!out.emplace(name, a).second) {
      fail("tensor '" + name + "' appears twice (again in " + file.string() + ")");
    }
  }
}

} // namespace

WeightMap load_weights(const std::string& dir) {
  fs::path root(dir);
  if (!fs::is_directory(root)) {
    fail("not a directory: " + dir);
  }
  WeightMap out;
  fs::path index = root / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream f(index);
    json j = json::parse(f, nullptr, false);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      fail(index.string() + " has no \"weight_map\" object");
    }
    std::set<std::string> shards;
    for (auto& [name, shard] : j["weight_map"].items()) {
      shards.insert(shard.get<std::string>());
    }
    for (auto& shard : shards) {
      read_file_into(root / shard, out);
    }
    for (auto& [name, shard] : j["weight_map"].items()) {
      if (!out.count(name)) {
        fail("tensor '" + name + "' is listed in " + index.filename().string() + " but missing from " +
             shard.get<std::string>());
      }
    }
    return out;
  }
  if (fs::exists(root / "model.safetensors")) {
    read_file_into(root / "model.safetensors", out);
    return out;
  }
  std::vector<fs::path> files;
  for (auto& entry : fs::directory_iterator(root)) {
    auto name = entry.path().filename().string();
    if (entry.path().extension() == ".safetensors" && name.rfind("reference", 0) != 0 &&
        name.rfind("optimizer", 0) != 0) {
      files.push_back(entry.path());
    }
  }
  if (files.empty()) {
    fail("no model.safetensors, model.safetensors.index.json or *.safetensors in " + dir);
  }
  std::sort(files.begin(), files.end());
  for (auto& file : files) {
    read_file_into(file, out);
  }
  return out;
}

void save_weights(const std::string& dir, const WeightMap& weights, size_t max_shard_bytes) {
  fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (!fs::is_directory(root)) {
    throw std::runtime_error("[lm.save_weights] cannot create directory " + dir);
  }
  std::vector<std::unordered_map<std::string, array>> shards(1);
  size_t bytes = 0, total = 0;
  for (auto& [name, a] : weights) {
    if (bytes > 0 && bytes + a.nbytes() > max_shard_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().emplace(name, a);
    bytes += a.nbytes();
    total += a.nbytes();
  }
  std::unordered_map<std::string, std::string> metadata = {{"format", "pt"}};
  if (shards.size() == 1) {
    save_safetensors((root / "model.safetensors").string(), shards[0], metadata);
    fs::remove(root / "model.safetensors.index.json", ec);
    return;
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", json::object()}};
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    save_safetensors((root / name).string(), shards[i], metadata);
    for (auto& [tensor, a] : shards[i]) {
      index["weight_map"][tensor] = name;
    }
  }
  std::ofstream f(root / "model.safetensors.index.json");
  f << index.dump(2);
  if (!f) {
    throw std::runtime_error("[lm.save_weights] cannot write " + (root / "model.safetensors.index.json").string());
  }
}

} // namespace nuvec::lm
