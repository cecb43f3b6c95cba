#!/usr/bin/env python3
"""Self-drafting speed-up against its cost model, on a looped model with random weights.

Random weights give meaningless acceptance, so verification is forced to keep each draft with a
chosen probability (--speculative-forced-acceptance: benchmarks only; the output is then not the
model's). For each draft_loops D and acceptance a it runs `rlt bench` (plain decoding and self
drafting in the same run) and sets the measured decode speed-up beside the cost model's:

  a cycle of k drafts costs k * (D + c) + T + c loop-equivalents (c: the lm head's bytes over one
  loop's) and gives 1 + a + ... + a^k tokens; plain decoding costs T + c per token.

k is the mean number of drafts per verification the run actually used. The ratio measured /
model shows the mechanism's overhead (scheduling, the extra stages, rows that are not free).

Usage: bench/spec/self_draft_curve.py --model DIR [--rlt build/release/src/cli/rlt]
       [--draft-loops 1,2,3] [--acceptance 0.5,0.75,0.9] [--output-len 48] [--threads 2]
       [--k 4] [--adaptive] [--repeat 2]
"""
import argparse
import json
import subprocess


def run(args, draft_loops, acceptance):
    cmd = [args.rlt, "bench", "--model", args.model, "--num-requests", "1", "--concurrency", "1",
           "--prompt-len", "32", "--output-len", str(args.output_len), "--threads", str(args.threads),
           "--no-roofline", "--speculative-method", "self", "--draft-loops", str(draft_loops),
           "--num-speculative-tokens", str(args.k), "--speculative-forced-acceptance", str(acceptance),
           "--repeat", str(args.repeat)]
    if not args.adaptive:
        cmd.append("--no-adaptive-speculation")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--rlt", default="build/release/src/cli/rlt")
    p.add_argument("--draft-loops", default="1,2,3")
    p.add_argument("--acceptance", default="0.5,0.75,0.9")
    p.add_argument("--output-len", type=int, default=48)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--k", type=int, default=4, help="--num-speculative-tokens (adaptive K chooses below it)")
    p.add_argument("--adaptive", action="store_true", help="adaptive K (default: K drafts every cycle)")
    p.add_argument("--repeat", type=int, default=2, help="runs of each side, alternating; the best is kept")
    args = p.parse_args()
    print("| draft loops | forced acceptance | measured acceptance | drafts / verification | "
          "plain decode tok/s | self decode tok/s | speed-up | cost model | measured / model |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in [int(x) for x in args.draft_loops.split(",")]:
        for a in [float(x) for x in args.acceptance.split(",")]:
            r = run(args, d, a)
            s = r["speculative"]
            loops = r["loops"]
            c = r["lm_head_bytes"] / r["core_weight_bytes_per_loop"]
            k = s["draft_tokens"] / s["verifications"] if s["verifications"] else 0.0
            # Expected tokens of a cycle of k drafts (k may be fractional: interpolate).
            ki = int(k)
            tokens = sum(a ** j for j in range(ki + 1)) + (k - ki) * a ** (ki + 1)
            model = tokens * (loops + c) / (k * (d + c) + loops + c)
            speedup = s["decode_speedup"]
            print(f"| {d} | {a:.2f} | {s['acceptance_rate']:.3f} | {k:.2f} | "
                  f"{r['full_depth']['decode_tokens_per_s']:.2f} | {s['decode_tokens_per_s']:.2f} | "
                  f"{speedup:.2f}x | {model:.2f}x | {speedup / model:.0%} |", flush=True)


if __name__ == "__main__":
    main()
