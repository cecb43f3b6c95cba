#!/usr/bin/env bash
# Builds the CPU kernels and the CPU attention backends with their unit tests for AArch64 and
# runs them under qemu-user, so that the Arm code paths (Highway's NEON target, the int8 kernel's
# NeonLanes and NeonDotLanes, cpu_flash) are checked on an x86 machine. Emulation says nothing
# about speed; it checks results, bit for bit where the tests do on x86. Installs what it needs on Debian 12
# (root, idempotent): the arm64 architecture, g++-aarch64-linux-gnu, qemu-user and the arm64
# builds of Highway, GoogleTest, fmt, spdlog and xxHash. Not part of scripts/test.sh: on the
# 2-core dev box the cross build takes ~8 minutes (the emulated runs ~1).
# Usage: scripts/cross_check_arm64.sh [BUILD_DIR] [-- gtest arguments]   (default: build/arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/arm64
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
[ "${1:-}" = "--" ] && shift

packages=(g++-aarch64-linux-gnu qemu-user libgomp1:arm64 libhwy-dev:arm64 libgtest-dev:arm64 libfmt-dev:arm64
  libspdlog-dev:arm64 libxxhash-dev:arm64 nlohmann-json3-dev)
if ! dpkg -s "${packages[@]}" >/dev/null 2>&1; then
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
fi

cxx=aarch64-linux-gnu-g++
# The flags CMake gives these targets on x86 (compile_commands.json), for AArch64.
flags=(-std=c++20 -O3 -DNDEBUG -Wall -Wextra -ffp-contract=off -fopenmp -Iinclude -Isrc
  "-DHWY_DISABLED_TARGETS=(HWY_SVE|HWY_SVE2|HWY_SVE_256|HWY_SVE2_128)"  # cmake/RltDependencies.cmake
  -DFMT_SHARED -DHWY_SHARED_DEFINE -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB
  "-DRLT_SOURCE_DIR=\"$PWD\"")
common=(src/common/status.cpp src/common/dtype.cpp src/common/log.cpp src/common/cpu_share.cpp
  src/common/process_memory.cpp src/common/page_buffer.cpp src/common/config_names.cpp src/quant/*.cpp
  src/kernels/cpu/*.cpp)
# The CPU attention backends (src/attention/CMakeLists.txt without the CUDA ones) and the KV module.
attention=(src/attention/{contract,capabilities,registry,selection,backend,cpu_reference,cpu_flash,metadata_planner,cudnn_shape}.cpp
  src/kv/*.cpp)

mkdir -p "$build"
# Objects built with other flags are stale whatever their age.
if [ "$(cat "$build/flags.txt" 2>/dev/null)" != "${flags[*]}" ]; then
  rm -f "$build"/*.o
  echo "${flags[*]}" >"$build/flags.txt"
fi
compile() {  # sources -> objects, each rebuilt when it or any header under src/ or tests/ is newer
  objects=()
  local src obj
  for src in "$@"; do
    obj=$build/$(echo "$src" | tr / _).o
    if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find src tests -name '*.h' -newer "$obj" -print -quit)" ]; then
      echo "$src" >&2
      "$cxx" "${flags[@]}" -c "$src" -o "$obj"
    fi
    objects+=("$obj")
  done
}
libs=(-lgtest_main -lgtest -lhwy -lspdlog -lfmt -lxxhash -lpthread)
compile "${common[@]}" tests/kernels/*_test.cpp
"$cxx" -fopenmp -o "$build/rlt_kernels_tests" "${objects[@]}" "${libs[@]}"
compile "${common[@]}" "${attention[@]}" tests/attention/{equivalence,selection,planner,cuda_paged_plan,cudnn_shape}_test.cpp
"$cxx" -fopenmp -o "$build/rlt_attention_tests" "${objects[@]}" "${libs[@]}" -ldl

# The arm64 libraries of the multiarch packages above, with their own loader: the cross
# toolchain's copies under /usr/aarch64-linux-gnu are another build of glibc, and the two mixed
# (that loader, this libc) deadlock on the loader's lock.
# The kernels on a core without the dot-product extension (Armv8.0) and on one with it (Armv8.2),
# each told which int8 variant it must run (linear_quant_int8_test.cpp).
status=0
run() {  # cpu expected-int8-kernel test
  echo "running $build/$3 under qemu-aarch64 -cpu $1" >&2
  RLT_EXPECT_INT8_KERNEL=$2 qemu-aarch64 -cpu "$1" -L / "$build/$3" "${args[@]}" || status=1
}
args=("$@")
run cortex-a53 "NEON widening multiplies" rlt_kernels_tests
run neoverse-n1 "NEON sdot" rlt_kernels_tests
run neoverse-n1 "NEON sdot" rlt_attention_tests
exit $status
