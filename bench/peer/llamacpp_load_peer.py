#!/usr/bin/env python3
"""Start-up time and memory: rlt against llama.cpp on the same weights, on the same machine, in one run.

For each model (the 1.4B Llama shape as bf16 safetensors for rlt and the byte-identical GGUF for
llama.cpp, made as bench/peer/llamacpp_peer.py makes them; SmolLM2-135M-Instruct's Q4_1 GGUF for
both) the script runs, each in a fresh process and best of --reps:

  * start to first token: the wall time from spawning the process to its exit after one generated
    token from a 3-token prompt (rlt: `rlt generate --max-tokens 1`; llama.cpp: a Python process
    that imports llama_cpp, loads the model and evaluates the prompt; its time without the Python
    import is reported too, measured inside the process);
  * peak resident memory (the child's ru_maxrss from wait4) against the weights' bytes plus the KV
    pool's bytes (both engines get the same context: --ctx tokens of f16/bf16 K and V); for
    llama.cpp the peak of a process that only imports llama_cpp is listed beside it, since the
    interpreter's own memory is not the engine's;
  * rlt without a packed-weight cache (--packed-cache off): packing deferred to the engine's spare
    time (the default: the first token is computed from the checkpoint's rows) and packing at load
    (--pack-weights at-load); and with its packed-weight cache (the default; here in a temporary
    folder): a first run packs and writes it (the process exits when the file is written), the
    timed runs map it;
  * cold start: the model's files dropped from the page cache (posix_fadvise DONTNEED, which needs
    no privileges; the packed cache too), against the disk's read rate measured on the same file.

Usage:
    .venv/bin/python bench/peer/llamacpp_load_peer.py --out load.json
    .venv/bin/python bench/peer/llamacpp_load_peer.py --models smollm2 --reps 1   # quick
"""

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import llamacpp_peer as peer  # noqa: E402
import make_model as mm  # noqa: E402

