#!/usr/bin/env bash
# Packs what scripts/device_check.sh runs into device-bundle/ (ignored by git): the prebuilt GPU
# binaries, laid out as in the build folder, and every shared library they load that is neither
# glibc's nor CUDA's (the GPU machine lacks several of rlt's Debian packages and has its own CUDA
# toolkit), as one gzip archive, device-bundle/rlt-bundle.tgz (~33 MB; the files themselves are
# ~115 MB with the four CUDA architectures' kernels and their line tables, more than a device run can
# carry), plus STAMP.txt saying which commit it holds. device_check.sh unpacks it into a temporary
# folder. Build first: cmake --preset release && cmake --build --preset release.
# Usage: scripts/device_bundle.sh [BUILD_DIR]     (default: build/release)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
out=device-bundle
binaries=(src/cli/rlt tests/cuda/rlt_cuda_tests bench/cuda/rlt_bench_cuda_gemv bench/cuda/rlt_bench_cuda_attention)
# A bundle of stale binaries would spend the device's minutes on old code: bring the build up to
# date first (a no-op when it is).
if [ -f "$build/build.ninja" ]; then
  cmake --build "$build" --target "${binaries[@]##*/}"
fi
stage=$(mktemp -d "${TMPDIR:-/tmp}/rlt-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
for b in "${binaries[@]}"; do
  if [ ! -x "$build/$b" ]; then
    echo "missing $build/$b: build with CUDA first (cmake --preset release && cmake --build --preset release)" >&2
    exit 2
  fi
  mkdir -p "$stage/$(dirname "$b")"
  cp "$build/$b" "$stage/$b"
  # Libraries outside glibc, the loader and the CUDA toolkit.
  ldd "$build/$b" | awk '/=> \// { print $3 }' | while read -r lib; do
    case "$(basename "$lib")" in
      # glibc and the compiler runtime: the GPU machine's (newer, gcc 13) serve our binaries too.
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | libstdc++.so.* | libgcc_s.so.* | libgomp.so.*) continue ;;
    esac
    case "$lib" in /usr/local/cuda*) continue ;; esac
    cp -Ln "$lib" "$stage/lib/" 2>/dev/null || true
  done
done
# Which code the bundle holds, printed by device_check.sh above its table.
{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
  echo "bundled $(date -u '+%Y-%m-%d %H:%M UTC') from $build"
} >"$stage/STAMP.txt"
rm -rf "$out"
mkdir -p "$out"
tar czf "$out/rlt-bundle.tgz" -C "$stage" .
cp "$stage/STAMP.txt" "$out/STAMP.txt"
echo "$(du -sh "$stage" | cut -f1) of binaries and libraries packed into $(du -sh "$out/rlt-bundle.tgz" | cut -f1) $out/rlt-bundle.tgz"
# A device run carries at most 64 MiB (bundle and working tree together).
kib=$(du -sk "$out" | cut -f1)
if [ "$kib" -gt $((48 * 1024)) ]; then
  echo "device-bundle is $((kib / 1024)) MiB: too close to the 64 MiB a device run can carry;" \
    "build the bundle for the GPU's architecture only (cmake -DCMAKE_CUDA_ARCHITECTURES=90a ...)" >&2
  exit 3
fi
echo "carry device-bundle to the GPU machine; scripts/device_check.sh uses it when present"
