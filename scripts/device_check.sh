#!/usr/bin/env bash
# Device checks on a machine with an NVIDIA GPU: runs the GPU test suite and GPU benchmarks that
# were built on the development machine (the GPU machine lacks several of rlt's build
# dependencies, so it runs prebuilt binaries: make device-bundle/ with scripts/device_bundle.sh and
# carry it, or point RLT_BUILD_DIR at a build), prints a short table, and leaves two files in the
# folder given as argument: summary.txt (the table) and device-logs.tgz (every check's log,
# refreshed after each check, so a run cut short still returns what it did). Two files because a
# device run returns at most 8.
# Usage: scripts/device_check.sh [OUT_DIR]     (default: device-logs)
#   RLT_CHECKS=name,glob*,...   run only these checks (a rerun of some; make_model always runs
#                               when a selected end-to-end check needs the checkpoint)
#   RLT_CHECK_BUDGET=seconds    the whole script's budget (default 400; run it with timeout_s 480)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${1:-device-logs}
mkdir -p "$out"
# A reused folder must not show an earlier run's results.
rm -f "$out"/*.log "$out"/*.txt "$out"/device-logs.tgz "$out"/device-logs.tgz.part
logs=$(mktemp -d "${TMPDIR:-/tmp}/rlt-device-logs.XXXXXX")
pack() {
  tar czf "$out/device-logs.tgz.part" -C "$logs" . && mv -f "$out/device-logs.tgz.part" "$out/device-logs.tgz"
}
build=${RLT_BUILD_DIR:-build/release}
# A bundle from scripts/device_bundle.sh (binaries + the libraries this machine may lack) wins.
# Its libraries apply to rlt's binaries only (never to python, whose torch wants its own).
rlt_env=(env)
rlt_libs=""
# It travels as one archive (device-bundle/rlt-bundle.tgz), unpacked here into a temporary folder.
bundle=""
if [ -z "${RLT_BUILD_DIR:-}" ] && [ -f device-bundle/rlt-bundle.tgz ]; then
  bundle=$(mktemp -d "${TMPDIR:-/tmp}/rlt-bundle.XXXXXX")
  trap 'rm -rf "$bundle"' EXIT
  if tar xzf device-bundle/rlt-bundle.tgz -C "$bundle" && [ -x "$bundle/src/cli/rlt" ]; then
    build=$bundle
    rlt_libs="$bundle/lib:/usr/local/cuda/lib64"
  else
    echo "device-bundle/rlt-bundle.tgz did not unpack into a bundle; remake it with scripts/device_bundle.sh" >&2
    rm -rf "$bundle"
    bundle=""
  fi
fi
# The cuDNN that PyTorch's SDPA runs (its wheel's) serves rlt's cudnn backend too, so the two are
# compared on one cuDNN version: its folder comes first (it holds libcudnn*.so.9 only);
# RLT_CUDNN_DIR picks another, an empty one the system's.
cudnn_dir=${RLT_CUDNN_DIR-$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null)}
[ -n "$cudnn_dir" ] && [ -d "$cudnn_dir" ] && rlt_libs="$cudnn_dir${rlt_libs:+:$rlt_libs}"
[ -n "$rlt_libs" ] && rlt_env=(env "LD_LIBRARY_PATH=$rlt_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
rows=()
# The whole script stays within about 7 minutes (a device command may run 600 s, and a session has
# 15 minutes of device time for a start, this run and a rerun): checks share this budget, and the
# ones it cannot fit are skipped, so the table is always printed.
deadline=$(($(date +%s) + ${RLT_CHECK_BUDGET:-400}))

# selected NAME: whether RLT_CHECKS (comma-separated names or globs) asks for this check.
considered=()
check_patterns=()
[ -n "${RLT_CHECKS:-}" ] && IFS=, read -ra check_patterns <<<"${RLT_CHECKS// /}"
selected() {
  considered+=("$1")
  [ -z "${RLT_CHECKS:-}" ] && return 0
  local pattern
  for pattern in "${check_patterns[@]}"; do
    # shellcheck disable=SC2053  # the pattern is a glob on purpose
    [[ $1 == $pattern ]] && return 0
  done
  return 1
}

# The rows so far as OUT/summary.txt (the full table replaces it at the end), and the logs: what
# comes back if the run is cut short.
save_progress() {
  {
    echo "(partial: the run ended before its table)"
    printf '%-22s %-7s %8s  %s\n' check result time summary
    [ ${#rows[@]} -gt 0 ] && printf '%s\n' "${rows[@]}"
    [ -n "${1:-}" ] && echo "running: $1"
  } >"$out/summary.txt"
  pack
}

# skip NAME WHY: records a check that did not run.
skip() {
  echo "skipped: $2" >"$logs/$1.log"
  rows+=("$(printf '%-22s %-7s %7s   %s' "$1" "SKIP" "-" "$2")")
  save_progress
}

# run NAME COMMAND...: runs one check with its output in $logs/NAME.log and records a table row.
# Checks RLT_CHECKS leaves out are not run and not listed.
run() {
  local name=$1
  shift
  if [ -z "${RLT_FORCE_CHECK:-}" ] && ! selected "$name"; then return 0; fi
  local start end rc limit result
  # A hung kernel must not eat the whole device session: every check has a time limit.
  limit=$((deadline - $(date +%s)))
  [ "$limit" -gt "${RLT_CHECK_TIMEOUT:-240}" ] && limit=${RLT_CHECK_TIMEOUT:-240}
  if [ "$limit" -lt 10 ]; then
    skip "$name" "the script's time budget is spent"
    return 0
  fi
  save_progress "$name (at most $limit s)"
  start=$(date +%s.%N)
  timeout -k 10 "$limit" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  result=$([ $rc = 0 ] && echo ok || echo FAIL)
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    echo "timed out after $limit s" >>"$logs/$name.log"
    # Cut short by the script's budget (CUT) or by the check's own limit (TIMEOUT).
    if [ "$limit" -lt "${RLT_CHECK_TIMEOUT:-240}" ]; then result=CUT; else result=TIMEOUT; fi
  fi
  end=$(date +%s.%N)
  local summary
  summary=$(grep -E "PASSED|FAILED|SKIPPED|error|timed out" "$logs/$name.log" | tail -1)
  rows+=("$(printf '%-22s %-7s %7.1fs  %s' "$name" "$result" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "${summary:0:80}")")
  save_progress
  return 0
}

{ nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv 2>&1 || true; } >"$logs/gpu.txt"
# Whether the libraries the cudnn backend loads at run time load here, with rlt's library path
# (cuDNN itself may need NVRTC for its runtime-compiled engines), and which cuDNN that is.
"${rlt_env[@]}" python3 - >"$logs/cuda-libraries.txt" 2>&1 <<'PY'
import ctypes
for name in ("libcudnn.so.9", "libnvrtc.so.13"):
    try:
        lib = ctypes.CDLL(name)
        version = f" (version {lib.cudnnGetVersion()})" if name.startswith("libcudnn") else ""
        where = next((l.split()[-1] for l in open("/proc/self/maps") if name.split(".so")[0] + ".so" in l), "?")
        print(f"{name}: loads{version} from {where}")
    except (OSError, AttributeError) as e:
        print(f"{name}: does not load ({e})")
PY
for binary in "$build/src/cli/rlt" "$build/tests/cuda/rlt_cuda_tests" "$build/bench/cuda/rlt_bench_cuda_gemv" \
  "$build/bench/cuda/rlt_bench_cuda_attention"; do
  if [ ! -x "$binary" ]; then
    echo "missing $binary: build with CUDA on the development machine first (cmake --preset release)" |
      tee "$out/summary.txt" >&2
    pack
    exit 2
  fi
  "${rlt_env[@]}" ldd "$binary" | grep "not found" >>"$logs/missing-libraries.txt" || true
done

# Acceptance checks first (the budget cuts from the end): the GPU tests against the CPU oracle,
# kernel benchmarks against PyTorch, the end-to-end comparison; then the variants.
run rlt_info "${rlt_env[@]}" "$build/src/cli/rlt" info
# One process per test suite: a kernel fault's sticky error then costs its own suite only.
run cuda_tests "${rlt_env[@]}" scripts/gtest_by_suite.sh "$build/tests/cuda/rlt_cuda_tests" '-Cudnn.*:GpuEngine.Cudnn*'
run bench_gemv "${rlt_env[@]}" "$build/bench/cuda/rlt_bench_cuda_gemv"
run bench_attention "${rlt_env[@]}" "$build/bench/cuda/rlt_bench_cuda_attention" --json
run torch_sdpa python3 -u bench/peer/torch_sdpa_decode.py --json  # -u: lines survive a timeout

# End to end on an Ouro-1.4B-shape bf16 checkpoint (random weights: speed only), 1K context, all
# loops: rlt's GPU engine and the plain PyTorch model with CUDA graphs, in this same run. Each rlt
# run first completes one untimed batch of the same size (its CUDA graphs are captured then), and
# prefills every request before decoding (--max-prefill-batches-before-decode), so that its steady
# decode rate is the whole batch decoding, as PyTorch's per-step timing is.
e2e=${RLT_DEVICE_CHECK_MODEL:-/tmp/rlt-ouro-1.4b-shape}
if ! nvidia-smi >/dev/null 2>&1; then
  echo "no GPU visible (nvidia-smi): skipping the end-to-end benchmarks" >&2
  e2e=""
fi
e2e_checks=(rlt_e2e_b1 rlt_e2e_b32 rlt_e2e_b128 torch_e2e rlt_e2e_async_b1 rlt_e2e_async_b32
  rlt_e2e_async_b128 rlt_e2e_pdl_b1 rlt_e2e_pdl_b32 rlt_e2e_cudnn_b32 rlt_e2e_cudnn_b1)
needs_model=""
for check in make_model "${e2e_checks[@]}"; do selected "$check" && needs_model=1; done
# generation_config.json is the last file make-model writes: a folder without it is incomplete.
if [ -n "$e2e" ] && [ -n "$needs_model" ] && [ ! -f "$e2e/generation_config.json" ]; then
  # rlt writes it (random bf16 weights, ~15 s): no Python packages needed for it on this machine.
  RLT_FORCE_CHECK=1 run make_model "${rlt_env[@]}" "$build/src/cli/rlt" make-model --preset ouro-1.4b --out "$e2e"
fi
# rlt_bench NAME BATCH FLAGS...: one end-to-end rlt run at 1K context with 16 new tokens (64 at
# batch 1, whose steady decode window would otherwise be a few tens of milliseconds).
rlt_bench() {
  local name=$1 batch=$2
  shift 2
  local gib=$((batch * 3 / 4 + 4)) # (1024 + 64) tokens x 4 planes x 0.19 MiB per token-plane, with room
  local new_tokens=$((batch == 1 ? 64 : 16))
  run "$name" "${rlt_env[@]}" "$build/src/cli/rlt" bench --device cuda --model "$e2e" --num-requests "$batch" \
    --concurrency "$batch" --prompt-len 1024 --output-len "$new_tokens" --max-num-seqs "$batch" \
    --max-num-batched-tokens 8192 --prefill-chunk-size 1024 --max-prefill-batches-before-decode 64 \
    --kv-cache-gib "$gib" --warmup-requests "$batch" "$@"
}
if [ -n "$e2e" ] && [ -f "$e2e/generation_config.json" ]; then
  for batch in 1 32 128; do rlt_bench "rlt_e2e_b$batch" "$batch"; done
  run torch_e2e python3 -u bench/peer/torch_ouro.py --model "$e2e" --batches 1,32,128 --context 1024 --json
fi
# The first two GPU tests that failed or crashed (a test that ran and never reported OK or FAILED
# before its suite's process ended), each again in its own process under compute-sanitizer's
# memcheck: it names the kernel and (the build keeps line tables, -lineinfo) the source line of a
# bad access, which a failing comparison or a sticky "illegal address" in every later test does
# not. Needs this run's cuda_tests (RLT_CHECKS=cuda_tests,cuda_memcheck).
memcheck_tests=$(awk '
  function crashed() { if (running != "" && !seen[running]++) print running; running = "" }
  /^=== suite / { crashed() }
  /^\[ RUN      \] / { running = $4 }
  /^\[       OK \] / { running = "" }
  /^\[  FAILED  \] [A-Za-z_]/ { t = $4; sub(/,$/, "", t); running = ""; if (!seen[t]++) print t }
  END { crashed() }' "$logs/cuda_tests.log" 2>/dev/null | head -2 | tr '\n' ' ')
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$memcheck_tests" ] && selected cuda_memcheck; then
  if [ -n "$sanitizer" ]; then
    # shellcheck disable=SC2016,SC2086  # the loop runs in the child shell; one test per word
    RLT_CHECK_TIMEOUT=120 run cuda_memcheck "${rlt_env[@]}" bash -c \
      'sanitizer=$1 binary=$2; shift 2; rc=0
       for t in "$@"; do
         echo "=== memcheck $t"
         "$sanitizer" --tool memcheck --error-exitcode 1 --print-limit 20 "$binary" --gtest_filter="$t" || rc=1
       done
       exit $rc' memcheck "$sanitizer" "$build/tests/cuda/rlt_cuda_tests" $memcheck_tests
  else
    skip cuda_memcheck "compute-sanitizer not found (for $memcheck_tests)"
  fi
fi
if [ -n "$e2e" ] && [ -f "$e2e/generation_config.json" ]; then
  # Asynchronous scheduling (full depth: ouro_delayed exits exactly as ouro does).
  for batch in 1 32 128; do
    rlt_bench "rlt_e2e_async_b$batch" "$batch" --exit-policy ouro_delayed --async-scheduling
  done
  # Programmatic dependent launch (sm_90+) where launch gaps weigh most.
  for batch in 1 32; do rlt_bench "rlt_e2e_pdl_b$batch" "$batch" --pdl; done
elif [ -n "$e2e" ] && [ -n "$needs_model" ]; then
  skip end_to_end "no complete checkpoint in $e2e (make_model failed or was cut)"
fi
# The cudnn backend last (the first to go if the time budget runs out): its tests build a cuDNN
# plan per shape (seconds each), in at most 90 s; then cuDNN's fused attention in the engine
# (CUDA graphs, packed prefill) at batch 32, and at batch 1 for its 1x1024 prefill.
RLT_CHECK_TIMEOUT=90 run cudnn_tests "${rlt_env[@]}" "$build/tests/cuda/rlt_cuda_tests" \
  --gtest_filter='Cudnn.*:GpuEngine.Cudnn*'
if [ -n "$e2e" ] && [ -f "$e2e/generation_config.json" ]; then
  rlt_bench rlt_e2e_cudnn_b32 32 --attention-backend cudnn
  rlt_bench rlt_e2e_cudnn_b1 1 --attention-backend cudnn
fi

{
[ -n "$bundle" ] && [ -f "$bundle/STAMP.txt" ] && echo "bundle: $(tr '\n' ' ' <"$bundle/STAMP.txt")"
echo "GPU: $(sed -n 2p "$logs/gpu.txt")"
if [ -n "${RLT_CHECKS:-}" ]; then
  for pattern in "${check_patterns[@]}"; do
    hit=""
    # shellcheck disable=SC2053  # the pattern is a glob on purpose
    for name in "${considered[@]}"; do [[ $name == $pattern ]] && hit=1 && break; done
    [ -z "$hit" ] && echo "RLT_CHECKS: '$pattern' matches no check"
  done
fi
echo "run-time libraries: $(cut -c1-140 "$logs/cuda-libraries.txt" | tr '\n' ' ')"
printf '%-22s %-7s %8s  %s\n' check result time summary
printf '%s\n' "${rows[@]}"
if [ -s "$logs/missing-libraries.txt" ]; then
  echo "missing shared libraries (carry them along): $(tr '\n' ' ' <"$logs/missing-libraries.txt")"
fi
echo "--- GPU GEMV vs copy bandwidth"
[ -f "$logs/bench_gemv.log" ] && tail -n +2 "$logs/bench_gemv.log"
echo "--- decode attention: rlt's backends vs PyTorch SDPA on the same shapes (same run)"
python3 - "$logs/bench_attention.log" "$logs/torch_sdpa.log" <<'PY'
import json, os, sys
def share(a, b):
    """a / b as a percentage, or '-' where b is missing or zero (a failed probe)."""
    return f"{100 * a / b:.0f}%" if b else "-"
def rows(path):
    out = {}
    for line in (open(path, errors="replace") if os.path.exists(path) else []):
        if line.startswith("JSON "):
            r = json.loads(line[5:])
            if r.get("bench") != "attention_decode":
                continue  # a prefill case may share a decode case's shape
            out[(r.get("backend", ""), r["batch"], r["context"], r["q_heads"], r["kv_heads"], r["head_dim"])] = r
    return out
ours = rows(sys.argv[1])
peer = {key[1:]: r for key, r in rows(sys.argv[2]).items()}
prefill = [json.loads(l[5:]) for l in (open(sys.argv[1], errors="replace") if os.path.exists(sys.argv[1]) else [])
           if l.startswith("JSON ") and '"attention_prefill"' in l]
print(f"{'backend':<11} {'case':<30} {'rlt GB/s':>9} {'of copy':>8} {'SDPA GB/s':>10} {'rlt/SDPA':>9}")
for key, r in ours.items():
    p = peer.get(key[1:])
    ratio = f"{r['gbps'] / p['gbps']:.2f}" if p and p['gbps'] else "-"
    print(f"{key[0]:<11} b{key[1]} ctx{key[2]} heads {key[3]}/{key[4]} d{key[5]:<6} {r['gbps']:>9.0f} "
          f"{share(r['gbps'], r['copy_gbps']):>8} {p['gbps'] if p else '-':>10} {ratio:>9}")
for r in prefill:
    print(f"{r.get('backend', ''):<11} packed prefill {r['batch']}x{r['context']} heads {r['q_heads']}/{r['kv_heads']}: "
          f"{r['tflops']:.1f} TFLOP/s = {share(r['tflops'], r['matmul_tflops'])} of the run's bf16 matmul "
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
    """(tokens/s over the batch, share of the memory floor) of one rlt bench result, or Nones:
    the steady rate (every request decoding) where the bench reports it, else the mean per-request
    rate times the batch."""
    if not result:
        return None, None
    roofline = result.get("roofline", {})
    steady = result["full_depth"].get("steady_decode_tokens_per_s", 0)
    if steady:
        return steady, roofline.get("steady_decode_share_of_roofline")
    return result["full_depth"]["decode_tokens_per_s"] * batch, roofline.get("decode_share_of_roofline")
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
              f"{100 * t['tokens_per_s'] / t['floor_tokens_per_s']:.0f}%" if t and t['floor_tokens_per_s'] else "-",
              f"{best / t['tokens_per_s']:.2f}" if best and t and t['tokens_per_s'] else "-"]
    widths = [11, 8] * (len(modes) + 1) + [10]
    print(f"{batch:>5} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
p = torch.get(("prefill", None))
for prefix, name in (("", "rlt"), ("cudnn_", "rlt (cudnn)")):
    r = rlt_bench(1, prefix)
    if p and r and r["full_depth"]["prefill_tokens_per_s"] and p["matmul_tflops"]:
        rlt_tflops = p["linear_flops_per_token"] * r["full_depth"]["prefill_tokens_per_s"] / 1e12
        print(f"prefill 1x1024: {name} {1024 / r['full_depth']['prefill_tokens_per_s'] * 1e3:.1f} ms = {rlt_tflops:.0f} TFLOP/s "
              f"({100 * rlt_tflops / p['matmul_tflops']:.0f}% of matmul), torch {p['ms']:.1f} ms = {p['tflops']:.0f} TFLOP/s")
PY
echo "--- where rlt's device time went (CUDA events around each batch)"
for f in "$logs"/rlt_e2e_*.log; do
  [ -f "$f" ] || continue
  line=$(grep -m1 "device time:" "$f")
  [ -n "$line" ] && echo "$(basename "$f" .log): ${line#device time: }"
done
echo "logs: $out/device-logs.tgz (written in $logs)"
} 2>&1 | tee "$out/summary.txt"
pack