SMOLLM2 = os.path.join(os.path.expanduser("~"), ".cache", "rlt", "SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPT = [1, 2, 3]

LLAMACPP_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import llama_cpp
t1 = time.perf_counter()
path, ctx, threads, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if mode == "load":
    llm = llama_cpp.Llama(model_path=path, n_ctx=ctx, n_threads=threads, n_threads_batch=threads,
                          n_batch=512, verbose=False, flash_attn=True)
    llm.eval([1, 2, 3])
    token = int(llm.sample(temp=0.0))
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_and_first_token_s": t2 - t1}))
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_peak(cmd):
    """(wall seconds, peak RSS bytes, stdout, stderr) of one child process. The peak comes from GNU
    time, itself a tiny process: a child forked from this Python process directly would report at
    least this process's own peak (Linux carries the RSS high-water mark across fork and exec)."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-800:]}")
        peak_kib = int(rss.read().strip().splitlines()[-1])
    return wall, peak_kib * 1024, p.stdout, p.stderr


def drop_from_page_cache(paths):
    for path in paths:
        files = [os.path.join(path, f) for f in os.listdir(path)] if os.path.isdir(path) else [path]
        for f in files:
            if os.path.isfile(f):
                fd = os.open(f, os.O_RDONLY)
                try:
                    os.fsync(fd)  # only clean pages can be dropped
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def disk_read_rate(path):
    """Bytes/s reading `path` after dropping it from the page cache."""
    drop_from_page_cache([path])
    size, t0 = 0, time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while True:
            chunk = f.read(16 << 20)
            if not chunk:
                break
            size += len(chunk)
    return size / (time.perf_counter() - t0)


def weight_files(model):
    if os.path.isdir(model):
        return [os.path.join(model, f) for f in os.listdir(model) if f.endswith(".safetensors")]
    return [model]


def rlt_cmd(rlt_bin, model, threads, kv_gib, extra=()):
    return [rlt_bin, "generate", "--model", model, "--prompt-ids", ",".join(map(str, PROMPT)), "--max-tokens", "1",
            "--threads", str(threads), "--kv-cache-gib", f"{kv_gib:.6f}", *extra]


def parse_rlt_log(err):
    m = re.search(r"weights loaded in ([0-9.]+) s \(open ([0-9.]+) s, pack ([0-9.]+) s, cache ([0-9.]+) s\); "
                  r"([0-9.]+) MiB of packed weights( \(packed between steps[^)]*\))?; packed-weight cache: (\w[\w ]*)",
                  err)
    if not m:
        return {}
    return {"load_s": float(m[1]), "open_s": float(m[2]), "pack_s": float(m[3]), "cache_s": float(m[4]),
            "packed_mib": float(m[5]), "deferred": bool(m[6]), "cache": m[7].split(" /")[0]}


def best_of(reps, fn):
    runs = [fn() for _ in range(reps)]
    return min(runs, key=lambda r: r["wall_s"]), runs


def bench_rlt(a, model, kv_gib, extra=(), cold_paths=None):
    def once():
        if cold_paths:
            drop_from_page_cache(cold_paths)
        wall, peak, _, err = run_peak(rlt_cmd(a.rlt_bin, model, a.threads, kv_gib, extra))
        return {"wall_s": wall, "peak_rss": peak, **parse_rlt_log(err)}
    best, runs = best_of(a.reps, once)
    best["peak_rss"] = max(r["peak_rss"] for r in runs)
    return best


def bench_llamacpp(a, gguf_path, ctx, cold=False):
    def once(mode="load"):
        if cold and mode == "load":
            drop_from_page_cache([gguf_path])
        wall, peak, out, _ = run_peak([sys.executable, "-c", LLAMACPP_CHILD, gguf_path, str(ctx), str(a.threads), mode])
        return {"wall_s": wall, "peak_rss": peak, **json.loads(out.strip().splitlines()[-1])}
    best, runs = best_of(a.reps, once)
    best["peak_rss"] = max(r["peak_rss"] for r in runs)
    best["import_only_peak_rss"] = once("import")["peak_rss"]
    return best


def kv_bytes(config, ctx):
    kv_heads = config.get("num_key_value_heads", config["num_attention_heads"])
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    return 2 * config["num_hidden_layers"] * ctx * kv_heads * head_dim * 2  # K and V, 16-bit


def gguf_config(path):
    import gguf
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    get = lambda k: int(r.fields[f"{arch}.{k}"].parts[-1][0])  # noqa: E731
    heads = get("attention.head_count")
    return {"num_hidden_layers": get("block_count"), "num_attention_heads": heads,
            "num_key_value_heads": get("attention.head_count_kv"), "hidden_size": get("embedding_length")}


def one_model(a, label, rlt_model, gguf_path, config, weights_bytes):
    kv = kv_bytes(config, a.ctx)
    kv_gib = kv / (1 << 30)
    row = {"model": label, "rlt_model": rlt_model, "gguf": gguf_path, "weights_bytes": weights_bytes,
           "kv_bytes": kv, "ctx": a.ctx}
    log(f"== {label}: weights {weights_bytes / 1e9:.3f} GB, KV {kv / (1 << 20):.0f} MiB ({a.ctx} tokens)")
    off = ["--packed-cache", "off"]
    # Warm the page cache once, so the warm figures do not include the first read.
    run_peak(rlt_cmd(a.rlt_bin, rlt_model, a.threads, kv_gib, off))
    log("rlt (packing deferred: the default) ...")
    row["rlt"] = bench_rlt(a, rlt_model, kv_gib, off)
    log("rlt (packed at load) ...")
    row["rlt_at_load"] = bench_rlt(a, rlt_model, kv_gib, off + ["--pack-weights", "at-load"])
    cache_dir = tempfile.mkdtemp(prefix="rlt_packed_")
    try:
        log("rlt with the packed-weight cache ...")
        first = bench_rlt(argparse.Namespace(**{**vars(a), "reps": 1}), rlt_model, kv_gib,
                          ["--packed-cache", cache_dir])
        row["rlt_cache_write"] = first
        row["rlt_cache"] = bench_rlt(a, rlt_model, kv_gib, ["--packed-cache", cache_dir])
        if not a.no_cold:
            log("cold starts ...")
            files = weight_files(rlt_model)
            row["disk_read_bytes_per_s"] = disk_read_rate(max(files, key=os.path.getsize))
            row["rlt_cold"] = bench_rlt(a, rlt_model, kv_gib, off, cold_paths=files)
            row["rlt_cache_cold"] = bench_rlt(a, rlt_model, kv_gib, ["--packed-cache", cache_dir],
                                              cold_paths=files + [cache_dir])
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    if gguf_path:
        log("llama.cpp ...")
        bench_llamacpp(argparse.Namespace(**{**vars(a), "reps": 1}), gguf_path, a.ctx)  # warm its file
        row["llamacpp"] = bench_llamacpp(a, gguf_path, a.ctx)
        if not a.no_cold:
            row["llamacpp_cold"] = bench_llamacpp(a, gguf_path, a.ctx, cold=True)
    return row


def print_table(rows, machine):
    print(f"\n{machine['cpu']}, {machine['threads']} threads, {machine['date']}, llama-cpp-python "
          f"{machine['llama_cpp_python']}")
    for r in rows:
        base = r["weights_bytes"] + r["kv_bytes"]
        print(f"\n{r['model']}: weights {r['weights_bytes'] / 1e9:.3f} GB + KV {r['kv_bytes'] / (1 << 20):.0f} MiB "
              f"= {base / 1e9:.3f} GB")
        print(f"  {'run':34s} {'start->1st token':>17s} {'peak RSS':>10s} {'RSS/(w+KV)':>11s}")
        for key, name in (("rlt", "rlt, no cache, packing deferred"), ("rlt_at_load", "rlt, no cache, packed at load"),
                          ("rlt_cache_write", "rlt, first start (exits once cached)"),
                          ("rlt_cache", "rlt, packed cache mapped"), ("rlt_cold", "rlt cold"),
                          ("rlt_cache_cold", "rlt cold, packed cache"), ("llamacpp", "llama.cpp (python process)"),
                          ("llamacpp_cold", "llama.cpp cold")):
            x = r.get(key)
            if not x:
                continue
            extra = ""
            if "load_and_first_token_s" in x:
                extra = (f"   (without the python import {x['load_and_first_token_s']:.2f} s; "
                         f"an import-only process peaks at {x['import_only_peak_rss'] / 1e9:.3f} GB)")
            elif "load_s" in x:
                extra = f"   (load {x['load_s']:.2f} s: pack {x['pack_s']:.2f}, cache {x['cache_s']:.2f}"
                extra += "; packing deferred)" if x.get("deferred") else ")"
            print(f"  {name:34s} {x['wall_s']:15.2f} s {x['peak_rss'] / 1e9:8.3f} GB {x['peak_rss'] / base:10.3f}×"
                  + extra)
        if "disk_read_bytes_per_s" in r:
            rate = r["disk_read_bytes_per_s"]
            print(f"  disk read rate {rate / 1e9:.2f} GB/s: reading the weights takes "
                  f"{r['weights_bytes'] / rate:.2f} s")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="llama-1.4b,smollm2")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ctx", type=int, default=2048, help="KV tokens both engines get")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--cache-dir", default=os.path.join(os.path.expanduser("~"), ".cache", "rlt", "peer"))
    ap.add_argument("--rlt-bin", default=os.environ.get("RLT_BIN", peer.DEFAULT_RLT_BIN))
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    llama_cpp, gguf = peer.ensure_deps()
    machine = {"cpu": peer.cpu_model(), "threads": a.threads,
               "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
               "llama_cpp_python": llama_cpp.__version__}
    rows = []
    for name in [m.strip() for m in a.models.split(",") if m.strip()]:
        if name == "smollm2":
            if not os.path.exists(SMOLLM2):
                log(f"skipping smollm2: {SMOLLM2} is missing (scripts/setup.sh fetches it)")
                continue
            rows.append(one_model(a, "SmolLM2-135M-Instruct Q4_1 (GGUF, both)", SMOLLM2, SMOLLM2,
                                  gguf_config(SMOLLM2), os.path.getsize(SMOLLM2)))
        else:
            spec = mm.ModelSpec(preset=name, arch="llama", dtype="bf16", seed=0)
            folder = os.path.join(a.cache_dir, f"{name}-seed0-bf16")
            hf_dir, gguf_path = os.path.join(folder, "hf"), os.path.join(folder, "model.gguf")
            os.makedirs(folder, exist_ok=True)
            peer.ensure_checkpoint(spec, hf_dir)
            peer.ensure_gguf(gguf, spec, hf_dir, gguf_path)
            with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
                config = json.load(f)
            weights = sum(os.path.getsize(p) for p in weight_files(hf_dir))
            rows.append(one_model(a, f"{name} bf16 (rlt: safetensors, llama.cpp: the same bytes as GGUF)", hf_dir,
                                  gguf_path, config, weights))
    print_table(rows, machine)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
