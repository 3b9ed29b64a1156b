# One helper per kind of target, in the style of Abseil's AbseilHelpers.cmake.
#
#   inca_cc_library(NAME wire SRCS a.cc HDRS a.h DEPS inca::util)
#       -> target inca_wire, alias inca::wire
#   inca_cc_test(NAME wire_test SRCS a_test.cc DEPS inca::wire [SERIAL] [OPTIMIZED])
#       -> GoogleTest binary, each TEST registered with CTest (SERIAL: run alone;
#          OPTIMIZED: keeps the build's -O level, where tests' own code builds
#          at -O1 (release) or -O0 (sanitizers))
#   inca_cc_benchmark(NAME reduce_benchmark SRCS b.cc DEPS ...)
#       -> Google Benchmark binary (not a test; run by scripts/bench.sh)
#   inca_cc_fuzzer(NAME cais_parse_fuzz SRCS f.cc DEPS ... CORPUS dir)
#       -> libFuzzer target when INCA_FUZZ=ON (clang), otherwise a corpus
#          replayer; either way a bounded CTest entry runs it
#   inca_cc_binary(NAME inca-demo SRCS main.cc DEPS ...)
#
# Include paths are set per target only: the public tree (include/) is
# exported by inca::headers; src/ (inca::internal_headers) is visible to the
# project's own targets through the libraries they link.

include_guard(GLOBAL)

# The thin parts (tests' and tools' own sources: gtest and CLI11 code, and
# the wiring of a main) compile without optimisation in sanitized builds,
# and tests' at -O1 in release ones: at the build's level they took a fifth
# (release, -O2) and two thirds (sanitizers, -O1) more compile time, while
# the code they exercise is in the libraries, which keep their flags.
# OPTIMIZED tests, whose own code is the load, keep the build's level.
# Tools stay at the build's level in release builds: the linker may keep a
# main's copy of an inline function shared with the packet path (on the
# 2-core VM, inca-switchd's mmsg path lost 9 % with its main at -O1).
if(INCA_SANITIZE)
  set(INCA_THIN_COPTS -O0 -pthread)
  set(INCA_TOOL_COPTS -O0 -pthread)
else()
  set(INCA_THIN_COPTS -O1 -pthread)
  set(INCA_TOOL_COPTS -pthread)
endif()

# The headers the thin parts share, compiled once per build into a
# precompiled header that each test (or tool) target reuses: GoogleTest, the
# standard library and absl's status and strings for tests (a fifth of a
# test file's compile time), CLI11 for tools (about 6 s a file). A reusing
# target has the flags of its header's target: INCA_THIN_COPTS or
# INCA_TOOL_COPTS (-pthread in them because it defines _REENTRANT, which
# the header must agree on) and the warnings; -D macros these headers do
# not read may differ.
# INCA_PCH=OFF compiles every file from its sources.
option(INCA_PCH "Precompile the headers tests and tools share" ON)
set(_inca_std_headers <algorithm> <chrono> <cstdint> <cstring> <functional> <map> <memory>
                      <optional> <string> <vector>)
set(INCA_TEST_PCH_HEADERS <gmock/gmock.h> <gtest/gtest.h> ${_inca_std_headers} <atomic> <cmath>
    <random> <sstream> <thread> <absl/container/flat_hash_map.h> <absl/status/status.h>
    <absl/status/statusor.h> <absl/strings/numbers.h> <absl/strings/str_cat.h>)
set(INCA_TOOL_PCH_HEADERS <CLI/CLI.hpp> ${_inca_std_headers})

# Reuses (creating it on first use) the precompiled header inca_<kind>_pch
# of INCA_<KIND>_PCH_HEADERS, built with the options in the variable named
# `copts`; its include paths come from the targets after `copts`.
function(_inca_reuse_pch target kind copts)
  if(NOT INCA_PCH)
    return()
  endif()
  set(_pch inca_${kind}_pch)
  if(NOT TARGET ${_pch})
    string(TOUPPER ${kind} _kind)
    set(_src ${PROJECT_BINARY_DIR}/${_pch}.cc)
    file(CONFIGURE OUTPUT ${_src} CONTENT "// ${_pch}'s own unit (cmake/IncaHelpers.cmake).\n")
    add_library(${_pch} OBJECT ${_src})
    target_link_libraries(${_pch} PRIVATE ${ARGN})
    target_compile_options(${_pch} PRIVATE ${INCA_WARNING_FLAGS} ${${copts}})
    target_precompile_headers(${_pch} PRIVATE ${INCA_${_kind}_PCH_HEADERS})
  endif()
  target_precompile_headers(${target} REUSE_FROM ${_pch})
endfunction()

