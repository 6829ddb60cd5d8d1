// nuvec: whether this translation unit is built with AddressSanitizer (GCC's macro, or
// Clang's feature test), for the allocator's exact-size blocks (allocator.cpp) and the tests
// that depend on its cache.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define NUVEC_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NUVEC_ADDRESS_SANITIZER 1
#endif
#endif
