#!/usr/bin/env python3
"""Independent float64 numpy reference for the Ouro looped-transformer forward pass (and for a
plain Hugging Face Llama, the one-loop case, and Nanbeige4.2, a looped Llama).

Written only from shared/reference/looped-models.md (sections 1-6, 12, 13), never from the
engine's C++, so that it can act as a test oracle for it. Everything is float64 except the exit
hazard, which the notes pin to float32 (section 5.2).

Forward (section 3), per token position p (absolute, 0-based; the same p in every loop):
    h = E[token]
    for loop t = 1..T:                       # same L layers every loop
        for layer l:
            h = h + norm_in2( attn_{t,l}( norm_in(h) ) )
            h = h + norm_post2( mlp( norm_post(h) ) )
        h = model.norm(h)                    # inside the loop; replaces h
        g_t = h . w_gate + b_gate            # exit-gate logit
    logits = lm_head(h at the exit loop)

Attention of loop t / layer l sees only the loop-t / layer-l K/V of positions <= p (section 4).
A decode token that exits after loop e < T donates its loop-e K/V to every deeper plane
(`last_exited`), so a later token's loop-d query sees its version min(d, e).

Plain Llama (model_type "llama"; loaded by the same load_model):
    h = E[token]
    for layer l:                             # one pass, T = 1
        h = h + attn_l( norm_in(h) )         # pre-norm, no norm on the block output
        h = h + mlp( norm_post(h) )
    h = model.norm(h)
    logits = lm_head(h)                      # embed_tokens when tie_word_embeddings
RoPE as Ouro (split-half rotate_half) with HF rope_scaling "llama3" or "linear" applied to
inv_freq (rope_inv_freq). There is no exit gate: gate-logit arrays keep their shapes ([T, P] and
[N, T]) but hold NaN, step_exit_prob is NaN, and every decode token runs max_loops loops (default
T; the threshold and min_loops are ignored for such a model).

Nanbeige4.2 (model_type "nanbeige"): the Llama layers, the whole stack T = num_loops times:
    h = E[token]
    for loop t = 1..T:                       # same L pre-norm layers every loop
        for layer l:  (as Llama)
        h = model.norm(h)                    # after every loop (skip_loop_final_norm false)
    logits = lm_head(h)
with K/V per (loop, layer) as Ouro's and no exit gate.

Usage:
    reference_ouro.py --model DIR --prompt-ids 1,2,3 [--max-tokens N] [--exit-threshold F]
        [--min-loops N] [--max-loops N] --out FILE.npz

npz arrays (T loops, P prompt tokens, N = max_tokens, H hidden, V vocab):
    prompt_ids         [P]        int64   the prompt (echoed for convenience)
    prompt_hidden      [T, P, H]  float64 hidden after model.norm of each loop
    prompt_gate_logits [T, P]     float64 exit-gate logit of each loop (NaN: model has no gate)
    prompt_logits      [T, P, V]  float64 lm_head of each loop's hidden
    tokens             [N]        int64   greedy tokens
    exit_depths        [N]        int64   1-based exit loop (row 0 = T: sampled from prefill)
    step_logits        [N, V]     float64 logits each token was chosen from
    step_gate_logits   [N, T]     float64 gate logit per loop run (NaN for loops not run, and
                                          everywhere for a model without a gate); row 0 = the
                                          last prompt position's T gate logits
    step_exit_prob     [N]        float64 1 - remaining at exit (NaN for row 0)
    step_hidden        [N, H]     float64 hidden state that fed lm_head
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import raw_to_float64, read_safetensors  # noqa: E402


# --------------------------------------------------------------------------------------------
# Config and weights
# --------------------------------------------------------------------------------------------

class OuroConfig:
    """The fields of config.json the forward pass needs (section 1)."""

    arch = "ouro"
    has_gate = True
    tie_word_embeddings = False
    rope_scaling = None

    def __init__(self, d):
        if d.get("model_type") != "ouro":
            raise ValueError(f"model_type must be 'ouro', got {d.get('model_type')!r}")
        if d.get("hidden_act", "silu") != "silu":
            raise ValueError("hidden_act must be silu")
        if d.get("rope_scaling") is not None:
            raise ValueError("rope_scaling must be null (default RoPE only)")
        if d.get("tie_word_embeddings", False):
            raise ValueError("tie_word_embeddings must be false (lm_head is stored separately)")
        self.vocab_size = int(d["vocab_size"])
        self.hidden_size = int(d["hidden_size"])
        self.intermediate_size = int(d["intermediate_size"])
        self.num_layers = int(d["num_hidden_layers"])
        self.num_heads = int(d["num_attention_heads"])
        self.num_kv_heads = int(d.get("num_key_value_heads", self.num_heads))
        # head_dim is derived as H / nh when absent (section 1).
        self.head_dim = int(d.get("head_dim") or self.hidden_size // self.num_heads)
        self.loops = int(d.get("total_ut_steps", 4))
        self.rms_norm_eps = float(d.get("rms_norm_eps", 1e-6))
        self.rope_theta = float(d.get("rope_theta", 1e6))
        self.max_positions = int(d.get("max_position_embeddings", 65536))
        self.eos_token_id = d.get("eos_token_id")
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even")


class LlamaConfig:
    """A Hugging Face LlamaConfig (model_type "llama"): the same attribute names as OuroConfig,
    with loops = 1, no gate, optional tied embeddings and rope_scaling (llama3 / linear)."""

    arch = "llama"
    has_gate = False
    loops = 1

    def __init__(self, d):
        if d.get("model_type") != "llama":
            raise ValueError(f"model_type must be 'llama', got {d.get('model_type')!r}")
        if d.get("hidden_act", "silu") != "silu":
            raise ValueError("hidden_act must be silu")
        for key in ("attention_bias", "mlp_bias"):
            if d.get(key, False):
                raise ValueError(f"{key} must be false (no biases in this reference)")
        if int(d.get("pretraining_tp", 1)) != 1:
            raise ValueError("pretraining_tp must be 1")
        self.vocab_size = int(d["vocab_size"])
        self.hidden_size = int(d["hidden_size"])
        self.intermediate_size = int(d["intermediate_size"])
        self.num_layers = int(d["num_hidden_layers"])
        self.num_heads = int(d["num_attention_heads"])
        self.num_kv_heads = int(d.get("num_key_value_heads") or self.num_heads)
        self.head_dim = int(d.get("head_dim") or self.hidden_size // self.num_heads)
        self.rms_norm_eps = float(d.get("rms_norm_eps", 1e-6))
        self.rope_theta = float(d.get("rope_theta", 10000.0))
        self.max_positions = int(d.get("max_position_embeddings", 2048))
        self.eos_token_id = d.get("eos_token_id")
        self.tie_word_embeddings = bool(d.get("tie_word_embeddings", False))
        self.rope_scaling = check_rope_scaling(d.get("rope_scaling"))
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even")


class NanbeigeConfig(LlamaConfig):
    """Nanbeige4.2 (model_type "nanbeige"): a Llama config whose whole layer stack runs num_loops
    times (vllm-rlt also spells it total_ut_steps), model.norm after every loop
    (skip_loop_final_norm false), no exit gate, KV per (loop, layer)."""

    arch = "nanbeige"

    def __init__(self, d):
        if d.get("model_type") != "nanbeige":
            raise ValueError(f"model_type must be 'nanbeige', got {d.get('model_type')!r}")
        for key in ("rms_norm_eps", "rope_theta"):  # no Llama defaults guessed
            if d.get(key) is None:
                raise ValueError(f"{key} is required")
        if d.get("head_dim") is None and d.get("kv_channels") is not None:
            d = dict(d, head_dim=d["kv_channels"])
        if d.get("kv_channels") is not None and int(d["kv_channels"]) != int(d["head_dim"]):
            raise ValueError("kv_channels must equal head_dim")
        super().__init__(dict(d, model_type="llama"))
        loops = d.get("num_loops", d.get("total_ut_steps"))
        if loops is None or int(loops) < 1:
            raise ValueError("num_loops must be >= 1")
        if d.get("total_ut_steps") is not None and int(d["total_ut_steps"]) != int(loops):
            raise ValueError("num_loops and total_ut_steps disagree")
        if d.get("skip_loop_final_norm", False):
            raise ValueError("skip_loop_final_norm must be false (model.norm after every loop)")
        self.loops = int(loops)


def check_rope_scaling(rs):
    """None (also for rope_type "default") or a validated llama3 / linear rope_scaling dict."""
    if rs is None:
        return None
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "default":
        return None
    if kind not in ("llama3", "linear"):
        raise ValueError(f"rope_scaling type {kind!r} not supported (llama3, linear)")
    if not float(rs.get("factor", 0)) > 0:
        raise ValueError("rope_scaling factor must be > 0")
    out = {"rope_type": kind, "factor": float(rs["factor"])}
    if kind == "llama3":
        try:
            out["low_freq_factor"] = float(rs["low_freq_factor"])
            out["high_freq_factor"] = float(rs["high_freq_factor"])
            out["original_max_position_embeddings"] = int(rs["original_max_position_embeddings"])
        except KeyError as e:
            raise ValueError(f"llama3 rope_scaling needs {e.args[0]}") from None
        if not 0 < out["low_freq_factor"] < out["high_freq_factor"]:
            raise ValueError("llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor")
    return out


def parse_config(d):
    """config.json dict -> OuroConfig or LlamaConfig by model_type."""
    if d.get("model_type") == "llama":
        return LlamaConfig(d)
    if d.get("model_type") == "nanbeige":
        return NanbeigeConfig(d)
    return OuroConfig(d)


def expected_shapes(cfg):
    """Name -> shape for every tensor of an Ouro checkpoint (section 2), or of a Llama one (no
    sandwich norms, no exit gate, no lm_head when tied)."""
    H, I, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    qo, kvo = cfg.num_heads * d, cfg.num_kv_heads * d
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, H), "model.norm.weight": (H,)}
    if cfg.has_gate:
        shapes["model.early_exit_gate.weight"] = (1, H)
        shapes["model.early_exit_gate.bias"] = (1,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, H)
    norms = ["input_layernorm", "post_attention_layernorm"]
    if cfg.arch == "ouro":
        norms += ["input_layernorm_2", "post_attention_layernorm_2"]
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (qo, H),
            p + "self_attn.k_proj.weight": (kvo, H),
            p + "self_attn.v_proj.weight": (kvo, H),
            p + "self_attn.o_proj.weight": (H, qo),
            p + "mlp.gate_proj.weight": (I, H),
            p + "mlp.up_proj.weight": (I, H),
            p + "mlp.down_proj.weight": (H, I),
        })
        shapes.update({p + n + ".weight": (H,) for n in norms})
    return shapes


class LazyWeights:
    """name -> float64 array, widened from the memory-mapped file on every access: the released
    models' shapes (billions of weights) do not fit in memory as float64, one layer at a time does."""

    def __init__(self, raw):
        self.raw = raw  # name -> (dtype, memory-mapped raw array)

    def __getitem__(self, name):
        dtype, raw = self.raw[name]
        return raw_to_float64(dtype, raw)

    def __contains__(self, name):
        return name in self.raw

    def rows(self, name, ids):
        dtype, raw = self.raw[name]
        return raw_to_float64(dtype, raw[np.asarray(ids)])


