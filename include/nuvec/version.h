// nuvec: the library version (MLX's version.h). The numbers are nuvec's own; CMake's
// project(VERSION) must agree (checked by tests/utils_test.cpp).
#pragma once

#include <string>

#define NUVEC_VERSION_MAJOR 0
#define NUVEC_VERSION_MINOR 1
#define NUVEC_VERSION_PATCH 0

namespace nuvec {

/// The version as "major.minor.patch".
std::string version();

} // namespace nuvec
