#!/usr/bin/env bash
# Device checks on a machine with an NVIDIA GPU: runs the GPU test suite and GPU benchmarks that
# were built on the development machine (the GPU machine lacks several of rlt's build
# dependencies, so it runs prebuilt binaries: make device-bundle/ with scripts/device_bundle.sh and
# carry it, or point RLT_BUILD_DIR at a build), prints a short table, and writes every log to the
# folder given as argument.
# Usage: scripts/device_check.sh [LOG_DIR]     (default: device-logs)
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-device-logs}
mkdir -p "$logs"
rm -f "$logs"/*.log "$logs"/*.txt  # a reused folder must not show an earlier run's results
build=${RLT_BUILD_DIR:-build/release}
# A bundle from scripts/device_bundle.sh (binaries + the libraries this machine may lack) wins.
# Its libraries apply to rlt's binaries only (never to python, whose torch wants its own).
rlt_env=(env)
if [ -z "${RLT_BUILD_DIR:-}" ] && [ -x device-bundle/src/cli/rlt ]; then
  build=device-bundle
  rlt_env=(env "LD_LIBRARY_PATH=$PWD/device-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}")
fi
rows=()
# The whole script stays within 8 minutes (a device command may run 600 s): checks share this budget, and
# the ones it cannot fit are skipped, so the table is always printed.
deadline=$(($(date +%s) + ${RLT_CHECK_BUDGET:-470}))

# skip NAME WHY: records a check that did not run.
skip() {
  echo "skipped: $2" >"$logs/$1.log"
  rows+=("$(printf '%-22s %-6s %7s   %s' "$1" "SKIP" "-" "$2")")
}

# run NAME COMMAND...: runs one check with its output in $logs/NAME.log and records a table row.
run() {
  local name=$1
  shift
  local start end rc limit result
  # A hung kernel must not eat the whole device session: every check has a time limit.
  limit=$((deadline - $(date +%s)))
  [ "$limit" -gt "${RLT_CHECK_TIMEOUT:-240}" ] && limit=${RLT_CHECK_TIMEOUT:-240}
  if [ "$limit" -lt 10 ]; then
    skip "$name" "the script's time budget is spent"
    return 0
  fi
  start=$(date +%s.%N)
  timeout -k 10 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  result=$([ $rc = 0 ] && echo ok || echo FAIL)
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    echo "timed out after $limit s" >>"$logs/$name.log"
    # Cut short by the script's budget rather than by its own limit: not a failure of the check.
    [ "$limit" -lt "${RLT_CHECK_TIMEOUT:-240}" ] && result=CUT
  fi
  end=$(date +%s.%N)
  local summary
  summary=$(grep -E "PASSED|FAILED|SKIPPED|error|timed out" "$logs/$name.log" | tail -1)
  rows+=("$(printf '%-22s %-6s %7.1fs  %s' "$name" "$result" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "${summary:0:80}")")
  return 0
}

{ nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv 2>&1 || true; } >"$logs/gpu.txt"
# Whether the libraries the cudnn backend loads at run time load here (cuDNN itself may need
# NVRTC for its runtime-compiled engines).
"${rlt_env[@]}" python3 - >"$logs/cuda-libraries.txt" 2>&1 <<'PY'
import ctypes
for name in ("libcudnn.so.9", "libnvrtc.so.13"):
    try:
        ctypes.CDLL(name)
        print(f"{name}: loads")
    except OSError as e:
        print(f"{name}: does not load ({e})")
PY
for binary in "$build/src/cli/rlt" "$build/tests/cuda/rlt_cuda_tests" "$build/bench/cuda/rlt_bench_cuda_gemv" \
  "$build/bench/cuda/rlt_bench_cuda_attention"; do
  if [ ! -x "$binary" ]; then
    echo "missing $binary: build with CUDA on the development machine first (cmake --preset release)" >&2
    exit 2
  fi
  "${rlt_env[@]}" ldd "$binary" | grep "not found" >>"$logs/missing-libraries.txt" || true
done

run rlt_info "${rlt_env[@]}" "$build/src/cli/rlt" info
# The cudnn backend's tests build a cuDNN plan per shape (seconds each): run apart, in at most 90 s.
run cuda_tests "${rlt_env[@]}" "$build/tests/cuda/rlt_cuda_tests" --gtest_filter='-Cudnn.*:GpuEngine.Cudnn*'
RLT_CHECK_TIMEOUT=90 run cudnn_tests "${rlt_env[@]}" "$build/tests/cuda/rlt_cuda_tests" \
  --gtest_filter='Cudnn.*:GpuEngine.Cudnn*'
run bench_gemv "${rlt_env[@]}" "$build/bench/cuda/rlt_bench_cuda_gemv"
run bench_attention "${rlt_env[@]}" "$build/bench/cuda/rlt_bench_cuda_attention" --json
run torch_sdpa python3 -u bench/peer/torch_sdpa_decode.py --json  # -u: lines survive a timeout

# End to end on an Ouro-1.4B-shape bf16 checkpoint (random weights: speed only), 1K context, all
# loops: rlt's GPU engine and the plain PyTorch model with CUDA graphs, in this same run. Each rlt
# run first completes one untimed batch of the same size (its CUDA graphs are captured then).
e2e=${RLT_DEVICE_CHECK_MODEL:-/tmp/rlt-ouro-1.4b-shape}
if ! nvidia-smi >/dev/null 2>&1; then
  echo "no GPU visible (nvidia-smi): skipping the end-to-end benchmarks" >&2
  e2e=""
fi
# generation_config.json is the last file make-model writes: a folder without it is incomplete.
if [ -n "$e2e" ] && [ ! -f "$e2e/generation_config.json" ]; then
  # rlt writes it (random bf16 weights, ~15 s): no Python packages needed for it on this machine.
  run make_model "${rlt_env[@]}" "$build/src/cli/rlt" make-model --preset ouro-1.4b --out "$e2e"
fi
if [ -n "$e2e" ] && [ -f "$e2e/generation_config.json" ]; then
  for batch in 1 32 128; do
    gib=$(( batch * 3 / 4 + 4 ))  # (1024 + 16) tokens x 4 planes x 0.19 MiB per token-plane, with room
    run "rlt_e2e_b$batch" "${rlt_env[@]}" "$build/src/cli/rlt" bench --device cuda --model "$e2e" --num-requests "$batch" \
      --concurrency "$batch" --prompt-len 1024 --output-len 16 --max-num-seqs "$batch" \
      --max-num-batched-tokens 8192 --prefill-chunk-size 1024 --kv-cache-gib "$gib" --warmup-requests "$batch"
    # The same with asynchronous scheduling (full depth: ouro_delayed exits exactly as ouro does).
    run "rlt_e2e_async_b$batch" "${rlt_env[@]}" "$build/src/cli/rlt" bench --device cuda --model "$e2e" \
      --num-requests "$batch" --concurrency "$batch" --prompt-len 1024 --output-len 16 --max-num-seqs "$batch" \
      --max-num-batched-tokens 8192 --prefill-chunk-size 1024 --kv-cache-gib "$gib" --warmup-requests "$batch" \
      --exit-policy ouro_delayed --async-scheduling
  done
  run torch_e2e python3 -u bench/peer/torch_ouro.py --model "$e2e" --batches 1,32,128 --context 1024 --json
  # Last (the first to go if the time budget runs out): programmatic dependent launch (sm_90+) where
  # launch gaps weigh most.
  for batch in 1 32; do
    gib=$(( batch * 3 / 4 + 4 ))
    run "rlt_e2e_pdl_b$batch" "${rlt_env[@]}" "$build/src/cli/rlt" bench --device cuda --model "$e2e" \
      --num-requests "$batch" --concurrency "$batch" --prompt-len 1024 --output-len 16 --max-num-seqs "$batch" \
      --max-num-batched-tokens 8192 --prefill-chunk-size 1024 --kv-cache-gib "$gib" --warmup-requests "$batch" --pdl
  done
  # cuDNN's fused attention in the engine (CUDA graphs, packed prefill) at batch 32.
  run "rlt_e2e_cudnn_b32" "${rlt_env[@]}" "$build/src/cli/rlt" bench --device cuda --model "$e2e" \
    --num-requests 32 --concurrency 32 --prompt-len 1024 --output-len 16 --max-num-seqs 32 \
    --max-num-batched-tokens 8192 --prefill-chunk-size 1024 --kv-cache-gib 28 --warmup-requests 32 \
    --attention-backend cudnn
elif [ -n "$e2e" ]; then
  skip end_to_end "no complete checkpoint in $e2e (make_model failed or was cut)"
fi

echo "GPU: $(sed -n 2p "$logs/gpu.txt")"
echo "run-time libraries: $(cut -c1-60 "$logs/cuda-libraries.txt" | tr '\n' ' ')"
printf '%-22s %-6s %8s  %s\n' check result time summary
printf '%s\n' "${rows[@]}"
if [ -s "$logs/missing-libraries.txt" ]; then
  echo "missing shared libraries (carry them along): $(tr '\n' ' ' <"$logs/missing-libraries.txt")"
fi
echo "--- GPU GEMV vs copy bandwidth"
tail -n +3 "$logs/bench_gemv.log"
echo "--- decode attention: rlt's backends vs PyTorch SDPA on the same shapes (same run)"
python3 - "$logs/bench_attention.log" "$logs/torch_sdpa.log" <<'PY'
import json, sys
def rows(path):
    out = {}
    for line in open(path, errors="replace"):
        if line.startswith("JSON "):
            r = json.loads(line[5:])
            if r.get("bench") != "attention_decode":
                continue  # a prefill case may share a decode case's shape
            out[(r.get("backend", ""), r["batch"], r["context"], r["q_heads"], r["kv_heads"], r["head_dim"])] = r
    return out
ours = rows(sys.argv[1])
peer = {key[1:]: r for key, r in rows(sys.argv[2]).items()}
prefill = [json.loads(l[5:]) for l in open(sys.argv[1], errors="replace")
           if l.startswith("JSON ") and '"attention_prefill"' in l]
print(f"{'backend':<11} {'case':<30} {'rlt GB/s':>9} {'of copy':>8} {'SDPA GB/s':>10} {'rlt/SDPA':>9}")
for key, r in ours.items():
    p = peer.get(key[1:])
    ratio = f"{r['gbps'] / p['gbps']:.2f}" if p else "-"
    print(f"{key[0]:<11} b{key[1]} ctx{key[2]} heads {key[3]}/{key[4]} d{key[5]:<6} {r['gbps']:>9.0f} "
          f"{100 * r['gbps'] / r['copy_gbps']:>7.0f}% {p['gbps'] if p else '-':>10} {ratio:>9}")
for r in prefill:
    print(f"{r.get('backend', ''):<11} packed prefill {r['batch']}x{r['context']} heads {r['q_heads']}/{r['kv_heads']}: "
          f"{r['tflops']:.1f} TFLOP/s = {100 * r['tflops'] / r['matmul_tflops']:.1f}% of the run's bf16 matmul "
          f"({r['matmul_tflops']:.0f})")
PY
echo "--- end to end, Ouro-1.4B shape, bf16, 1K context, all loops (rlt GPU engine vs PyTorch + CUDA graphs)"
python3 - "$logs" <<'PY'
import glob, json, os, sys
logs = sys.argv[1]
torch = {}
for line in open(os.path.join(logs, "torch_e2e.log"), errors="replace") if os.path.exists(os.path.join(logs, "torch_e2e.log")) else []:
    if line.startswith("JSON "):
        r = json.loads(line[5:])
        torch[(r["bench"], r.get("batch"))] = r
def rlt_bench(batch, mode=""):
    path = os.path.join(logs, f"rlt_e2e_{mode}b{batch}.log")
    if not os.path.exists(path):
        return None
    text = open(path, errors="replace").read()
    start = text.find("{\n")
    try:
        return json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return None
def decode(result, batch):
    """(tokens/s over the batch, share of the memory floor) of one rlt bench result, or Nones."""
    if not result:
        return None, None
    share = result["roofline"]["decode_share_of_roofline"] if "roofline" in result else None
    return result["full_depth"]["decode_tokens_per_s"] * batch, share
modes = [("", "rlt"), ("async_", "async"), ("pdl_", "pdl"), ("cudnn_", "cudnn")]
header = "".join(f" {name + ' tok/s':>11} {'of floor':>8}" for _, name in modes)
print(f"{'batch':>5}{header} {'torch tok/s':>11} {'of floor':>8} {'best/torch':>10}")
for batch in (1, 32, 128):
    t = torch.get(("decode", batch))
    cells, best = [], None
    for prefix, _ in modes:
        rate, share = decode(rlt_bench(batch, prefix), batch)
        cells += [f"{rate:.0f}" if rate else "-", f"{100 * share:.0f}%" if share else "-"]
        if rate and (best is None or rate > best):
            best = rate  # best/torch compares rlt's best mode
    cells += [f"{t['tokens_per_s']:.0f}" if t else "-",
              f"{100 * t['tokens_per_s'] / t['floor_tokens_per_s']:.0f}%" if t else "-",
              f"{best / t['tokens_per_s']:.2f}" if best and t else "-"]
    widths = [11, 8] * (len(modes) + 1) + [10]
    print(f"{batch:>5} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
p, r = torch.get(("prefill", None)), rlt_bench(1)
if p and r:
    rlt_tflops = p["linear_flops_per_token"] * r["full_depth"]["prefill_tokens_per_s"] / 1e12
    print(f"prefill 1x1024: rlt {1024 / r['full_depth']['prefill_tokens_per_s'] * 1e3:.1f} ms = {rlt_tflops:.0f} TFLOP/s "
          f"({100 * rlt_tflops / p['matmul_tflops']:.0f}% of matmul), torch {p['ms']:.1f} ms = {p['tflops']:.0f} TFLOP/s")
PY
echo "--- where rlt's device time went (CUDA events around each batch)"
for f in "$logs"/rlt_e2e_*.log; do
  [ -f "$f" ] || continue
  line=$(grep -m1 "device time:" "$f")
  [ -n "$line" ] && echo "$(basename "$f" .log): ${line#device time: }"
done
echo "logs: $logs"