class OuroModel:
    """Config plus all weights as float64 (name -> ndarray, or LazyWeights)."""

    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = weights

    def layer(self, i, name):
        return self.w[f"model.layers.{i}.{name}"]

    def embed(self, ids):
        """Embedding rows of `ids` (no embedding scaling)."""
        if isinstance(self.w, LazyWeights):
            return self.w.rows("model.embed_tokens.weight", ids)
        return self.w["model.embed_tokens.weight"][np.asarray(ids)]

    @property
    def lm_head_weight(self):
        if self.cfg.tie_word_embeddings:
            return self.w["model.embed_tokens.weight"]
        return self.w["lm_head.weight"]


def load_model(model_dir, lazy=False):
    """Load config.json and model.safetensors (or the sharded index) from model_dir.

    model_type "ouro" or "llama". Rejects missing, unexpected or misshaped tensors (a tied Llama
    must not store lm_head.weight); F32/BF16/F16 are widened exactly. lazy: widen each tensor
    when it is used, from the memory-mapped files (LazyWeights), instead of all at load.
    """
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        cfg = parse_config(json.load(f))
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        weight_map, files = None, ["model.safetensors"]

    expected = expected_shapes(cfg)
    weights = {}
    for fname in files:
        for name, (dtype, raw) in read_safetensors(os.path.join(model_dir, fname)).items():
            if name in weights:
                raise ValueError(f"tensor {name} stored twice")
            if weight_map is not None and weight_map.get(name) != fname:
                raise ValueError(f"tensor {name} found in {fname}, index says {weight_map.get(name)}")
            if name not in expected:
                raise ValueError(f"unexpected tensor {name}")
            if tuple(raw.shape) != expected[name]:
                raise ValueError(f"{name}: shape {tuple(raw.shape)}, expected {expected[name]}")
            weights[name] = (dtype, raw) if lazy else raw_to_float64(dtype, raw)
    missing = sorted(set(expected) - set(weights))
    if missing:
        raise ValueError(f"missing tensors: {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    return OuroModel(cfg, LazyWeights(weights) if lazy else weights)


# --------------------------------------------------------------------------------------------
# Building blocks (float64)
# --------------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    """RMSNorm over the last axis: w * x / sqrt(mean(x^2) + eps) (section 3.2)."""
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def silu(x):
    """x * sigmoid(x); exp overflow for very negative x correctly yields -0."""
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x))


