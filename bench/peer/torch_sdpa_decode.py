#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on rlt's decode-attention benchmark shapes.

The peer for rlt_bench_cuda_attention: same batch, context, heads, head_dim and bf16 K/V, timed
the same way (best of 7 passes over >= 512 MiB of distinct K/V, so L2 serves none of it; each pass
replayed from a CUDA graph, so that small calls measure the GPU and not Python). K/V are
contiguous [batch, heads, context, head_dim] here (SDPA has no paged form), which favours the
peer. Prints a table, and with --json one `JSON {...}` line per case for scripts/device_check.sh.
Needs a CUDA build of PyTorch; exits 0 with a message without one.
"""
import argparse
import json
import sys

from torch_gpu import captured, cuda_torch

CASES = [(1, 1024, 16, 16, 128), (32, 1024, 16, 16, 128), (128, 1024, 16, 16, 128),
         (32, 4096, 16, 16, 128), (128, 4096, 16, 16, 128), (32, 4096, 32, 8, 128)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch = cuda_torch()
    if torch is None:
        return 0
    F = torch.nn.functional
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    print(f"{'decode attention (torch SDPA, bf16)':<34} {'us/call':>10} {'GB/s':>9}")
    for batch, context, q_heads, kv_heads, head_dim in CASES:
        call_bytes = batch * context * kv_heads * head_dim * 2 * 2
        sets = max(1, (512 << 20) // call_bytes)
        ks = [torch.randn(batch, kv_heads, context, head_dim, device="cuda", dtype=torch.bfloat16)
              for _ in range(sets)]
        vs = [torch.randn_like(k) for k in ks]
        q = torch.randn(batch, q_heads, 1, head_dim, device="cuda", dtype=torch.bfloat16)
        gqa = q_heads != kv_heads

        def one_pass():
            for k, v in zip(ks, vs):
                F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)

        graph = captured(torch, one_pass)
        graph.replay()
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(7):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end))
        gbps = sets * call_bytes / (best * 1e-3) / 1e9
        label = f"b{batch} ctx{context} heads {q_heads}/{kv_heads} d{head_dim}"
        print(f"{label:<34} {best * 1e3 / sets:>10.1f} {gbps:>9.0f}")
        if args.json:
            print("JSON " + json.dumps({"bench": "attention_decode", "peer": "torch_sdpa", "batch": batch,
                                        "context": context, "q_heads": q_heads, "kv_heads": kv_heads,
                                        "head_dim": head_dim, "gbps": round(gbps, 1)}))
        del ks, vs, graph
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
