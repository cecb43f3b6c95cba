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
for binary in "$build/src/cli/rlt" "$build/tests/cuda/rlt_cuda_tests" "$build/bench/cuda/rlt_bench_cuda_gemv" \
  "$build/bench/cuda/rlt_bench_cuda_attention"; do
  if [ ! -x "$binary" ]; then
    echo "missing $binary: build with CUDA on the development machine first (cmake --preset release)" >&2
    exit 2
  fi
  ldd "$binary" | grep "not found" >>"$logs/missing-libraries.txt" || true
done

run rlt_info "$build/src/cli/rlt" info
run cuda_tests "$build/tests/cuda/rlt_cuda_tests"
run bench_gemv "$build/bench/cuda/rlt_bench_cuda_gemv"
run bench_attention "$build/bench/cuda/rlt_bench_cuda_attention" --json
run torch_sdpa python3 bench/peer/torch_sdpa_decode.py --json

echo "GPU: $(sed -n 2p "$logs/gpu.txt")"
printf '%-22s %-6s %8s  %s\n' check result time summary
printf '%s\n' "${rows[@]}"
if [ -s "$logs/missing-libraries.txt" ]; then
  echo "missing shared libraries (carry them along): $(tr '\n' ' ' <"$logs/missing-libraries.txt")"
fi
echo "--- GPU GEMV vs copy bandwidth"
tail -n +3 "$logs/bench_gemv.log"
echo "--- decode attention: cuda_paged vs PyTorch SDPA on the same shapes (same run)"
python3 - "$logs/bench_attention.log" "$logs/torch_sdpa.log" <<'PY'
import json, sys
def rows(path):
    out = {}
    for line in open(path, errors="replace"):
        if line.startswith("JSON "):
            r = json.loads(line[5:])
            out[(r["batch"], r["context"], r["q_heads"], r["kv_heads"], r["head_dim"])] = r
    return out
ours, peer = rows(sys.argv[1]), rows(sys.argv[2])
print(f"{'case':<30} {'rlt GB/s':>9} {'of copy':>8} {'SDPA GB/s':>10} {'rlt/SDPA':>9}")
for key, r in ours.items():
    p = peer.get(key)
    ratio = f"{r['gbps'] / p['gbps']:.2f}" if p else "-"
    print(f"b{key[0]} ctx{key[1]} heads {key[2]}/{key[3]} d{key[4]:<6} {r['gbps']:>9.0f} "
          f"{100 * r['gbps'] / r['copy_gbps']:>7.0f}% {p['gbps'] if p else '-':>10} {ratio:>9}")
PY
echo "logs: $logs"
