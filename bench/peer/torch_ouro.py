#!/usr/bin/env python3
"""A plain PyTorch Ouro model with one CUDA graph per decode step: rlt's same-run GPU peer.

Runs an Ouro checkpoint (config.json + model.safetensors, e.g. `tools/make_model.py --preset
ouro-1.4b --dtype bf16`) the way a straightforward PyTorch implementation does: bf16 weights and
activations, static KV caches per (loop, layer), SDPA attention, all loops of the core for every
token (no early exit), the whole decode step captured as one CUDA graph. Measures, in one run:

  * decode tokens/s at each --batches size at --context tokens of context (graph replays), with the
    memory floor: (weights per step + the batch's K/V reads) / the run's device copy bandwidth;
  * a 1 x --prefill-len prefill (causal SDPA, also one CUDA graph, so that Python's launch cost
    does not count against the peer), as TFLOP/s of the linear layers against the run's bf16
    matmul rate.

Prints a table, and with --json one `JSON {...}` line per measurement (scripts/device_check.sh joins
them with rlt's). Exits 0 with a message when PyTorch or a GPU is missing.
"""
import argparse
import json
import os
import struct
import sys

from torch_gpu import captured, cuda_torch, timed_ms


def load_checkpoint(model_dir, torch):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    path = os.path.join(model_dir, "model.safetensors")
    types = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    tensors = {}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=types[entry["dtype"]]).reshape(entry["shape"])
        tensors[name] = t.to("cuda", dtype=torch.bfloat16)
    return config, tensors


