"""lm-eval 0.4.13 through `rlt serve` (local-completions) against lm-eval's in-process `hf`
backend on the very same weights, on the small local tasks of tests/data/lm_eval/:

  rlt_capitals_mc   multiple choice (loglikelihood of each choice: echo + logprobs)
  rlt_capitals_gen  generate_until (greedy, stops at a newline or a period)
  rlt_license_ppl   loglikelihood_rolling (word / byte perplexity, bits per byte)
  rlt_capitals_chat generate_until through the chat template (local-chat-completions)

rlt is asked at batch_size 1 and 4 (lm-eval then sends four token-id prompts per request), and
through local-chat-completions for the generation task with the chat template; the hf backend
loads the GGUF with transformers (dequantized to f32; rlt serves it with f32 K/V). Both use lm-eval's own
tokenization (rlt's through /tokenizer_info, /tokenize, /detokenize) and the same prefix token
for rolling windows. Prints one JSON object and exits 1 when a score differs beyond the stated
tolerances (accuracies: equal; perplexities: 1e-4 relative, two f32 implementations).

  scripts/setup_eval.sh
  .venv-eval/bin/python tools/lm_eval_check.py [--gguf PATH] [--threads 2] [--out FILE]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from rlt_cache import smollm2_path  # noqa: E402

TASKS = ["rlt_capitals_mc", "rlt_capitals_gen", "rlt_license_ppl"]
CHAT_TASKS = ["rlt_capitals_chat"]
EXACT = ("acc", "acc_norm", "exact_match")
PERPLEXITY_RTOL = 1e-4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def start_server(rlt, gguf, threads, port, log):
    # f32 K/V (a quantized model's default is bf16): the comparison is of f32 arithmetic.
    proc = subprocess.Popen([rlt, "serve", "--model", gguf, "--port", str(port), "--threads", str(threads),
                             "--kv-dtype", "f32"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"rlt serve exited with {proc.returncode}; see {log.name}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError("rlt serve did not become ready in 120 s")


def scores(results, tasks):
    """{task: {"metric,filter": value}} without stderrs and aliases."""
    out = {}
    for task in tasks:
        out[task] = {k: v for k, v in results["results"][task].items()
                     if k != "alias" and "_stderr" not in k and isinstance(v, (int, float))}
    return out


def evaluate(model, model_args, batch_size, tasks=TASKS, chat=False):
    import lm_eval
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=os.path.join(ROOT, "tests", "data", "lm_eval"))
    start = time.time()
    r = lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=tasks, task_manager=tm,
                                batch_size=batch_size, num_fewshot=0, log_samples=False,
                                apply_chat_template=chat)
    return scores(r, tasks), time.time() - start


def compare(name, got, want):
    problems = []
    for task, metrics in want.items():
        for key, value in metrics.items():
            other = got[task].get(key)
            metric = key.split(",")[0]
            if other is None:
                problems.append(f"{name}: {task} {key} missing")
            elif metric in EXACT:
                if other != value:
                    problems.append(f"{name}: {task} {key} {other} != {value}")
            elif abs(other - value) > PERPLEXITY_RTOL * abs(value):
                problems.append(f"{name}: {task} {key} {other} vs {value} (relative {abs(other - value) / abs(value):.2e})")
    return problems


def max_relative(a, b):
    worst = 0.0
    for task, metrics in b.items():
        for key, value in metrics.items():
            if key.split(",")[0] not in EXACT and value:
                worst = max(worst, abs(a[task][key] - value) / abs(value))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", default=smollm2_path())
    ap.add_argument("--rlt", default=os.environ.get("RLT_BIN", os.path.join(ROOT, "build", "release", "src", "cli", "rlt")))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.chdir(ROOT)  # the tasks name their data files relative to the repository
    gguf = os.path.abspath(args.gguf)
    name = os.path.basename(gguf)[:-len(".gguf")]

    port = free_port()
    with open(os.path.join("/tmp", f"rlt_lm_eval_{port}.log"), "w") as log:
        server = start_server(args.rlt, gguf, args.threads, port, log)
        try:
            base = f"http://127.0.0.1:{port}"
            eos = get_json(base + "/tokenizer_info")["eos_token"]
            prefix = get_json(base + "/tokenize", {"prompt": eos, "add_special_tokens": False})["tokens"][0]
            local_args = (f"model={name},base_url={base}/v1/completions,tokenizer_backend=remote,"
                          f"num_concurrent=1,max_retries=1,timeout=600,custom_prefix_token_id={prefix}")
            rlt = {}
            seconds = {}
            for batch in (1, 4):
                rlt[batch], seconds[f"rlt_batch{batch}"] = evaluate("local-completions", local_args, batch)
            # The chat endpoint: a generation task with the model's chat template (rendered by
            # lm-eval from /tokenizer_info's template, sent as messages).
            chat_args = (f"model={name},base_url={base}/v1/chat/completions,tokenizer_backend=remote,"
                         f"num_concurrent=1,max_retries=1,timeout=600")
            rlt["chat"], seconds["rlt_chat"] = evaluate("local-chat-completions", chat_args, 1, CHAT_TASKS, True)
        finally:
            server.terminate()
            server.wait(timeout=30)

    import torch
    torch.set_num_threads(args.threads)
    hf_args = (f"pretrained={os.path.dirname(gguf)},gguf_file={os.path.basename(gguf)},dtype=float32,"
               f"device=cpu,prefix_token_id={prefix}")
    hf, seconds["hf"] = evaluate("hf", hf_args, 1)
    hf_chat, seconds["hf_chat"] = evaluate("hf", hf_args, 1, CHAT_TASKS, True)

    problems = (compare("rlt batch 1 vs hf", rlt[1], hf) + compare("rlt batch 4 vs batch 1", rlt[4], rlt[1]) +
                compare("rlt chat vs hf chat", rlt["chat"], hf_chat))
    report = {
        "model": gguf, "threads": args.threads, "prefix_token_id": prefix,
        "rlt_batch1": rlt[1], "rlt_batch4": rlt[4], "hf": hf, "rlt_chat": rlt["chat"], "hf_chat": hf_chat,
        "max_relative_difference": {"rlt_batch1_vs_hf": max_relative(rlt[1], hf),
                                    "rlt_batch4_vs_batch1": max_relative(rlt[4], rlt[1])},
        "seconds": seconds, "problems": problems,
        "versions": {"lm_eval": __import__("importlib.metadata").metadata.version("lm_eval"),
                     "torch": torch.__version__,
                     "transformers": __import__("transformers").__version__},
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