def rope_inv_freq(head_dim, theta, scaling=None):
    """inv_freq[i] = 1 / theta^(2i/d), i = 0..d/2-1 (section 3.1), then the HF rope_scaling
    transform when `scaling` is a (checked) rope_scaling dict:

    linear: inv_freq / factor (the same as dividing positions by factor).
    llama3: with wavelen = 2 pi / inv_freq, low = orig / low_freq_factor and
        high = orig / high_freq_factor wavelengths (orig = original_max_position_embeddings):
          wavelen < high            -> unchanged (high frequencies)
          wavelen > low             -> inv_freq / factor (low frequencies)
          otherwise (medium band)   -> (1 - s) * inv_freq / factor + s * inv_freq,
                                       s = (orig / wavelen - low_freq_factor)
                                           / (high_freq_factor - low_freq_factor)
        (s runs from 0 at wavelen = low to 1 at wavelen = high, so the blend is continuous).
    Attention scaling stays 1 for both.
    """
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv_freq = 1.0 / np.power(float(theta), 2.0 * i / head_dim)
    if scaling is None:
        return inv_freq
    factor = float(scaling["factor"])
    if scaling["rope_type"] == "linear":
        return inv_freq / factor
    lo_f, hi_f = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    orig = float(scaling["original_max_position_embeddings"])
    wavelen = 2.0 * math.pi / inv_freq
    low_wavelen, high_wavelen = orig / lo_f, orig / hi_f
    s = (orig / wavelen - lo_f) / (hi_f - lo_f)
    medium = (1.0 - s) * inv_freq / factor + s * inv_freq
    out = np.where(wavelen > low_wavelen, inv_freq / factor, medium)
    return np.where(wavelen < high_wavelen, inv_freq, out)


