#!/usr/bin/env bash
# Installs what is needed (scripts/setup.sh), builds, and runs the whole test suite:
#   1. the release build with every test (unit, CLI, Python oracle and integration tests);
#   2. the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (preset `asan`).
# Usage: scripts/test.sh [--no-asan]
set -euo pipefail
cd "$(dirname "$0")/.."

run_asan=1
for arg in "$@"; do
  case "$arg" in
    --no-asan) run_asan=0 ;;
    *) echo "usage: scripts/test.sh [--no-asan]" >&2; exit 2 ;;
  esac
done

scripts/setup.sh
echo "== release build"
cmake --preset release >/dev/null
cmake --build --preset release
echo "== release tests"
ctest --preset release --timeout 900 -j2

if [ "$run_asan" = 1 ]; then
  echo "== sanitizer build (ASan + UBSan)"
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  echo "== sanitizer tests (unit tests; oracle and slow labels excluded)"
  # OpenMP's thread pool is alive at exit by design; its allocations are not leaks of ours.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --preset asan --timeout 900 -j2
fi
echo "== all tests passed"
