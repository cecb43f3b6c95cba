#!/usr/bin/env python3
"""How far cuda_paged's tensor-core prefill (or the cudnn backend) may land from exact attention: the
GPU tests' tolerances.

The kernel (src/attention/cuda_paged_prefill_tc.cu) rounds Q (pre-scaled by log2(e)/sqrt(d)) and
the softmax probabilities P to the K/V element type (bf16 or f16) before the tensor cores, and keeps
everything else in f32: scores and P V accumulate in f32, the online softmax runs per tile of 64
keys in the log2 domain, the row sum uses the unrounded probabilities. This script replays exactly
those roundings in numpy (accumulations in float64, which only moves the figures by f32 ulps) on
the tests' data — N(0, 1) queries, N(0, 1) keys and values stored in the pool's type, causal packed
rows — and reports the largest absolute error against exact float64 attention.

With --backend cudnn it models the cudnn backend instead: Q rounded to the K/V type as it is
staged (unscaled; cuDNN scales the f32 scores), P rounded before the P V product as flash kernels
do, and the output rounded to the K/V type (cuDNN writes O in it before the backend widens it);
single-query rows as well as packed ones, head_dim 64, 80 and 128.

    .venv/bin/python tools/tensor_core_prefill_error.py [--cases 60] [--backend cuda_paged|cudnn]
"""
import argparse

import numpy as np

TILE = 64


def round_bf16(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def round_type(x, dtype):
    return round_bf16(x) if dtype == "bf16" else np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def exact(q, k, v, first_pos):
    n, d = q.shape
    out = np.empty((n, d))
    for i in range(n):
        keys = first_pos + i + 1
        s = (q[i].astype(np.float64) @ k[:keys].T.astype(np.float64)) / np.sqrt(d)
        p = np.exp(s - s.max())
        out[i] = (p @ v[:keys].astype(np.float64)) / p.sum()
    return out


def tensor_core(q, k, v, first_pos, dtype, cudnn=False):
    n, d = q.shape
    if cudnn:
        qs = round_type(q, dtype).astype(np.float64) * (1.4426950408889634 / np.sqrt(d))
    else:
        qs = round_type(q * np.float32(1.4426950408889634 / np.sqrt(d)), dtype).astype(np.float64)
    out = np.empty((n, d))
    for i in range(n):
        pos = first_pos + i
        m, l, acc = -np.inf, 0.0, np.zeros(d)
        for k0 in range(0, pos + 1, TILE):
            kt, vt = k[k0:min(k0 + TILE, pos + 1)], v[k0:min(k0 + TILE, pos + 1)]
            x = np.float32(qs[i] @ kt.T.astype(np.float64))
            new_m = max(m, float(x.max()))
            corr = np.float32(np.exp2(np.float32(m - new_m))) if m != -np.inf else np.float32(0)
            p = np.exp2(np.float32(x - new_m)).astype(np.float32)
            l = np.float32(l * corr + p.sum(dtype=np.float64))
            acc = acc * corr + round_type(p, dtype).astype(np.float64) @ vt.astype(np.float64)
            m = new_m
        out[i] = acc / l
    return round_type(out, dtype).astype(np.float64) if cudnn else out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=60)
    ap.add_argument("--backend", choices=("cuda_paged", "cudnn"), default="cuda_paged")
    args = ap.parse_args()
    cudnn = args.backend == "cudnn"
    rng = np.random.default_rng(7)
    worst = {}
    for case in range(args.cases):
        d = (64, 80, 128)[case % 3] if cudnn else (64, 128)[case % 2]
        dtype = ("bf16", "f16")[(case // (3 if cudnn else 2)) % 2]
        length = int(rng.integers(9, 1100))
        # cudnn runs decode rows through the same rounding: every fourth case is one query row.
        n = 1 if cudnn and case % 4 == 1 else int(rng.integers(9, min(length, 300) + 1))
        q = rng.standard_normal((n, d)).astype(np.float32)
        k = round_type(rng.standard_normal((length, d)), dtype)
        v = round_type(rng.standard_normal((length, d)), dtype)
        first = length - n
        err = float(np.abs(tensor_core(q, k, v, first, dtype, cudnn) - exact(q, k, v, first)).max())
        worst[(dtype, d)] = max(worst.get((dtype, d), 0.0), err)
    for (dtype, d), err in sorted(worst.items()):
        print(f"{dtype} head_dim {d}: max |error| {err:.2e}")
    print(f"overall: {max(worst.values()):.2e}")


if __name__ == "__main__":
    main()
