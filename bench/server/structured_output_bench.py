#!/usr/bin/env python3
"""Structured output's cost, measured in one run against one `rlt serve` (the real SmolLM2 GGUF):

- constrained: each schema of tests/data/structured/schemas.json as a chat request with
  response_format json_schema (greedy); its completion token count k is recorded;
- unconstrained: the same prompt, max_tokens = k and ignore_eos, so that both sides generate the
  same number of tokens with the same batch shapes;
- both at concurrency 1 (batch 1) and C (continuous batching), each on a fresh server: the first
  constrained pass is cold (every frame table and step mask built as met), a second one warm (the
  schemas served before); tokens/s = completion tokens / wall time, and the ratio constrained /
  unconstrained;
- mask time per constrained token from the server's counters (rlt_structured_mask_seconds_total /
  rlt_constrained_tokens_total), and the first-use cost of a schema (compile + every position's
  token table) as the extra latency of a 1-token request with a schema never seen before.

Usage:
    .venv/bin/python bench/server/structured_output_bench.py [--gguf FILE] [--threads 2]
        [--concurrency 8] [--out result.json]
Nothing else should run on the machine meanwhile.
"""

import argparse
import datetime
import http.client
import json
import os
import platform
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from rlt_cache import smollm2_path  # noqa: E402

RLT_BIN = os.environ.get("RLT_BIN", os.path.join(ROOT, "build", "release", "src", "cli", "rlt"))
SCHEMAS = json.load(open(os.path.join(ROOT, "tests", "data", "structured", "schemas.json")))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, gguf, threads):
        self.port = free_port()
        cmd = [RLT_BIN, "serve", "--model", gguf, "--threads", str(threads), "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while True:
            try:
                if self.get("/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("rlt serve did not start")
            time.sleep(0.2)
        self.model = json.loads(self.get("/v1/models")[1])["data"][0]["id"]

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()

    def chat(self, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        body = dict(body, model=self.model)
        c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = json.loads(r.read())
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {data}")
        return data

    def counters(self):
        out = {}
        for line in self.get("/metrics")[1].splitlines():
            if line.startswith(("rlt_constrained_tokens_total ", "rlt_structured_mask_seconds_total ")):
                name, value = line.split()
                out[name] = float(value)
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def constrained_body(case):
    return {"messages": [{"role": "user", "content": case["prompt"]}], "max_tokens": 400, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": case["name"], "schema": case["schema"]}}}


def run_pass(server, bodies, concurrency):
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(server.chat, bodies))
    wall = time.perf_counter() - start
    tokens = sum(r["usage"]["completion_tokens"] for r in results)
    return results, tokens, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=smollm2_path())
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out")
    args = ap.parse_args()
    report = {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
              "cpus": os.cpu_count(), "gguf": os.path.basename(args.gguf), "threads": args.threads,
              "schemas": len(SCHEMAS)}
    server = Server(args.gguf, args.threads)
    try:
        # First use of each schema: a 1-token request with the schema against one without.
        plain = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0}
        server.chat(plain)
        cold = []
        for case in SCHEMAS:
            t0 = time.perf_counter()
            server.chat(plain)
            t1 = time.perf_counter()
            server.chat(dict(constrained_body(case), max_tokens=1))
            t2 = time.perf_counter()
            cold.append((t2 - t1) - (t1 - t0))
        cold.sort()
        report["first_use_extra_ms"] = {"median": 1e3 * cold[len(cold) // 2], "max": 1e3 * cold[-1]}
        log(f"first use of a schema: +{report['first_use_extra_ms']['median']:.1f} ms median, "
            f"+{report['first_use_extra_ms']['max']:.1f} ms max")
    finally:
        server.stop()

    for concurrency in (1, args.concurrency):
        # A fresh server: the first constrained pass builds every table and step mask (cold), the
        # second finds them cached (warm: a schema served before).
        server = Server(args.gguf, args.threads)
        try:
            row = {}
            for phase in ("cold", "warm"):
                before = server.counters()
                results, c_tokens, c_wall = run_pass(server, [constrained_body(c) for c in SCHEMAS], concurrency)
                after = server.counters()
                mask_s = after["rlt_structured_mask_seconds_total"] - before["rlt_structured_mask_seconds_total"]
                masked = after["rlt_constrained_tokens_total"] - before["rlt_constrained_tokens_total"]
                row[phase] = {"constrained_tokens_per_s": c_tokens / c_wall, "tokens": c_tokens,
                              "mask_us_per_token": 1e6 * mask_s / max(masked, 1),
                              "mask_share_of_wall": mask_s / c_wall}
            free_bodies = [{"messages": [{"role": "user", "content": c["prompt"]}], "temperature": 0,
                            "max_tokens": r["usage"]["completion_tokens"], "ignore_eos": True}
                           for c, r in zip(SCHEMAS, results)]
            _, u_tokens, u_wall = run_pass(server, free_bodies, concurrency)
            row["unconstrained_tokens_per_s"] = u_tokens / u_wall
            for phase in ("cold", "warm"):
                r = row[phase]
                r["over_unconstrained"] = r["constrained_tokens_per_s"] / row["unconstrained_tokens_per_s"]
                log(f"concurrency {concurrency}, {phase}: constrained {r['constrained_tokens_per_s']:.1f} tok/s vs "
                    f"unconstrained {row['unconstrained_tokens_per_s']:.1f} (ratio {r['over_unconstrained']:.3f}); "
                    f"mask {r['mask_us_per_token']:.1f} us/token ({100 * r['mask_share_of_wall']:.1f} % of the wall "
                    f"time), {r['tokens']} tokens")
            report[f"concurrency_{concurrency}"] = row
        finally:
            server.stop()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
