#!/usr/bin/env python3
"""How rlt and llama.cpp behave when other processes share the cores (issue: the CPU engine must
degrade gracefully under contention). One run, the same GGUF file (default: SmolLM2-135M-Instruct
Q4_1 from rlt's cache):

- rlt: `rlt serve --threads T` with C concurrent streaming clients (distinct prompts, greedy,
  ignore_eos, --max-tokens each): aggregate generated tokens/s and time to first token p50 / p99,
  on a quiet machine and with B busy-loop processes beside it (each a plain `while True` in its own
  process: what a build or another service does to a shared box).
- llama.cpp (llama-cpp-python, in process, batch 1 as its Python API serves): generation tokens/s
  at the same thread counts, quiet and busy.

Usage:
    .venv/bin/python bench/peer/contention_probe.py [--gguf FILE] [--threads 2,1,0] [--clients 8,32]
        [--busy 0,1] [--max-tokens 48] [--out probe.json]
`--threads 0` is rlt's default (all cores). Nothing else should run on the machine meanwhile.
"""

import argparse
import datetime
import http.client
import json
import multiprocessing
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from rlt_cache import smollm2_path  # noqa: E402

RLT_BIN = os.environ.get("RLT_BIN", os.path.join(ROOT, "build", "release", "src", "cli", "rlt"))
WORDS = ["river", "mountain", "library", "engine", "garden", "winter", "market", "ocean", "forest", "city",
         "music", "bridge", "island", "castle", "harbor", "desert"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def spin():
    while True:
        pass


class Busy:
    """`count` busy-loop processes while the block runs."""

    def __init__(self, count):
        self.count, self.procs = count, []

    def __enter__(self):
        ctx = multiprocessing.get_context("spawn")
        self.procs = [ctx.Process(target=spin, daemon=True) for _ in range(self.count)]
        for p in self.procs:
            p.start()
        time.sleep(0.3 if self.count else 0)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
            p.join()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def stream_one(port, model, prompt, max_tokens, out):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    first, tokens = None, 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for c in chunk.get("choices", []):
            n = len(c.get("token_ids", []))
            if n and first is None:
                first = time.perf_counter() - start
            tokens += n
    conn.close()
    out.append({"ttft": first, "tokens": tokens, "seconds": time.perf_counter() - start})


def rlt_round(port, model, clients, max_tokens, round_index):
    results, threads = [], []
    start = time.perf_counter()
    for i in range(clients):
        prompt = f"Round {round_index}, story {i}: the {WORDS[i % len(WORDS)]} and the {WORDS[(i * 7 + 3) % len(WORDS)]}"
        t = threading.Thread(target=stream_one, args=(port, model, prompt, max_tokens, results))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    tokens = sum(r["tokens"] for r in results)
    ttfts = [r["ttft"] for r in results if r["ttft"] is not None]
    return {"tokens_per_s": tokens / wall, "ttft_p50_s": percentile(ttfts, 0.5), "ttft_p99_s": percentile(ttfts, 0.99),
            "tokens": tokens, "wall_s": wall}


def run_rlt(gguf, threads, clients_list, busy_list, max_tokens, rounds, extra):
    port = free_port()
    model = os.path.basename(gguf)[:-len(".gguf")]
    cmd = [RLT_BIN, "serve", "--model", gguf, "--port", str(port), "--threads", str(threads)] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("rlt serve did not start")
            time.sleep(0.3)
        rlt_round(port, model, 2, 8, -1)  # warm-up
        out = []
        for busy in busy_list:
            for clients in clients_list:
                with Busy(busy):
                    best = None
                    for r in range(rounds):
                        m = rlt_round(port, model, clients, max_tokens, r)
                        if best is None or m["tokens_per_s"] > best["tokens_per_s"]:
                            best = m
                row = {"engine": "rlt", "threads": threads, "busy": busy, "clients": clients, **best}
                log(json.dumps(row))
                out.append(row)
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_llamacpp(gguf, threads, busy_list, max_tokens, rounds):
    from llama_cpp import Llama

    n = threads if threads > 0 else os.cpu_count()
    llm = Llama(model_path=gguf, n_threads=n, n_threads_batch=n, n_ctx=512, verbose=False)
    out = []
    for busy in busy_list:
        with Busy(busy):
            best = 0.0
            for r in range(rounds):
                llm.reset()
                start = time.perf_counter()
                res = llm.create_completion(f"Round {r}: the river and the mountain", max_tokens=max_tokens,
                                            temperature=0.0)
                tokens = res["usage"]["completion_tokens"]
                best = max(best, tokens / (time.perf_counter() - start))
        row = {"engine": "llama.cpp", "threads": n, "busy": busy, "clients": 1, "tokens_per_s": best}
        log(json.dumps(row))
        out.append(row)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", default=smollm2_path())
    ap.add_argument("--threads", default="2,1,0")
    ap.add_argument("--clients", default="8,32")
    ap.add_argument("--busy", default="0,1")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-llamacpp", action="store_true")
    ap.add_argument("--rlt-arg", action="append", default=[], help="extra `rlt serve` argument (repeatable)")
    ap.add_argument("--out")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    clients = [int(c) for c in args.clients.split(",")]
    busy = [int(b) for b in args.busy.split(",")]
    rows = []
    for t in threads:
        rows += run_rlt(args.gguf, t, clients, busy, args.max_tokens, args.rounds, args.rlt_arg)
    if not args.no_llamacpp:
        for t in threads:
            rows += run_llamacpp(args.gguf, t, busy, args.max_tokens, args.rounds)
    report = {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
              "cpus": os.cpu_count(), "gguf": args.gguf, "max_tokens": args.max_tokens, "rows": rows}
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
