# Every third-party dependency is found here, once. scripts/setup.sh installs them on Debian 12.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(hwy REQUIRED)
# The kernels keep tiles of accumulators in arrays of vectors, which SVE's sizeless types forbid:
# on AArch64 they compile for NEON (every AArch64 core) and not for Highway's SVE targets.
# scripts/cross_check_arm64.sh passes the same definition.
add_compile_definitions("HWY_DISABLED_TARGETS=(HWY_SVE|HWY_SVE2|HWY_SVE_256|HWY_SVE2_128)")
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(RLT_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# Debian ships cpp-httplib compiled with OpenSSL/zlib/brotli: its pkg-config flags must be used or
# the class layout differs from the library's.
pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
find_package(simdjson QUIET)
if(RLT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(RLT_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