def rope_cos_sin(positions, head_dim, theta, scaling=None):
    """cos/sin tables [n, d] for absolute positions; emb = concat(angle, angle)."""
    inv_freq = rope_inv_freq(head_dim, theta, scaling)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([angle, angle], axis=-1)
    return np.cos(emb), np.sin(emb)


def rotate_half(x):
    """concat(-x[d/2:], x[:d/2]): dimension j pairs with j + d/2, not with its neighbour."""
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope(x, cos, sin):
    """x: [n, heads, d]; cos/sin: [n, d]. x' = x*cos + rotate_half(x)*sin."""
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


def attention(q, k, v, q_pos, k_pos):
    """Causal GQA attention.

    q: [n, nh, d]; k, v: [m, nkv, d]; q_pos: [n], k_pos: [m] absolute positions.
    Query head h reads KV head h // (nh / nkv); scores (q.k)/sqrt(d) over keys with
    k_pos <= q_pos (self included); softmax in float64. Returns [n, nh, d].
    """
    n, nh, d = q.shape
    nkv = k.shape[1]
    kv_of_head = np.arange(nh) // (nh // nkv)
    kh = k[:, kv_of_head, :]  # [m, nh, d]
    vh = v[:, kv_of_head, :]
    scores = np.einsum("nhd,mhd->hnm", q, kh) / math.sqrt(d)
    allowed = np.asarray(k_pos)[None, :] <= np.asarray(q_pos)[:, None]  # [n, m]
    scores = np.where(allowed[None], scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    return np.einsum("hnm,mhd->nhd", p, vh)


# --------------------------------------------------------------------------------------------
# KV cache: one plane per loop, one slot per (loop, layer, position)
# --------------------------------------------------------------------------------------------

class KVCache:
    """K/V for every (loop plane, layer, position): k, v have shape [T, L, capacity, nkv, d].

    `valid[t, p]` records that plane t holds position p, so attention can assert it never reads
    a row nobody wrote (a silent zero row would otherwise look like a plausible key).
    """

    def __init__(self, cfg, capacity):
        shape = (cfg.loops, cfg.num_layers, capacity, cfg.num_kv_heads, cfg.head_dim)
        self.k = np.zeros(shape)
        self.v = np.zeros(shape)
        self.valid = np.zeros((cfg.loops, capacity), dtype=bool)

    def write(self, plane, layer, positions, k, v):
        self.k[plane, layer, positions] = k
        self.v[plane, layer, positions] = v
        if layer == self.k.shape[1] - 1:
            self.valid[plane, positions] = True

    def read(self, plane, layer, upto, positions_being_written):
        # Positions written in this very call are valid even before the last layer marks them.
        ok = self.valid[plane, :upto].copy()
        ok[np.asarray(positions_being_written)] = True
        if not ok.all():
            raise AssertionError(f"plane {plane} read before positions {np.where(~ok)[0]} were written")
        return self.k[plane, layer, :upto], self.v[plane, layer, :upto]

    def finalize_last_exited(self, position, exit_depth):
        """`last_exited`: a token that exited after loop e (1-based) gets its loop-e K/V copied
        into the planes of loops e+1..T, so deeper queries of later tokens see version min(d, e)."""
        e = exit_depth
        self.k[e:, :, position] = self.k[e - 1, :, position]
        self.v[e:, :, position] = self.v[e - 1, :, position]
        self.valid[e:, position] = True


# --------------------------------------------------------------------------------------------
# Forward
# --------------------------------------------------------------------------------------------

def run_loop(model, h, positions, cache, plane):
    """One loop (all L layers + model.norm + gate) for rows h [n, H] at absolute `positions`.

    plane: 0-based loop index selecting the KV plane. Returns (normalized h [n, H], gate [n]).
    For a Llama (no sandwich norms, no gate) this is its single pass and gate is all NaN.
    """
    cfg, eps = model.cfg, model.cfg.rms_norm_eps
    sandwich = cfg.arch == "ouro"
    n = h.shape[0]
    nh, nkv, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    positions = np.asarray(positions, dtype=np.int64)
    cos, sin = rope_cos_sin(positions, d, cfg.rope_theta, cfg.rope_scaling)
    upto = int(positions.max()) + 1
    for l in range(cfg.num_layers):
        a = rms_norm(h, model.layer(l, "input_layernorm.weight"), eps)
        q = (a @ model.layer(l, "self_attn.q_proj.weight").T).reshape(n, nh, d)
        k = (a @ model.layer(l, "self_attn.k_proj.weight").T).reshape(n, nkv, d)
        v = (a @ model.layer(l, "self_attn.v_proj.weight").T).reshape(n, nkv, d)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        # Write before attending: the token attends to itself (section 3, attention step 3).
        cache.write(plane, l, positions, k, v)
        K, V = cache.read(plane, l, upto, positions)
        o = attention(q, K, V, positions, np.arange(upto)).reshape(n, nh * d)
        o = o @ model.layer(l, "self_attn.o_proj.weight").T
        # Sandwich: the post-norm acts on the block output, before the residual add.
        # (Llama: plain pre-norm, the block output is added as is.)
        h = h + (rms_norm(o, model.layer(l, "input_layernorm_2.weight"), eps) if sandwich else o)
        m = rms_norm(h, model.layer(l, "post_attention_layernorm.weight"), eps)
        m = silu(m @ model.layer(l, "mlp.gate_proj.weight").T) * (m @ model.layer(l, "mlp.up_proj.weight").T)
        m = m @ model.layer(l, "mlp.down_proj.weight").T
        h = h + (rms_norm(m, model.layer(l, "post_attention_layernorm_2.weight"), eps) if sandwich else m)
    # model.norm sits inside the loop and replaces h: the next loop starts from normalized h.
    h = rms_norm(h, model.w["model.norm.weight"], eps)
    if not cfg.has_gate:
        return h, np.full(n, np.nan)
    gate = h @ model.w["model.early_exit_gate.weight"][0] + model.w["model.early_exit_gate.bias"][0]
    return h, gate


def lm_head(model, h):
    return h @ model.lm_head_weight.T


def lm_head_rows(model, hs):
    """lm_head of several row blocks, the head widened once (a lazy model widens on access)."""
    w = model.lm_head_weight
    return [h @ w.T for h in hs]


def _check_ids(model, ids):
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("need a non-empty 1-D list of token ids")
    if ids.min() < 0 or ids.max() >= model.cfg.vocab_size:
        raise ValueError(f"token id out of range [0, {model.cfg.vocab_size})")
    return ids


def forward_prompt(model, prompt_ids, cache=None):
    """Prefill: every prompt position through all T loops, loop-major (section 6).

    Returns dict with hidden [T, P, H], gate_logits [T, P], logits [T, P, V] and the cache
    (allocated with capacity P when not given).
    """
    cfg = model.cfg
    ids = _check_ids(model, prompt_ids)
    P = ids.size
    if cache is None:
        cache = KVCache(cfg, P)
    positions = np.arange(P)
    h = model.embed(ids)
    hidden = np.empty((cfg.loops, P, cfg.hidden_size))
    gates = np.empty((cfg.loops, P))
    for t in range(cfg.loops):
        h, g = run_loop(model, h, positions, cache, t)
        hidden[t], gates[t] = h, g
    logits = np.stack(lm_head_rows(model, [hidden[t] for t in range(cfg.loops)]))
    return {"hidden": hidden, "gate_logits": gates, "logits": logits, "cache": cache}


# --------------------------------------------------------------------------------------------
# Early exit (`ouro` policy, section 5.2)
# --------------------------------------------------------------------------------------------

def ouro_hazard(gate_logit):
    """hazard = float32(sigmoid(float32(g))).

    The sigmoid of the float32 logit is evaluated in float64 and rounded once, i.e. the correctly
    rounded float32 sigmoid. A float32 `1/(1+expf(-x))` can differ by ~1 ulp (6e-8), which only
    matters for exit decisions within that distance of the threshold.
    """
    g = float(np.float32(gate_logit))
    if g >= 0:
        s = 1.0 / (1.0 + math.exp(-g))
    else:
        e = math.exp(g)
        s = e / (1.0 + e)
    return float(np.float32(s))


class OuroExitState:
    """Per-token `ouro` exit accumulator: remaining starts at 1.0 (float64) for every token."""

    def __init__(self, threshold=1.0, min_loops=2, max_loops=4):
        threshold = float(threshold)
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("exit_threshold must be in [0, 1]")
        if not 1 <= min_loops <= max_loops:
            raise ValueError("need 1 <= min_loops <= max_loops")
        self.threshold, self.min_loops, self.max_loops = threshold, int(min_loops), int(max_loops)
        self.remaining = 1.0
        self.loops = 0

    def step(self, hazard):
        """Account one finished loop with its hazard; return True if the token exits now."""
        hazard = float(np.float32(hazard))  # hazards are float32 values (idempotent if already)
        self.loops += 1
        self.remaining *= (1.0 - hazard)  # float64
        r = self.loops
        if r >= self.max_loops:
            return True
        # threshold 1 disables adaptive exit entirely; the compare is float64 `>=`.
        return self.threshold < 1.0 and r >= self.min_loops and 1.0 - self.remaining >= self.threshold

    @property
    def exit_prob(self):
        return 1.0 - self.remaining


def ouro_exit(hazards, threshold, min_loops, max_loops):
    """Apply the `ouro` rule to per-loop hazards (consumed lazily, loop 1 first).

    Returns (1-based exit depth, 1 - remaining at exit). Hazards after the exit loop are not
    read, so a list shorter than max_loops is fine when the exit comes earlier.
    """
    state = OuroExitState(threshold, min_loops, max_loops)
    for hz in hazards:
        if state.step(hz):
            return state.loops, state.exit_prob
    raise ValueError(f"hazards ran out after {state.loops} loops before an exit was decided")


def ouro_exit_depth(hazards, threshold, min_loops, max_loops):
    """1-based exit depth of the `ouro` policy for the given per-loop hazards."""
    return ouro_exit(hazards, threshold, min_loops, max_loops)[0]


# --------------------------------------------------------------------------------------------
# Greedy generation
# --------------------------------------------------------------------------------------------

def generate(model, prompt_ids, max_tokens=0, exit_threshold=1.0, min_loops=2, max_loops=None):
    """Prefill at full depth, then greedy decode of exactly max_tokens tokens (no EOS stop).

    Token 0 comes from the last prompt position's loop-T logits (exit depth T). Token n >= 1 is
    computed by feeding token n-1 at position P + n - 1 through loops 1..k with the `ouro` exit
    rule; its K/V is then finalized `last_exited` style. Returns a dict with the npz arrays
    (see module doc) plus "cache".

    A model without an exit gate (Llama, Nanbeige) ignores exit_threshold and min_loops: every
    decode token runs max_loops loops (default T; T = 1 for a Llama), the prompt all T.
    """
    cfg = model.cfg
    T, H, V = cfg.loops, cfg.hidden_size, cfg.vocab_size
    if max_loops is None:
        max_loops = T
    if not cfg.has_gate:
        exit_threshold, min_loops = 1.0, 1  # nothing to exit on: every token runs max_loops
    if not 1 <= min_loops <= max_loops <= T:
        raise ValueError(f"need 1 <= min_loops <= max_loops <= T = {T}")
    OuroExitState(exit_threshold, min_loops, max_loops)  # validates the threshold
    ids = _check_ids(model, prompt_ids)
    P, N = ids.size, int(max_tokens)
    if N < 0:
        raise ValueError("max_tokens must be >= 0")
    # The last sampled token is never fed back, so it needs no position (section 6).
    if P + max(N - 1, 0) > cfg.max_positions:
        raise ValueError("prompt + max_tokens - 1 exceeds max_position_embeddings")

    cache = KVCache(cfg, P + max(N - 1, 0))
    pre = forward_prompt(model, ids, cache)

    tokens = np.zeros(N, dtype=np.int64)
    exit_depths = np.zeros(N, dtype=np.int64)
    step_logits = np.zeros((N, V))
    step_gates = np.full((N, T), np.nan)
    step_prob = np.full(N, np.nan)
    step_hidden = np.zeros((N, H))

    if N > 0:
        logits = pre["logits"][T - 1, P - 1]
        tokens[0] = int(np.argmax(logits))  # first index among ties
        exit_depths[0] = T
        step_logits[0] = logits
        step_gates[0] = pre["gate_logits"][:, P - 1]
        step_hidden[0] = pre["hidden"][T - 1, P - 1]

    for n in range(1, N):
        pos = P + n - 1
        h = model.embed([tokens[n - 1]])
        state = OuroExitState(exit_threshold, min_loops, max_loops)
        for t in range(T):  # max_loops <= T guarantees an exit inside this loop
            h, g = run_loop(model, h, [pos], cache, t)
            step_gates[n, t] = g[0]
            if state.step(ouro_hazard(g[0]) if cfg.has_gate else 0.0):
                break  # without a gate: at max_loops
        depth = state.loops
        cache.finalize_last_exited(pos, depth)
        logits = lm_head(model, h[0])
        tokens[n] = int(np.argmax(logits))
        exit_depths[n] = depth
        step_logits[n] = logits
        step_prob[n] = state.exit_prob if cfg.has_gate else np.nan
        step_hidden[n] = h[0]

    return {
        "prompt_ids": ids,
        "prompt_hidden": pre["hidden"],
        "prompt_gate_logits": pre["gate_logits"],
        "prompt_logits": pre["logits"],
        "tokens": tokens,
        "exit_depths": exit_depths,
        "step_logits": step_logits,
        "step_gate_logits": step_gates,
        "step_exit_prob": step_prob,
        "step_hidden": step_hidden,
        "cache": cache,
    }


NPZ_KEYS = ("prompt_ids", "prompt_hidden", "prompt_gate_logits", "prompt_logits", "tokens",
            "exit_depths", "step_logits", "step_gate_logits", "step_exit_prob", "step_hidden")


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 numpy reference for Ouro (and plain Llama)")
    ap.add_argument("--model", required=True, help="checkpoint directory")
    ap.add_argument("--prompt-ids", required=True, help="comma-separated token ids, e.g. 1,2,3")
    ap.add_argument("--max-tokens", type=int, default=0)
    ap.add_argument("--exit-threshold", type=float, default=1.0)
    ap.add_argument("--min-loops", type=int, default=2)
    ap.add_argument("--max-loops", type=int, default=None, help="default: total_ut_steps")
    ap.add_argument("--out", required=True, help="output .npz")
    ap.add_argument("--lazy", action="store_true",
                    help="widen weights to float64 when used (the released models' shapes)")
    a = ap.parse_args(argv)
    try:
        prompt = [int(x) for x in a.prompt_ids.split(",") if x.strip()]
    except ValueError:
        ap.error("--prompt-ids must be comma-separated integers")
    try:
        model = load_model(a.model, lazy=a.lazy)
        res = generate(model, prompt, a.max_tokens, a.exit_threshold, a.min_loops, a.max_loops)
    except ValueError as e:
        ap.error(str(e))
    np.savez(a.out, **{k: res[k] for k in NPZ_KEYS})
    print(f"wrote {a.out}: P={len(prompt)} N={a.max_tokens} tokens={res['tokens'].tolist()} "
          f"exit_depths={res['exit_depths'].tolist()}")


if __name__ == "__main__":
    main()
