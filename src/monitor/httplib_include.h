// The one place inca includes cpp-httplib (Debian's libcpp-httplib-dev).
//
// Debian ships it as a compiled library whose class layouts depend on the
// CPPHTTPLIB_*_SUPPORT macros it was built with; code that includes the
// header without them would disagree with libcpp-httplib.so about object
// sizes. The macros come from pkg-config (target PkgConfig::HTTPLIB); the
// check below turns a missing one into a compile error. The library's own
// warnings are silenced here so -Werror builds stay clean.
#pragma once

#if !defined(CPPHTTPLIB_OPENSSL_SUPPORT) || !defined(CPPHTTPLIB_ZLIB_SUPPORT) || \
    !defined(CPPHTTPLIB_BROTLI_SUPPORT)
#error "link PkgConfig::HTTPLIB: its compile definitions must match libcpp-httplib.so"
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
#pragma GCC diagnostic ignored "-Woverloaded-virtual"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <httplib.h>  // NOLINT(build/include_order)
#pragma GCC diagnostic pop