class Ouro:
    def __init__(self, config, w, torch):
        self.torch = torch
        self.c = config
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.kv_heads = config.get("num_key_value_heads", self.heads)
        self.head_dim = config.get("head_dim", self.hidden // self.heads)
        self.loops = config.get("total_ut_steps", 1)
        self.layers = config["num_hidden_layers"]
        self.eps = config.get("rms_norm_eps", 1e-6)
        self.embed = w["model.embed_tokens.weight"]
        self.lm_head = w.get("lm_head.weight", self.embed)
        self.norm = w["model.norm.weight"]
        cat = torch.cat
        self.L = []
        for i in range(self.layers):
            p = f"model.layers.{i}."
            self.L.append(dict(
                qkv=cat([w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"],
                         w[p + "self_attn.v_proj.weight"]]),
                o=w[p + "self_attn.o_proj.weight"],
                gate_up=cat([w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]]),
                down=w[p + "mlp.down_proj.weight"],
                n1=w[p + "input_layernorm.weight"], n1b=w.get(p + "input_layernorm_2.weight"),
                n2=w[p + "post_attention_layernorm.weight"], n2b=w.get(p + "post_attention_layernorm_2.weight")))
        theta = config.get("rope_theta", 10000.0)
        d = self.head_dim
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))

    def rms(self, x, w):
        x32 = x.float()
        return (x32 * self.torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * w

    def rope(self, x, cos, sin):  # x [B, H, S, D]; cos, sin [S, D / 2]
        half = self.head_dim // 2
        a, b = x[..., :half], x[..., half:]
        return self.torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)

    def forward(self, tokens, pos, caches, ctx):
        """tokens [B, S]; pos [S] positions; caches[(t, l)] = (K, V) [B, kvH, Lmax, D]; ctx keys."""
        F = self.torch.nn.functional
        B, S = tokens.shape
        h = self.embed[tokens]
        # The rotary tables once per forward (as HF computes them), shared by every layer and loop.
        angle = pos.float()[:, None] * self.inv_freq[None, :]
        cos, sin = angle.cos().to(h.dtype), angle.sin().to(h.dtype)
        q_dim, kv_dim = self.heads * self.head_dim, self.kv_heads * self.head_dim
        for t in range(self.loops):
            for l, w in enumerate(self.L):
                x = self.rms(h, w["n1"])
                qkv = x @ w["qkv"].T
                q, k, v = qkv.split([q_dim, kv_dim, kv_dim], dim=-1)
                q = self.rope(q.view(B, S, self.heads, self.head_dim).transpose(1, 2), cos, sin)
                k = self.rope(k.view(B, S, self.kv_heads, self.head_dim).transpose(1, 2), cos, sin)
                v = v.view(B, S, self.kv_heads, self.head_dim).transpose(1, 2)
                K, V = caches[(t, l)]
                K.index_copy_(2, pos, k)
                V.index_copy_(2, pos, v)
                a = F.scaled_dot_product_attention(q, K[:, :, :ctx], V[:, :, :ctx], is_causal=S > 1,
                                                   enable_gqa=self.kv_heads != self.heads)
                o = a.transpose(1, 2).reshape(B, S, q_dim) @ w["o"].T
                h = h + (self.rms(o, w["n1b"]) if w["n1b"] is not None else o)
                x = self.rms(h, w["n2"])
                g, u = (x @ w["gate_up"].T).chunk(2, dim=-1)
                m = (F.silu(g) * u) @ w["down"].T
                h = h + (self.rms(m, w["n2b"]) if w["n2b"] is not None else m)
            h = self.rms(h, self.norm)
        return (h[:, -1] @ self.lm_head.T).argmax(-1)

    def weight_bytes_per_step(self):
        core = sum(v.numel() * 2 for w in self.L for k, v in w.items() if v is not None and v.dim() == 2)
        return self.loops * core + self.lm_head.numel() * 2

    def linear_flops_per_token(self):
        core = sum(v.numel() for w in self.L for k, v in w.items() if v is not None and v.dim() == 2)
        return 2 * self.loops * core


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batches", default="1,32,128")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--prefill-len", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20, help="graph replays timed per batch size")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch = cuda_torch()
    if torch is None:
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    config, w = load_checkpoint(args.model, torch)
    m = Ouro(config, w, torch)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; {m.loops} loops x {m.layers} layers")

    def report(row):
        if args.json:
            print("JSON " + json.dumps(row))

    src = torch.empty(1 << 29, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_gbs = 2 * src.numel() / (timed_ms(torch, lambda: dst.copy_(src), 10) * 1e-3) / 1e9
    del src, dst
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    matmul_tflops = 2 * 8192 ** 3 / (timed_ms(torch, lambda: a @ a, 10) * 1e-3) / 1e12
    del a
    print(f"copy {copy_gbs:.0f} GB/s, bf16 matmul {matmul_tflops:.0f} TFLOP/s")
    report({"bench": "device", "peer": "torch", "copy_gbps": round(copy_gbs, 1), "matmul_tflops": round(matmul_tflops, 1)})

    kv_bytes_per_key = m.loops * m.layers * 2 * m.kv_heads * m.head_dim * 2
    lmax = max(args.context, args.prefill_len) + 1
    with torch.inference_mode():
        # Prefill: one sequence of --prefill-len tokens, replayed from a CUDA graph.
        caches = {(t, l): (torch.zeros(1, m.kv_heads, lmax, m.head_dim, device="cuda", dtype=torch.bfloat16),
                           torch.zeros(1, m.kv_heads, lmax, m.head_dim, device="cuda", dtype=torch.bfloat16))
                  for t in range(m.loops) for l in range(m.layers)}
        tokens = torch.randint(0, config["vocab_size"], (1, args.prefill_len), device="cuda")
        pos = torch.arange(args.prefill_len, device="cuda")
        graph = captured(torch, lambda: m.forward(tokens, pos, caches, args.prefill_len))
        ms = timed_ms(torch, graph.replay, 3)
        tflops = m.linear_flops_per_token() * args.prefill_len / (ms * 1e-3) / 1e12
        print(f"prefill 1x{args.prefill_len}: {ms:.1f} ms, linear layers {tflops:.0f} TFLOP/s = "
              f"{100 * tflops / matmul_tflops:.0f}% of the matmul rate")
        report({"bench": "prefill", "peer": "torch", "tokens": args.prefill_len, "ms": round(ms, 2),
                "tflops": round(tflops, 1), "matmul_tflops": round(matmul_tflops, 1),
                "linear_flops_per_token": m.linear_flops_per_token()})
        del caches, graph
        torch.cuda.empty_cache()

        for batch in [int(b) for b in args.batches.split(",")]:
            need = batch * lmax * kv_bytes_per_key
            free, _ = torch.cuda.mem_get_info()
            if need > free * 0.9:
                print(f"decode b{batch}: skipped, its KV caches need {need / 2**30:.0f} GiB of {free / 2**30:.0f} free")
                continue
            caches = {(t, l): (torch.zeros(batch, m.kv_heads, lmax, m.head_dim, device="cuda", dtype=torch.bfloat16),
                               torch.zeros(batch, m.kv_heads, lmax, m.head_dim, device="cuda", dtype=torch.bfloat16))
                      for t in range(m.loops) for l in range(m.layers)}
            tokens = torch.randint(0, config["vocab_size"], (batch, 1), device="cuda")
            pos = torch.tensor([args.context - 1], device="cuda")
            graph = captured(torch, lambda: m.forward(tokens, pos, caches, args.context))
            ms = timed_ms(torch, graph.replay, args.steps)
            tok_s = batch / (ms * 1e-3)
            floor_bytes = m.weight_bytes_per_step() + batch * args.context * kv_bytes_per_key
            floor_tok_s = batch * copy_gbs * 1e9 / floor_bytes
            print(f"decode b{batch} ctx{args.context}: {ms:.2f} ms/step, {tok_s:.0f} tok/s = "
                  f"{100 * tok_s / floor_tok_s:.0f}% of the memory floor ({floor_tok_s:.0f} tok/s)")
            report({"bench": "decode", "peer": "torch", "batch": batch, "context": args.context,
                    "tokens_per_s": round(tok_s, 1), "floor_tokens_per_s": round(floor_tok_s, 1)})
            del caches, graph
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