function(inca_cc_library)
  cmake_parse_arguments(L "" "NAME" "SRCS;HDRS;DEPS;COPTS" ${ARGN})
  set(_t inca_${L_NAME})
  if(L_SRCS)
    add_library(${_t} STATIC ${L_SRCS} ${L_HDRS})
    target_link_libraries(${_t} PUBLIC inca::internal_headers ${L_DEPS})
    target_compile_options(${_t} PRIVATE ${INCA_WARNING_FLAGS} ${L_COPTS})
  else()
    add_library(${_t} INTERFACE)
    target_link_libraries(${_t} INTERFACE inca::internal_headers ${L_DEPS})
  endif()
  add_library(inca::${L_NAME} ALIAS ${_t})
endfunction()

function(inca_cc_test)
  cmake_parse_arguments(T "SERIAL;OPTIMIZED" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT INCA_BUILD_TESTS)
    return()
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gmock GTest::gtest_main)
  if(T_OPTIMIZED)
    # The test's own code is the load (a simulated link, ranks' data): it
    # keeps the build's optimisation (and so compiles without the shared
    # precompiled header, which is built at the tests' -O level).
    target_compile_options(${T_NAME} PRIVATE ${INCA_WARNING_FLAGS})
  else()
    target_compile_options(${T_NAME} PRIVATE ${INCA_WARNING_FLAGS} ${INCA_THIN_COPTS})
    _inca_reuse_pch(${T_NAME} test INCA_THIN_COPTS GTest::gmock GTest::gtest absl::status absl::strings
                    absl::flat_hash_map)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set(_serial FALSE)
  if(T_SERIAL)
    # Multi-process tests that time themselves against other processes run
    # alone, so a parallel ctest does not starve their ranks of CPU.
    set(_serial TRUE)
  endif()
  # One label per test (gtest_discover_tests cannot pass lists through).
  set(_label unit)
  if(T_LABELS)
    set(_label ${T_LABELS})
  endif()
  gtest_discover_tests(${T_NAME}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS ${_label} RUN_SERIAL ${_serial})
endfunction()

function(inca_cc_benchmark)
  cmake_parse_arguments(B "" "NAME" "SRCS;DEPS" ${ARGN})
  if(NOT INCA_BUILD_BENCHMARKS)
    return()
  endif()
  add_executable(${B_NAME} ${B_SRCS})
  target_link_libraries(${B_NAME} PRIVATE ${B_DEPS} benchmark::benchmark)
  target_compile_options(${B_NAME} PRIVATE ${INCA_WARNING_FLAGS})
  set_target_properties(${B_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
  # A one-iteration smoke run keeps benchmarks compiling and crash-free;
  # the numbers themselves come from scripts/bench.sh, never from tests.
  if(INCA_BUILD_TESTS)
    add_test(NAME ${B_NAME}.smoke
             COMMAND ${B_NAME} --benchmark_min_time=0.001 --benchmark_filter=.
                     --benchmark_format=console)
    set_tests_properties(${B_NAME}.smoke PROPERTIES TIMEOUT 300 LABELS "smoke")
  endif()
endfunction()

function(inca_cc_fuzzer)
  cmake_parse_arguments(F "" "NAME;CORPUS;RUNS" "SRCS;DEPS" ${ARGN})
  if(NOT F_RUNS)
    set(F_RUNS 200000)
  endif()
  add_executable(${F_NAME} ${F_SRCS})
  target_link_libraries(${F_NAME} PRIVATE ${F_DEPS})
  target_compile_options(${F_NAME} PRIVATE ${INCA_WARNING_FLAGS})
  if(INCA_FUZZ)
    target_compile_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
    target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
    # Bounded in both count and time; new inputs go to a scratch dir so the
    # checked-in corpus is only read.
    add_test(NAME ${F_NAME}.fuzz
             COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
                     $<TARGET_FILE:${F_NAME}> -runs=${F_RUNS} -max_total_time=15
                     -timeout=5 -rss_limit_mb=2048 -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/
                     ${CMAKE_CURRENT_BINARY_DIR}/${F_NAME}_scratch ${F_CORPUS})
    file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/${F_NAME}_scratch)
    set_tests_properties(${F_NAME}.fuzz PROPERTIES TIMEOUT 120 LABELS "fuzz")
  else()
    # Without libFuzzer, link a driver that replays the corpus through the
    # same entry point (as Envoy does), so every build exercises it.
    target_link_libraries(${F_NAME} PRIVATE inca::fuzz_replay_main)
    if(INCA_BUILD_TESTS)
      add_test(NAME ${F_NAME}.replay COMMAND ${F_NAME} ${F_CORPUS})
      set_tests_properties(${F_NAME}.replay PROPERTIES TIMEOUT 120 LABELS "fuzz")
    endif()
  endif()
endfunction()

function(inca_cc_binary)
  cmake_parse_arguments(X "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${X_NAME} ${X_SRCS})
  target_link_libraries(${X_NAME} PRIVATE ${X_DEPS})
  target_compile_options(${X_NAME} PRIVATE ${INCA_WARNING_FLAGS} ${INCA_TOOL_COPTS})
  _inca_reuse_pch(${X_NAME} tool INCA_TOOL_COPTS CLI11::CLI11)
  set_target_properties(${X_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  install(TARGETS ${X_NAME} RUNTIME DESTINATION bin)
endfunction()
