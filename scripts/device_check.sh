#!/usr/bin/env bash
# Device checks on a machine with an NVIDIA GPU: runs the GPU test suite and GPU benchmarks that
# were built on the development machine (the GPU machine lacks several of rlt's build
# dependencies, so it runs prebuilt binaries: carry build/release), prints a short table, and
# writes every log to the folder given as argument.
# Usage: scripts/device_check.sh [LOG_DIR]     (default: device-logs)
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-device-logs}
mkdir -p "$logs"
build=build/release
rows=()

# run NAME COMMAND...: runs one check with its output in $logs/NAME.log and records a table row.
run() {
  local name=$1
  shift
  local start end rc
  start=$(date +%s.%N)
  "$@" >"$logs/$name.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  local summary
  summary=$(grep -E "PASSED|FAILED|SKIPPED|error" "$logs/$name.log" | tail -1)
  rows+=("$(printf '%-22s %-6s %7.1fs  %s' "$name" "$([ $rc = 0 ] && echo ok || echo FAIL)" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "${summary:0:80}")")
  return 0
}

{ nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv 2>&1 || true; } >"$logs/gpu.txt"
for binary in "$build/src/cli/rlt" "$build/tests/cuda/rlt_cuda_tests" "$build/bench/cuda/rlt_bench_cuda_gemv"; do
  if [ ! -x "$binary" ]; then
    echo "missing $binary: build with CUDA on the development machine first (cmake --preset release)" >&2
    exit 2
  fi
  ldd "$binary" | grep "not found" >>"$logs/missing-libraries.txt" || true
done

run rlt_info "$build/src/cli/rlt" info
run cuda_tests "$build/tests/cuda/rlt_cuda_tests"
run bench_gemv "$build/bench/cuda/rlt_bench_cuda_gemv"

echo "GPU: $(sed -n 2p "$logs/gpu.txt")"
printf '%-22s %-6s %8s  %s\n' check result time summary
printf '%s\n' "${rows[@]}"
if [ -s "$logs/missing-libraries.txt" ]; then
  echo "missing shared libraries (carry them along): $(tr '\n' ' ' <"$logs/missing-libraries.txt")"
fi
echo "--- GPU GEMV vs copy bandwidth"
tail -n +3 "$logs/bench_gemv.log"
echo "logs: $logs"
