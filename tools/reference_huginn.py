#!/usr/bin/env python3
"""Independent float64 numpy reference for Huginn-0125 (`model_type` "huginn_raven"), the
recurrent-depth model of seal-rg/recurrent-pretraining, with its per-token adaptive exit criteria.

Written from the published facts of the official inference code (raven_modeling_minimal.py, as
summarized in docs/models.md), never from rlt's C++, so that it can serve as the oracle for rlt's
Huginn support. Everything is float64.

Architecture (H hidden, P prelude / L core / C coda blocks, R recurrence steps):
    e = wte[token] * sqrt(H)                       # embedding scale
    e = prelude blocks (P)                         # K/V at depth 0
    s = s0                                         # the initial state: truncated-normal noise
    for step t = 1..R:
        s = adapter(concat[s, e])                  # Linear 2H -> H, no bias
        s = core blocks (L)                        # K/V per (step, core block)
    h = ln_f(s); h = coda blocks (C); h = ln_f(h)  # the same ln_f twice; coda K/V at depth 0
    logits = h . wte^T                             # tied head

Every block is a "sandwich" with its norms on the residual sums:
    x = norm_2(attn(norm_1(x)) + x)
    x = norm_4(mlp(norm_3(x)) + x)
attention: fused Wqkv [3H, H] (q, k, v row blocks), a bias on q and k (qk_bias [2, 1, nh, hd]),
RoPE on adjacent pairs (2i, 2i + 1) with base rope_base at the token's absolute position (the same
in every step), causal softmax(q k^T / sqrt(hd)) v, proj [H, H]. mlp: fc [2I, H] = (gate, up),
proj(silu(gate) * up). RMSNorm: w * x / sqrt(mean(x^2) + eps).

The initial state: trunc_normal(0, std, a = -3 std, b = 3 std) with std = sqrt(2 / (5 H)), times
sqrt(H) (std sqrt(0.4) whatever H). The official code draws it from torch's global generator;
here the caller supplies it (`init_state(position) -> [H]`), so an engine's seeded draw can be
replayed exactly: `seeded_state` is rlt's counter-based draw (the stream is specified in
src/model/initial_state.h; this is its independent Python form), `truncated_normal_state` draws
one from numpy for stand-alone use.

K/V when a decode token exits early (at step e < R): later tokens that run deeper read, at core
step t > e, the token's K/V of step e for the same core block (the official code's "latest-m4"
lookup; rlt's `last_exited` layout). The prompt (prefill) always runs all R steps.

Exit criteria (decode tokens only; `criterion` of generate()), checked after every step:
    latent-diff       |s_t - s_{t-1}| / |s_t| < thr  (s_0 = the initial state; default 0.03)
    entropy-diff      |H(p_t) - H(p_{t-1})| < thr, H = -sum p log(p + 1e-10), H_0 = 100 (1e-3)
    kl                KL(p_{t-1} || p_t) < thr, p_0 uniform (5e-4)
    minp-kl           the same KL on min-p (0.1) masked distributions (probabilities below
                      0.1 max set to 1 / V, renormalized) (1e-6)
    argmax-stability  the argmax equal to the previous one `thr` times in a row (5)
    none              all R steps
where p_t = softmax of the readout (ln_f, coda, ln_f, head) of s_t: every criterion but
latent-diff and none computes the coda at every step; the token's coda K/V is that of its exit
step.

Usage:
    reference_huginn.py --model DIR --prompt-ids 1,2,3 [--max-tokens N] [--criterion C]
        [--threshold F] [--steps R] [--seed S] --out FILE.npz
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_ouro import LazyWeights  # noqa: E402
from safetensors_io import raw_to_float64, read_safetensors  # noqa: E402

CRITERIA = {"none": None, "latent-diff": 0.03, "entropy-diff": 1e-3, "kl": 5e-4, "minp-kl": 1e-6,
            "argmax-stability": 5}


class HuginnConfig:
    """The config.json fields the forward pass needs."""

    def __init__(self, d):
        if d.get("model_type") != "huginn_raven":
            raise ValueError(f"model_type must be 'huginn_raven', got {d.get('model_type')!r}")
        self.hidden_size = int(d["n_embd"])
        # RavenConfig maps num_attention_heads (the released file's key) to n_heads.
        self.num_heads = int(d["n_heads"] if "n_heads" in d else d["num_attention_heads"])
        if "n_heads" in d and int(d.get("num_attention_heads", self.num_heads)) != self.num_heads:
            raise ValueError("n_heads and num_attention_heads disagree")
        if self.hidden_size % self.num_heads:
            raise ValueError("n_embd must be a multiple of n_heads")
        self.head_dim = self.hidden_size // self.num_heads
        if int(d.get("num_key_value_heads", self.num_heads)) != self.num_heads:
            raise ValueError("Huginn attention has as many K/V heads as query heads")
        if self.head_dim % 2:
            raise ValueError("the head size must be even (RoPE pairs)")
        self.prelude_layers = int(d["n_layers_in_prelude"])
        self.core_layers = int(d["n_layers_in_recurrent_block"])
        self.coda_layers = int(d["n_layers_in_coda"])
        self.intermediate_size = int(d["intermediate_size"])
        self.vocab_size = int(d.get("padded_vocab_size", d["vocab_size"]))
        self.rope_theta = float(d.get("rope_base", 50000.0))
        self.rms_norm_eps = float(d.get("norm_eps", 1e-6))
        self.loops = int(d.get("mean_recurrence", 32))
        self.max_positions = int(d.get("block_size", 4096))
        for key, want in (("qk_bias", True), ("bias", False), ("tie_embeddings", True),
                          ("injection_type", "linear"), ("test_time_noise", 0),
                          ("block_class_name", "SandwichBlock"), ("mlp_class_name", "GatedMLP"),
                          ("nonlin_name", "SiLU"), ("norm_class_name", "RMSNorm_llama")):
            if d.get(key, want) != want:
                raise ValueError(f"{key} must be {want!r} (the released model's), got {d.get(key)!r}")
        self.embed_scale = math.sqrt(self.hidden_size)
        self.state_std = math.sqrt(2.0 / (5.0 * self.hidden_size)) * self.embed_scale


def block_names(cfg):
    """(prefix, kind) of every block in order: prelude, core, coda."""
    out = [(f"transformer.prelude.{i}.", "prelude") for i in range(cfg.prelude_layers)]
    out += [(f"transformer.core_block.{i}.", "core") for i in range(cfg.core_layers)]
    out += [(f"transformer.coda.{i}.", "coda") for i in range(cfg.coda_layers)]
    return out


def expected_shapes(cfg):
    H, I, nh, hd = cfg.hidden_size, cfg.intermediate_size, cfg.num_heads, cfg.head_dim
    shapes = {"transformer.wte.weight": (cfg.vocab_size, H), "transformer.ln_f.weight": (H,),
              "transformer.adapter.weight": (H, 2 * H)}
    for prefix, _ in block_names(cfg):
        shapes.update({prefix + f"norm_{k}.weight": (H,) for k in (1, 2, 3, 4)})
        shapes.update({prefix + "attn.Wqkv.weight": (3 * H, H), prefix + "attn.qk_bias": (2, 1, nh, hd),
                       prefix + "attn.proj.weight": (H, H), prefix + "mlp.fc.weight": (2 * I, H),
                       prefix + "mlp.proj.weight": (H, I)})
    return shapes


# Stored by some exports (the tied head, the RoPE table buffer): checked against what the model
# computes (the head equal to wte; the table equal to cos/sin of the config's rope_base, which is
# how a real checkpoint settles that base), never used.
OPTIONAL = ("lm_head.weight", "freqs_cis")


def check_optional(cfg, name, dtype, raw, weights):
    values = raw_to_float64(dtype, raw) if dtype != "F64" else np.asarray(raw, dtype=np.float64)
    if name == "lm_head.weight":
        if values.shape != (cfg.vocab_size, cfg.hidden_size):
            raise ValueError(f"lm_head.weight: shape {values.shape}, expected the embedding's")
        weights["__lm_head"] = values  # compared with wte once both are read
        return
    # freqs_cis [1, positions, 1, d/2, 2]: (cos, sin) of position * rope_base^(-2i/d).
    d = cfg.head_dim
    table = values.reshape(-1, d // 2, 2)
    inv_freq = 1.0 / np.power(cfg.rope_theta, np.arange(0, d, 2, dtype=np.float64) / d)
    angle = np.arange(table.shape[0], dtype=np.float64)[:, None] * inv_freq[None, :]
    want = np.stack([np.cos(angle), np.sin(angle)], axis=-1)
    # A 16-bit table's own rounding near +-1 reaches 2e-3.
    if not np.allclose(table, want, atol=1e-3 if dtype in ("F32", "F64") else 4e-3):
        raise ValueError(f"freqs_cis does not match RoPE with rope_base {cfg.rope_theta}")


class HuginnModel:
    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = weights


def load_model(model_dir, lazy=False):
    """lazy: widen each tensor when it is used, from the memory-mapped file (the released shape's
    3.5 billion weights do not fit in memory as float64; one block's do)."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = HuginnConfig(json.load(f))
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    expected = expected_shapes(cfg)
    weights = {}
    for fname in files:
        for name, (dtype, raw) in read_safetensors(os.path.join(model_dir, fname)).items():
            if name in OPTIONAL:
                check_optional(cfg, name, dtype, raw, weights)
                continue
            if name not in expected:
                raise ValueError(f"unexpected tensor {name}")
            if tuple(raw.shape) != expected[name]:
                raise ValueError(f"{name}: shape {tuple(raw.shape)}, expected {expected[name]}")
            weights[name] = (dtype, raw) if lazy else raw_to_float64(dtype, raw)
    head = weights.pop("__lm_head", None)
    missing = sorted(set(expected) - set(weights))
    if missing:
        raise ValueError(f"missing tensors: {missing[:5]}")
    if lazy:
        weights = LazyWeights(weights)
    if head is not None and not np.array_equal(head, weights["transformer.wte.weight"]):
        raise ValueError("lm_head.weight differs from transformer.wte.weight (the head must be tied)")
    return HuginnModel(cfg, weights)


# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def rope_adjacent(x, positions, theta):
    """x [n, heads, d]: pairs (2i, 2i + 1) rotated by position * theta^(-2i/d)."""
    d = x.shape[-1]
    inv_freq = 1.0 / np.power(theta, np.arange(0, d, 2, dtype=np.float64) / d)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    c, s = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x1 * c + x0 * s
    return out


def truncated_normal_state(rng, cfg, n):
    """n initial states drawn from numpy: trunc_normal(0, std, +-3 std) in the hidden space."""
    std = cfg.state_std
    out = rng.standard_normal((n, cfg.hidden_size)) * std
    bad = np.abs(out) > 3 * std
    while bad.any():
        out[bad] = rng.standard_normal(int(bad.sum())) * std
        bad = np.abs(out) > 3 * std
    return out


_MASK = (1 << 64) - 1
_PHI = 0x9E3779B97F4A7C15


def _mix64(z):
    """splitmix64's output function on 64-bit integers."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def seeded_state(seed, position, cfg):
    """rlt's initial state of the token at `position` for a request seed: per element, Box-Muller
    normals from splitmix64 counters, the first within +-3 kept (16 tries), times the state's std."""
    base = _mix64((int(seed) + _PHI * (int(position) + 1)) & _MASK)
    out = np.zeros(cfg.hidden_size)
    for i in range(cfg.hidden_size):
        for a in range(16):
            n = 16 * i + a
            u1 = ((_mix64((base + _PHI * (2 * n + 1)) & _MASK) >> 11) + 1) * 2.0 ** -53
            u2 = (_mix64((base + _PHI * (2 * n + 2)) & _MASK) >> 11) * 2.0 ** -53
            z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
            if abs(z) <= 3.0:
                out[i] = z
                break
    return out * cfg.state_std


class KVCache:
    """K/V per slot ("prelude i", ("core", step, j), "coda i") and absolute position."""

    def __init__(self):
        self.k, self.v = {}, {}

    def write(self, slot, positions, k, v):
        ks, vs = self.k.setdefault(slot, {}), self.v.setdefault(slot, {})
        for r, p in enumerate(positions):
            ks[int(p)], vs[int(p)] = k[r], v[r]

    def read(self, slot, upto):
        """K/V of positions 0..upto-1 at `slot`; a core slot falls back to the position's deepest
        earlier step of the same block (an early-exited token)."""
        keys, values = [], []
        for p in range(upto):
            s = slot
            if isinstance(slot, tuple):
                step = slot[1]
                while p not in self.k.get(("core", step, slot[2]), {}):
                    step -= 1
                    if step < 0:
                        raise ValueError(f"position {p} has no K/V for core block {slot[2]}")
                s = ("core", step, slot[2])
            keys.append(self.k[s][p])
            values.append(self.v[s][p])
        return np.stack(keys), np.stack(values)


def block(model, prefix, x, positions, cache, slot):
    cfg, w, eps = model.cfg, model.w, model.cfg.rms_norm_eps
    n, H, nh, hd = x.shape[0], cfg.hidden_size, cfg.num_heads, cfg.head_dim
    a = rms_norm(x, w[prefix + "norm_1.weight"], eps)
    qkv = a @ w[prefix + "attn.Wqkv.weight"].T
    q = qkv[:, :H].reshape(n, nh, hd) + w[prefix + "attn.qk_bias"][0, 0]
    k = qkv[:, H:2 * H].reshape(n, nh, hd) + w[prefix + "attn.qk_bias"][1, 0]
    v = qkv[:, 2 * H:].reshape(n, nh, hd)
    q, k = rope_adjacent(q, positions, cfg.rope_theta), rope_adjacent(k, positions, cfg.rope_theta)
    cache.write(slot, positions, k, v)
    upto = int(np.max(positions)) + 1
    K, V = cache.read(slot, upto)  # [upto, nh, hd]
    scores = np.einsum("qhd,khd->hqk", q, K) / math.sqrt(hd)
    scores = np.where(np.arange(upto)[None, None, :] <= np.asarray(positions)[None, :, None], scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    o = np.einsum("hqk,khd->qhd", p, V).reshape(n, H) @ w[prefix + "attn.proj.weight"].T
    x = rms_norm(o + x, w[prefix + "norm_2.weight"], eps)
    m = rms_norm(x, w[prefix + "norm_3.weight"], eps)
    gu = m @ w[prefix + "mlp.fc.weight"].T
    I = cfg.intermediate_size
    m = (silu(gu[:, :I]) * gu[:, I:]) @ w[prefix + "mlp.proj.weight"].T
    return rms_norm(m + x, w[prefix + "norm_4.weight"], eps)


def prelude(model, ids, positions, cache):
    if isinstance(model.w, LazyWeights):
        x = model.w.rows("transformer.wte.weight", ids) * model.cfg.embed_scale
    else:
        x = model.w["transformer.wte.weight"][np.asarray(ids)] * model.cfg.embed_scale
    for i in range(model.cfg.prelude_layers):
        x = block(model, f"transformer.prelude.{i}.", x, positions, cache, f"prelude {i}")
    return x


def core_step(model, s, e, positions, cache, step):
    s = np.concatenate([s, e], axis=-1) @ model.w["transformer.adapter.weight"].T
    for j in range(model.cfg.core_layers):
        s = block(model, f"transformer.core_block.{j}.", s, positions, cache, ("core", step, j))
    return s


def readout(model, s, positions, cache):
    """ln_f, coda blocks, ln_f, tied head: logits [n, V]."""
    w, eps = model.w, model.cfg.rms_norm_eps
    h = rms_norm(s, w["transformer.ln_f.weight"], eps)
    for i in range(model.cfg.coda_layers):
        h = block(model, f"transformer.coda.{i}.", h, positions, cache, f"coda {i}")
    h = rms_norm(h, w["transformer.ln_f.weight"], eps)
    return h @ w["transformer.wte.weight"].T


def _log_softmax(logits):
    z = logits - logits.max()
    return z - math.log(np.exp(z).sum())


class ExitCriterion:
    """One decode token's exit test, fed each step's state and (where needed) logits."""

    def __init__(self, name, threshold, s0, vocab):
        if name not in CRITERIA:
            raise ValueError(f"criterion must be one of {sorted(CRITERIA)}")
        self.name = name
        self.threshold = CRITERIA[name] if threshold is None else threshold
        self.prev_state = s0
        self.prev_entropy = 100.0
        self.prev_logp = np.full(vocab, -math.log(vocab))
        self.prev_argmax, self.stable = -1, 0
        self.value = None  # what the last check compared with the threshold

    needs_logits = property(lambda self: self.name not in ("none", "latent-diff"))

    def check(self, s, logits):
        n = self.name
        if n == "none":
            return False
        if n == "latent-diff":
            self.value = np.linalg.norm(s - self.prev_state) / np.linalg.norm(s)
            self.prev_state = s
            return self.value < self.threshold
        logp = _log_softmax(logits)
        if n == "entropy-diff":
            p = np.exp(logp)
            entropy = float(-(p * np.log(p + 1e-10)).sum())
            self.value, self.prev_entropy = abs(entropy - self.prev_entropy), entropy
            return self.value < self.threshold
        if n == "argmax-stability":
            top = int(np.argmax(logits))
            self.stable = self.stable + 1 if top == self.prev_argmax else 0
            self.prev_argmax = top
            self.value = self.stable
            return self.stable >= self.threshold
        if n == "minp-kl":
            p = np.exp(logp)
            p = np.where(p < 0.1 * p.max(), 1.0 / p.size, p)
            logp = np.log(p / p.sum())
        self.value = float((np.exp(self.prev_logp) * (self.prev_logp - logp)).sum())  # KL(prev || cur)
        self.prev_logp = logp
        return self.value < self.threshold


def generate(model, prompt_ids, max_tokens, init_state, criterion="none", threshold=None, steps=None,
             min_steps=1):
    """Prefill at full depth, then greedy decode of exactly max_tokens tokens.

    init_state(position) -> [H]: the initial state of the token at `position` (the prompt's
    positions during prefill). A criterion is checked after every step but stops a token only from
    `min_steps` on. Returns tokens, exit depths (steps run; the first token comes from the
    prefill: R), each token's logits, the hidden state before the readout and the criterion's
    values, step by step (NaN for the prefill's token).
    """
    cfg = model.cfg
    R = steps or cfg.loops
    ids = np.asarray(prompt_ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= cfg.vocab_size:
        raise ValueError("need a non-empty list of token ids inside the vocabulary")
    P = ids.size
    if P + max(max_tokens - 1, 0) > cfg.max_positions:
        raise ValueError("prompt + max_tokens - 1 exceeds block_size")
    cache = KVCache()
    positions = np.arange(P)
    e = prelude(model, ids, positions, cache)
    s = np.stack([init_state(p) for p in positions])
    for t in range(R):
        s = core_step(model, s, e, positions, cache, t)
    logits = readout(model, s, positions, cache)[-1]
    tokens, depths, step_logits, states = [int(np.argmax(logits))], [R], [logits], [s[-1]]
    values = [np.full(R, np.nan)]
    for n in range(1, max_tokens):
        pos = [P + n - 1]
        e = prelude(model, [tokens[-1]], pos, cache)
        s = init_state(pos[0])[None, :]
        test = ExitCriterion(criterion, threshold, s[0], cfg.vocab_size)
        logits = None
        step_values = np.full(R, np.nan)
        for t in range(R):
            s = core_step(model, s, e, pos, cache, t)
            logits = readout(model, s, pos, cache)[0] if test.needs_logits else None
            stop = test.check(s[0], logits)
            if test.value is not None:
                step_values[t] = test.value
            if (stop and t + 1 >= min_steps) or t == R - 1:
                break
        if logits is None:
            logits = readout(model, s, pos, cache)[0]
        tokens.append(int(np.argmax(logits)))
        depths.append(t + 1)
        step_logits.append(logits)
        states.append(s[0])
        values.append(step_values)
    return {"tokens": np.array(tokens), "exit_depths": np.array(depths), "step_logits": np.stack(step_logits),
            "step_hidden": np.stack(states), "criterion_values": np.stack(values)}


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 numpy reference for Huginn-0125")
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--max-tokens", type=int, default=1)
    ap.add_argument("--criterion", default="none", choices=sorted(CRITERIA))
    ap.add_argument("--threshold", type=float, default=None)
    ap.add_argument("--steps", type=int, default=None, help="recurrence steps (default mean_recurrence)")
    ap.add_argument("--seed", type=int, default=0, help="numpy seed of the initial states")
    ap.add_argument("--state-seed", type=int, default=None,
                    help="draw the initial states as rlt does for this request seed (seeded_state)")
    ap.add_argument("--min-steps", type=int, default=1, help="steps before a criterion may stop a token")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    model = load_model(a.model)
    rng = np.random.default_rng(a.seed)
    states = {}

    def init_state(position):
        if position not in states:
            states[position] = (seeded_state(a.state_seed, position, model.cfg) if a.state_seed is not None
                                else truncated_normal_state(rng, model.cfg, 1)[0])
        return states[position]

    prompt = [int(x) for x in a.prompt_ids.split(",") if x.strip()]
    res = generate(model, prompt, a.max_tokens, init_state, a.criterion, a.threshold, a.steps, a.min_steps)
    np.savez(a.out, **res)
    print(f"wrote {a.out}: tokens={res['tokens'].tolist()} exit_depths={res['exit_depths'].tolist()}")


if __name__ == "__main__":
    main()
