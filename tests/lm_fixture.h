// The tiny checkpoints of tests/data/lm, written by transformers (scripts/lm_make_fixtures.py).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace nuvec::testing {

/// tests/data/lm/<arch> (NUVEC_LM_TEST_DATA replaces tests/data/lm for a binary run elsewhere).
inline std::string lm_fixture(const std::string& arch) {
  namespace fs = std::filesystem;
  const char* root = std::getenv("NUVEC_LM_TEST_DATA");
  return ((root ? fs::path(root) : fs::path(__FILE__).parent_path() / "data" / "lm") / arch).string();
}

} // namespace nuvec::testing
