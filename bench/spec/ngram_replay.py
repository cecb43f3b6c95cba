#!/usr/bin/env python3
"""What prompt-lookup drafting could give at batch 1, replayed offline against a verify cost curve.

Greedy speculative decoding emits exactly the plain greedy tokens, so a request's drafts and
their acceptance follow from its plain output alone. This script renders each chat prompt of a
prompts file with the GGUF's own template, generates the greedy outputs once with `rlt generate`,
then replays decoding step by step: at each step the drafter (the same rule as
src/spec/ngram_drafter.cpp: the latest earlier occurrence of the context's last n tokens, n from
--ngram-max down to --ngram-min, continuing into its own proposals) proposes up to K tokens, the
accepted ones are the prefix that matches the output, and the step gives accepted + 1 tokens at
the cost of a verify pass of 1 + K rows. Costs are relative to one plain decode step: --costs
lists them for 1, 2, 3, ... rows (measure them with `rlt bench --speculative-forced-acceptance 1
--no-adaptive-speculation --num-speculative-tokens K`: cost = (K + 1) / decode speed-up), or
--row-cost b takes 1 + b (rows - 1).

It prints the decode speed-up of every fixed K and of an oracle that drafts exactly the tokens
that will be accepted (the most any drafting policy could reach with these drafts and costs).

Usage: bench/spec/ngram_replay.py --model SmolLM2-135M-Instruct.Q4_1.gguf
       [--prompts bench/spec/grounded_prompts.jsonl] [--rlt build/release/src/cli/rlt]
       [--max-tokens 128] [--costs 1,1.32,1.43,1.57,2.08] | [--row-cost 0.11]
"""
import argparse
import json
import subprocess
import tempfile

import gguf
import jinja2


def prompt_ids(args):
    reader = gguf.GGUFReader(args.model)
    field = reader.fields["tokenizer.chat_template"]
    template = jinja2.Environment().from_string(bytes(field.parts[field.data[0]]).decode())
    prompts = []
    with open(args.prompts) as f:
        for line in f:
            entry = json.loads(line)
            # As `rlt bench` encodes them: chat messages through the template (which writes the
            # special tokens), raw text (code completion) with the tokenizer's own special tokens.
            if "messages" in entry:
                text = template.render(messages=entry["messages"], add_generation_prompt=True,
                                       bos_token="", eos_token="")
                special = ["--no-special"]
            else:
                text, special = entry["prompt"], []
            out = subprocess.check_output([args.rlt, "tokenize", "--model", args.model, *special,
                                           "--text", text], stderr=subprocess.DEVNULL)
            prompts.append(json.loads(out)["ids"])
    return prompts


def greedy_outputs(args, prompts):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
        for i, ids in enumerate(prompts):
            f.write(json.dumps({"prompt_ids": ids, "id": i}) + "\n")
        f.flush()
        out = subprocess.check_output([args.rlt, "generate", "--model", args.model, "--prompts-file", f.name,
                                       "--max-tokens", str(args.max_tokens), "--threads", str(args.threads)],
                                      stderr=subprocess.DEVNULL, text=True)
    outputs = {}
    for line in out.splitlines():
        j = json.loads(line)
        outputs[j["id"]] = j["tokens"]
    return [outputs[i] for i in range(len(prompts))]


def propose(context, k, min_n, max_n):
    """ngram_drafter.cpp's rule: up to k tokens, or none without a match."""
    length = len(context)
    for n in range(min(max_n, length - 1), min_n - 1, -1):
        suffix = context[length - n:]
        for start in range(length - n - 1, -1, -1):
            if context[start:start + n] == suffix:
                drafts = []
                for j in range(k):
                    at = start + n + j
                    drafts.append(context[at] if at < length else drafts[at - length])
                return drafts
    return []


def replay(prompts, outputs, cost, k, min_n, max_n, oracle=False):
    tokens = spent = 0.0
    for prompt, output in zip(prompts, outputs):
        pos = 0
        while pos < len(output):
            drafts = propose(prompt + output[:pos], k, min_n, max_n)[:len(output) - pos - 1]
            accepted = 0
            while accepted < len(drafts) and drafts[accepted] == output[pos + accepted]:
                accepted += 1
            rows = 1 + (accepted if oracle else len(drafts))
            pos += accepted + 1
            tokens += accepted + 1
            spent += cost(rows)
    return tokens / spent


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a GGUF with a chat template")
    parser.add_argument("--prompts", default="bench/spec/grounded_prompts.jsonl")
    parser.add_argument("--rlt", default="build/release/src/cli/rlt")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ngram-min", type=int, default=2)
    parser.add_argument("--ngram-max", type=int, default=4)
    parser.add_argument("--max-k", type=int, default=8)
    parser.add_argument("--costs", help="cost of a verify pass of 1, 2, 3, ... rows (one plain step = 1)")
    parser.add_argument("--row-cost", type=float, default=0.11, help="without --costs: 1 + b (rows - 1)")
    args = parser.parse_args()
    if args.costs:
        table = [float(c) for c in args.costs.split(",")]

        def cost(rows):  # beyond the table: its last step repeated
            if rows <= len(table):
                return table[rows - 1]
            step = table[-1] - table[-2] if len(table) > 1 else args.row_cost
            return table[-1] + step * (rows - len(table))
    else:
        def cost(rows):
            return 1 + args.row_cost * (rows - 1)
    prompts = prompt_ids(args)
    outputs = greedy_outputs(args, prompts)
    print(f"{len(prompts)} prompts, {sum(map(len, outputs))} output tokens; "
          f"ngram {args.ngram_min}-{args.ngram_max}")
    for k in range(1, args.max_k + 1):
        print(f"K = {k}: decode speed-up {replay(prompts, outputs, cost, k, args.ngram_min, args.ngram_max):.3f}")
    print(f"oracle (drafts exactly what is accepted, up to {args.max_k}): "
          f"{replay(prompts, outputs, cost, args.max_k, args.ngram_min, args.ngram_max, oracle=True):.3f}")


if __name__ == "__main__":
    main()
