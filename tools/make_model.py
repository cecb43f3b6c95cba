#!/usr/bin/env python3
"""Write a deterministic random-weight Ouro (or Llama, or Nanbeige) checkpoint in the Hugging Face layout.

Written from shared/reference/looped-models.md (sections 1-2), not from the engine's C++, so it
can serve as an independent test input. Output directory:

    config.json                    the real Ouro field set, in the order of the shipped fixture
                                   (--arch llama: the field set of a Hugging Face LlamaConfig)
    generation_config.json         bos/eos ids
    model.safetensors              (or model-0000i-of-0000N.safetensors + model.safetensors.index.json)

Weights are drawn per tensor from numpy.random.default_rng(SeedSequence([seed, hash(name)])), so a
tensor's values depend only on (seed, name, shape, std) - not on sharding, storage dtype or the
order tensors are written. Values are drawn in float32 and then stored as F32, or rounded to
BF16 (round-to-nearest-even) or F16 (numpy's round-to-nearest-even).

Default init std: 1/sqrt(hidden_size) (0.177 for tiny, 0.088 for small, 0.0221 for the 1.4B shape,
which is the real initializer_range 0.02 to within 10%). Why not a flat 0.02: every residual add in
Ouro is preceded by an RMSNorm (sandwich norms), so weight scale never changes the residual scale,
but it does set (a) attention sharpness - q/k entries have std ~ std*sqrt(H), so with 0.02 and
H = 32 the scores are ~0.01 and attention is nearly uniform, hiding RoPE/mask/scale bugs; (b) the
spread of the exit-gate logit (std ~ std*sqrt(H)): with 0.02 every hazard sits at 0.5 +- 0.03 and
early exit never varies between tokens; (c) the logit spread (same factor), which makes argmax
ties/near-ties likelier. With 1/sqrt(H), q/k entries, gate logits and output logits are all O(1).

--arch llama writes a plain HF Llama (LlamaForCausalLM): the Ouro tensor set without the second
("sandwich") norms and the exit gate, one pass through the layers (the one-loop case), model.norm
once at the end, lm_head.weight omitted with --tie-word-embeddings. Its forward is pre-norm:
h = h + o_proj(attn(norm(h))), so unlike Ouro the weight scale *does* set the residual growth.
Default stds for llama (H hidden, L layers):
    embed_tokens, q/k/v, gate/up, lm_head     1/sqrt(H)               (--init-std overrides)
    o_proj, down_proj (residual outputs)      1/sqrt(H) / sqrt(2 L)
q/k entries of norm(h) @ Wq are then ~N(0, 1) (scores ~N(0, 1): attention neither uniform nor
one-hot). Each of the 2L residual branches adds entries of rms ~1/sqrt(2L) (attention: v ~ 1,
averaging only shrinks it; MLP: silu(g)*u has rms ~0.6 and sqrt(I/H) ~ 1.7 for the usual
I ~ 2.75 H), so the residual grows from the embedding's 1/sqrt(H) to rms ~1 after the last layer
(measured 0.66 / 0.80 / 0.83 for L = 2 / 8 / 24),
not to sqrt(2L); model.norm makes it O(1) anyway and the logits are ~N(0, 1) per vocabulary entry
(tied: the same, embed_tokens having std 1/sqrt(H)), so the top-2 gap is rarely a knife edge.

--arch nanbeige writes a Nanbeige4.2 checkpoint (NanbeigeForCausalLM): the Llama tensor set and
stds, and a config with num_loops = --loops (the whole layer stack runs that many times, model.norm
after every loop: the next loop starts from the normalized state) and skip_loop_final_norm false.

Usage:
    make_model.py OUT_DIR [--preset tiny|small|ouro-1.4b|ouro-2.6b|llama-1.4b|nanbeige-tiny|
                           nanbeige-4.2-3b|huginn-tiny|huginn-0125] [--arch ouro|llama|nanbeige|huginn]
        [--tie-word-embeddings] [--rope-scaling llama3:FACTOR:ORIGINAL_MAX|linear:FACTOR]
        [--vocab-size N] [--hidden-size N]
        [--intermediate-size N] [--num-layers N] [--num-heads N] [--num-kv-heads N]
        [--head-dim N] [--loops N] [--max-positions N] [--rope-theta F] [--rms-norm-eps F]
        [--dtype f32|bf16|f16] [--shards N] [--seed N] [--init-std F] [--gate-bias F]
        [--eos-token-id N]
"""

import argparse
import hashlib
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import (  # noqa: E402  (re-exported for tests)
    RAW_NUMPY_DTYPE, bf16_bits_to_f32, f32_to_bf16_bits, raw_to_float64, read_safetensors,
    read_safetensors_header, write_safetensors, write_safetensors_stream)

__all__ = [
    "PRESETS", "PRESET_ARCH", "ARCHS", "DTYPES", "ModelSpec", "parse_rope_scaling",
    "llama_config_dict", "tensor_specs", "make_tensor_f32", "encode", "make_model",
    "config_dict", "write_safetensors", "write_safetensors_stream", "read_safetensors",
    "read_safetensors_header", "f32_to_bf16_bits", "bf16_bits_to_f32", "raw_to_float64",
    "RAW_NUMPY_DTYPE",
]

# Preset shapes. `tiny` is upstream OuroConfig.tiny() (nh 4 / nkv 2 exercises GQA);
# `ouro-1.4b` is the released model's shape (notes section 1).
PRESETS = {
    "tiny": dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4,
                 num_kv_heads=2, head_dim=8, loops=4, max_positions=128, rope_theta=1e6,
                 rms_norm_eps=1e-6),
    "small": dict(vocab_size=512, hidden_size=128, intermediate_size=352, num_layers=2,
                  num_heads=4, num_kv_heads=2, head_dim=32, loops=4, max_positions=2048,
                  rope_theta=1e6, rms_norm_eps=1e-6),
    "ouro-1.4b": dict(vocab_size=49152, hidden_size=2048, intermediate_size=5632, num_layers=24,
                      num_heads=16, num_kv_heads=16, head_dim=128, loops=4, max_positions=65536,
                      rope_theta=1e6, rms_norm_eps=1e-6),
    # The Ouro-1.4B shape as a plain Llama (one pass, no sandwich norms, no gate): the shape the
    # llama.cpp peer benchmark (bench/peer/) runs in both engines.
    "llama-1.4b": dict(vocab_size=49152, hidden_size=2048, intermediate_size=5632, num_layers=24,
                       num_heads=16, num_kv_heads=16, head_dim=128, loops=1, max_positions=65536,
                       rope_theta=1e6, rms_norm_eps=1e-6),
    # Ouro-2.6B: Ouro-1.4B's fields with 48 layers.
    "ouro-2.6b": dict(vocab_size=49152, hidden_size=2048, intermediate_size=5632, num_layers=48,
                      num_heads=16, num_kv_heads=16, head_dim=128, loops=4, max_positions=65536,
                      rope_theta=1e6, rms_norm_eps=1e-6),
    # Nanbeige (a looped Llama: the whole pre-norm stack num_loops times, model.norm after every
    # loop, no gate). The tiny shape's query heads are wider than the hidden size (6 x 48 > 192),
    # as the released model's (48 x 128 > 3072).
    "nanbeige-tiny": dict(vocab_size=259, hidden_size=192, intermediate_size=512, num_layers=3,
                          num_heads=6, num_kv_heads=2, head_dim=48, loops=2, max_positions=4096,
                          rope_theta=7e7, rms_norm_eps=1e-5),
    "nanbeige-4.2-3b": dict(vocab_size=166144, hidden_size=3072, intermediate_size=10752,
                            num_layers=22, num_heads=48, num_kv_heads=8, head_dim=128, loops=2,
                            max_positions=262144, rope_theta=7e7, rms_norm_eps=1e-5),
    # Huginn (huginn_raven): num_layers counts the recurrent block's layers, loops its mean
    # recurrence; prelude and coda blocks around it (tools/reference_huginn.py).
    "huginn-tiny": dict(vocab_size=259, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                        num_kv_heads=4, head_dim=16, loops=8, max_positions=512, rope_theta=5e4,
                        rms_norm_eps=1e-6, prelude_layers=1, coda_layers=1),
    "huginn-0125": dict(vocab_size=65536, hidden_size=5280, intermediate_size=17920, num_layers=4,
                        num_heads=55, num_kv_heads=55, head_dim=96, loops=32, max_positions=4096,
                        rope_theta=5e4, rms_norm_eps=1e-6, prelude_layers=2, coda_layers=2),
}

# Architecture a preset implies when --arch is not given (everything else: ouro).
PRESET_ARCH = {"llama-1.4b": "llama", "nanbeige-tiny": "nanbeige", "nanbeige-4.2-3b": "nanbeige",
               "huginn-tiny": "huginn", "huginn-0125": "huginn"}

ARCHS = ("ouro", "llama", "nanbeige", "huginn")

# CLI dtype -> (safetensors dtype, config torch_dtype)
DTYPES = {"f32": ("F32", "float32"), "bf16": ("BF16", "bfloat16"), "f16": ("F16", "float16")}

# Std of the multiplicative noise on RMSNorm weights (1 + N(0, 0.1)): far enough from 1 that a
# skipped or misplaced norm changes the output, close enough that no channel is switched off.
NORM_WEIGHT_NOISE = 0.1


class ModelSpec:
    """All shape/config knobs of one synthetic checkpoint (preset values overridden by flags)."""

    FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
              "num_kv_heads", "head_dim", "loops", "max_positions", "rope_theta", "rms_norm_eps",
              "prelude_layers", "coda_layers")

    def __init__(self, preset="tiny", dtype="f32", seed=0, init_std=None, gate_bias=0.0,
                 eos_token_id=0, arch=None, tie_word_embeddings=False, rope_scaling=None,
                 **overrides):
        self.arch = arch if arch is not None else PRESET_ARCH.get(preset, "ouro")
        if self.arch not in ARCHS:
            raise ValueError(f"arch must be one of {list(ARCHS)}")
        base = dict(PRESETS[preset])
        base.setdefault("prelude_layers", 0)
        base.setdefault("coda_layers", 0)
        if self.arch == "llama":
            base["loops"] = 1  # a plain Llama is the one-loop case
        for key, value in overrides.items():
            if key not in self.FIELDS:
                raise TypeError(f"unknown field {key}")
            if value is not None:
                base[key] = value
        for key in self.FIELDS:
            setattr(self, key, base[key])
        self.preset = preset
        self.tie_word_embeddings = bool(tie_word_embeddings)
        self.rope_scaling = parse_rope_scaling(rope_scaling)
        self.dtype = dtype
        self.seed = int(seed)
        self.init_std = float(init_std) if init_std is not None else 1.0 / math.sqrt(self.hidden_size)
        self.gate_bias = float(gate_bias)
        self.eos_token_id = int(eos_token_id)
        self.validate()

    def validate(self):
        positive = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                    "num_kv_heads", "head_dim", "loops", "max_positions")
        for key in positive:
            if int(getattr(self, key)) < 1:
                raise ValueError(f"{key} must be >= 1")
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_heads must be a multiple of num_kv_heads (GQA)")
        if self.head_dim % 2:
            raise ValueError("head_dim must be even (split-half RoPE)")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}")
        if not 0 <= self.eos_token_id < self.vocab_size:
            raise ValueError("eos_token_id out of vocabulary")
        if not self.init_std > 0:
            raise ValueError("init_std must be > 0")
        if self.arch == "ouro":
            # Notes section 1: the Ouro loader rejects tied embeddings and any rope_scaling.
            if self.tie_word_embeddings:
                raise ValueError("tie_word_embeddings is for llama and nanbeige (Ouro stores lm_head separately)")
            if self.rope_scaling is not None:
                raise ValueError("rope_scaling is for llama and nanbeige (Ouro uses default RoPE)")
        elif self.arch == "llama" and self.loops != 1:
            raise ValueError("a llama checkpoint has exactly one pass (loops must be 1)")
        if self.arch == "huginn":
            if self.num_kv_heads != self.num_heads or self.head_dim * self.num_heads != self.hidden_size:
                raise ValueError("huginn: as many K/V heads as heads, and heads x head_dim = hidden_size")
            if self.prelude_layers < 1 or self.coda_layers < 1:
                raise ValueError("huginn: at least one prelude and one coda block")

    @property
    def has_gate(self):
        return self.arch == "ouro"

    @property
    def pre_norm(self):
        """Llama-family layers (no sandwich norms, no gate): llama and nanbeige."""
        return self.arch != "ouro"


def parse_rope_scaling(value):
    """None, a HF rope_scaling dict, or the CLI form "llama3:FACTOR:ORIGINAL_MAX[:LOW:HIGH]" /
    "linear:FACTOR" -> None or the dict written to config.json (keys sorted, as HF saves them)."""
    if value is None or value == "" or value == "none":
        return None
    if isinstance(value, dict):
        d = dict(value)
    else:
        parts = str(value).split(":")
        try:
            if parts[0] == "llama3" and len(parts) in (3, 5):
                d = {"rope_type": "llama3", "factor": float(parts[1]),
                     "original_max_position_embeddings": int(parts[2]),
                     "low_freq_factor": float(parts[3]) if len(parts) == 5 else 1.0,
                     "high_freq_factor": float(parts[4]) if len(parts) == 5 else 4.0}
            elif parts[0] == "linear" and len(parts) == 2:
                d = {"rope_type": "linear", "factor": float(parts[1])}
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"rope_scaling {value!r}: want llama3:FACTOR:ORIGINAL_MAX[:LOW:HIGH] "
                             "or linear:FACTOR") from None
    kind = d.get("rope_type", d.get("type"))
    if kind not in ("llama3", "linear"):
        raise ValueError(f"rope_scaling type {kind!r} not supported (llama3, linear)")
    if not float(d.get("factor", 0)) > 0:
        raise ValueError("rope_scaling factor must be > 0")
    if kind == "llama3":
        for key in ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings"):
            if key not in d:
                raise ValueError(f"llama3 rope_scaling needs {key}")
        if not 0 < float(d["low_freq_factor"]) < float(d["high_freq_factor"]):
            raise ValueError("llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor")
        if int(d["original_max_position_embeddings"]) < 1:
            raise ValueError("original_max_position_embeddings must be >= 1")
    return {k: d[k] for k in sorted(d)}


def huginn_tensor_specs(spec):
    """Huginn's tensors (raven_modeling_minimal's names): every block a sandwich with four norms,
    fused Wqkv with a q/k bias, fused gate/up fc; the adapter; ln_f; the head tied to wte."""
    H, I, nh, hd = spec.hidden_size, spec.intermediate_size, spec.num_heads, spec.head_dim
    out = [("transformer.wte.weight", (spec.vocab_size, H), "linear"),
           ("transformer.adapter.weight", (H, 2 * H), "adapter"),
           ("transformer.ln_f.weight", (H,), "norm")]
    blocks = [f"transformer.prelude.{i}." for i in range(spec.prelude_layers)]
    blocks += [f"transformer.core_block.{i}." for i in range(spec.num_layers)]
    blocks += [f"transformer.coda.{i}." for i in range(spec.coda_layers)]
    for p in blocks:
        out += [(p + f"norm_{k}.weight", (H,), "norm") for k in (1, 2, 3, 4)]
        out += [(p + "attn.Wqkv.weight", (3 * H, H), "linear"), (p + "attn.qk_bias", (2, 1, nh, hd), "offset"),
                (p + "attn.proj.weight", (H, H), "linear"), (p + "mlp.fc.weight", (2 * I, H), "linear"),
                (p + "mlp.proj.weight", (H, I), "linear")]
    return out


def tensor_specs(spec):
    """Every tensor of the checkpoint (notes section 2): list of (name, shape, kind).

    kind: "linear" (normal(0, std): embeddings, projections, gate weight, lm_head),
    "linear_out" (llama o_proj/down_proj: normal(0, std / sqrt(2 L)), see the module doc),
    "norm" (1 + normal(0, 0.1)), "bias" (constant --gate-bias).
    """
    if spec.arch == "huginn":
        return huginn_tensor_specs(spec)
    llama = spec.pre_norm  # llama, nanbeige: no sandwich norms, no exit gate, lm_head absent when tied
    out_kind = "linear_out" if llama else "linear"
    H, I = spec.hidden_size, spec.intermediate_size
    q_out = spec.num_heads * spec.head_dim
    kv_out = spec.num_kv_heads * spec.head_dim
    out = [("model.embed_tokens.weight", (spec.vocab_size, H), "linear")]
    for i in range(spec.num_layers):
        p = f"model.layers.{i}."
        out += [
            (p + "self_attn.q_proj.weight", (q_out, H), "linear"),
            (p + "self_attn.k_proj.weight", (kv_out, H), "linear"),
            (p + "self_attn.v_proj.weight", (kv_out, H), "linear"),
            (p + "self_attn.o_proj.weight", (H, q_out), out_kind),
            (p + "mlp.gate_proj.weight", (I, H), "linear"),
            (p + "mlp.up_proj.weight", (I, H), "linear"),
            (p + "mlp.down_proj.weight", (H, I), out_kind),
        ]
        for norm in ("input_layernorm", "input_layernorm_2", "post_attention_layernorm",
                     "post_attention_layernorm_2"):
            if not (llama and norm.endswith("_2")):
                out.append((p + norm + ".weight", (H,), "norm"))
    out.append(("model.norm.weight", (H,), "norm"))
    if not llama:
        out += [("model.early_exit_gate.weight", (1, H), "linear"),
                ("model.early_exit_gate.bias", (1,), "bias")]
    if not spec.tie_word_embeddings:
        out.append(("lm_head.weight", (spec.vocab_size, H), "linear"))
    return out


def _tensor_rng(seed, name):
    # Per-tensor stream keyed by a stable hash of the name (Python's hash() is salted per process).
    key = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(np.random.SeedSequence([seed, key]))


def make_tensor_f32(spec, name, shape, kind):
    """The float32 master values of one tensor (before rounding to the storage dtype)."""
    if kind == "bias":
        return np.full(shape, spec.gate_bias, dtype=np.float32)
    rng = _tensor_rng(spec.seed, name)
    noise = rng.standard_normal(shape, dtype=np.float32)
    if kind == "linear":
        noise *= np.float32(spec.init_std)
        return noise
    if kind == "linear_out":
        noise *= np.float32(spec.init_std / math.sqrt(2 * spec.num_layers))
        return noise
    if kind == "norm":
        noise *= np.float32(NORM_WEIGHT_NOISE)
        noise += np.float32(1.0)
        return noise
    if kind == "adapter":
        # Huginn's adapter [H, 2H] over concat[state, input]: the state's columns 5x smaller
        # than the input's, so that the recurrence contracts towards a fixed point as a trained
        # model's does (random weights otherwise keep it chaotic, and no token would ever exit).
        noise *= np.float32(spec.init_std)
        noise[:, : shape[0]] *= np.float32(0.2)
        return noise
    if kind == "offset":  # Huginn's q/k bias: N(0, 0.5), of the order of the q/k entries
        noise *= np.float32(0.5)
        return noise
    raise ValueError(kind)


def encode(values_f32, st_dtype):
    """float32 values -> raw storage array for the given safetensors dtype."""
    if st_dtype == "F32":
        return np.ascontiguousarray(values_f32, dtype="<f4")
    if st_dtype == "BF16":
        return f32_to_bf16_bits(values_f32)
    if st_dtype == "F16":
        return np.ascontiguousarray(values_f32).astype("<f2")  # numpy rounds to nearest even
    raise ValueError(st_dtype)


def config_dict(spec):
    """config.json contents, keys in the order of shared/fixtures/ouro-1.4b/config.json."""
    if spec.arch == "llama":
        return llama_config_dict(spec)
    if spec.arch == "nanbeige":
        return nanbeige_config_dict(spec)
    if spec.arch == "huginn":
        return huginn_config_dict(spec)
    L = spec.num_layers
    return {
        "architectures": ["OuroForCausalLM"],
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration_ouro.OuroConfig",
            "AutoModel": "modeling_ouro.OuroModel",
            "AutoModelForCausalLM": "modeling_ouro.OuroForCausalLM",
        },
        # Ouro uses <|endoftext|> (0) for bos/eos/pad; only eos is configurable here because it is
        # the one id that changes engine behaviour (stopping).
        "pad_token_id": 0,
        "bos_token_id": 0,
        "eos_token_id": spec.eos_token_id,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "hidden_size": spec.hidden_size,
        "initializer_range": spec.init_std,
        "intermediate_size": spec.intermediate_size,
        "layer_types": ["full_attention"] * L,
        "max_position_embeddings": spec.max_positions,
        "max_window_layers": L,
        "model_type": "ouro",
        "num_attention_heads": spec.num_heads,
        "num_hidden_layers": L,
        "num_key_value_heads": spec.num_kv_heads,
        "rms_norm_eps": float(spec.rms_norm_eps),
        "rope_scaling": None,
        "rope_theta": float(spec.rope_theta),
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": DTYPES[spec.dtype][1],
        "total_ut_steps": spec.loops,
        "early_exit_threshold": 1.0,
        "transformers_version": "4.55.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": spec.vocab_size,
    }


def llama_config_dict(spec):
    """A Hugging Face LlamaConfig as save_pretrained writes it (keys sorted). bos = 0 and
    eos = --eos-token-id as for Ouro; initializer_range records the base std."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 0,
        "eos_token_id": spec.eos_token_id,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "hidden_size": spec.hidden_size,
        "initializer_range": spec.init_std,
        "intermediate_size": spec.intermediate_size,
        "max_position_embeddings": spec.max_positions,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": spec.num_heads,
        "num_hidden_layers": spec.num_layers,
        "num_key_value_heads": spec.num_kv_heads,
        "pretraining_tp": 1,
        "rms_norm_eps": float(spec.rms_norm_eps),
        "rope_scaling": spec.rope_scaling,
        "rope_theta": float(spec.rope_theta),
        "tie_word_embeddings": spec.tie_word_embeddings,
        "torch_dtype": DTYPES[spec.dtype][1],
        "transformers_version": "4.55.0",
        "use_cache": True,
        "vocab_size": spec.vocab_size,
    }


def nanbeige_config_dict(spec):
    """Nanbeige4.2's config.json fields (its remote-code NanbeigeConfig, keys sorted): a Llama
    config plus num_loops, skip_loop_final_norm (false: model.norm after every loop) and the
    training-only loop_loss_weights. bos = 0 and eos = --eos-token-id as for the others."""
    d = llama_config_dict(spec)
    d.update({
        "architectures": ["NanbeigeForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_nanbeige.NanbeigeConfig",
                     "AutoModelForCausalLM": "modeling_nanbeige.NanbeigeForCausalLM"},
        "kv_channels": spec.head_dim,
        "loop_loss_weights": [],
        "model_type": "nanbeige",
        "num_loops": spec.loops,
        "skip_loop_final_norm": False,
    })
    del d["mlp_bias"]  # the released config leaves it to the default (false)
    return dict(sorted(d.items()))


def huginn_config_dict(spec):
    """Huginn-0125's config.json fields (RavenConfig; keys sorted). The initial state's std is
    sqrt(2 / (5 n_embd)) scaled by sqrt(n_embd), as the released model derives it."""
    H = spec.hidden_size
    std = math.sqrt(2.0 / (5.0 * H))
    return {
        "architecture_class_name": "RecurrentGPT",
        "architectures": ["RavenForCausalLM"],
        "bias": False,
        "block_class_name": "SandwichBlock",
        "block_size": spec.max_positions,
        "effective_expected_depth": spec.prelude_layers + spec.coda_layers + spec.num_layers * spec.loops,
        "init_values": {"embed_scale": math.sqrt(H), "embedding": std, "std": std,
                        "out_proj": std / math.sqrt(2 * (spec.prelude_layers + spec.coda_layers +
                                                         spec.num_layers * spec.loops))},
        "injection_type": "linear",
        "intermediate_size": spec.intermediate_size,
        "mean_recurrence": spec.loops,
        "mlp_class_name": "GatedMLP",
        "model_type": "huginn_raven",
        "n_embd": H,
        "num_attention_heads": spec.num_heads,  # the released file's name for RavenConfig's n_heads
        "n_layers": spec.prelude_layers + spec.num_layers + spec.coda_layers,
        "n_layers_in_coda": spec.coda_layers,
        "n_layers_in_prelude": spec.prelude_layers,
        "n_layers_in_recurrent_block": spec.num_layers,
        "nonlin_name": "SiLU",
        "norm_class_name": "RMSNorm_llama",
        "norm_eps": float(spec.rms_norm_eps),
        "num_key_value_heads": spec.num_heads,
        "padded_vocab_size": spec.vocab_size,
        "qk_bias": True,
        "rope_base": float(spec.rope_theta),
        "state_init": "like-init",
        "tie_embeddings": True,
        "torch_dtype": DTYPES[spec.dtype][1],
        "vocab_size": spec.vocab_size,
    }


def _split_into_shards(entries, nbytes, n_shards):
    """Split name-sorted entries into n_shards contiguous, non-empty groups of similar byte size
    (HF fills shards in order up to a size limit; we aim for total/n per shard)."""
    if n_shards > len(entries):
        raise ValueError(f"cannot split {len(entries)} tensors into {n_shards} shards")
    target = sum(nbytes) / n_shards
    groups, acc = [[]], 0
    for i, (entry, size) in enumerate(zip(entries, nbytes)):
        remaining = len(entries) - i
        shards_still_empty = n_shards - len(groups)
        if groups[-1] and len(groups) < n_shards and (acc >= target or remaining <= shards_still_empty):
            groups.append([])
            acc = 0
        groups[-1].append(entry)
        acc += size
    assert len(groups) == n_shards
    return groups


def _write_json(path, obj, **kw):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2, **kw) + "\n")


def make_model(out_dir, spec, shards=1, verbose=False):
    """Write the checkpoint for `spec` into out_dir. Returns the list of files written."""
    os.makedirs(out_dir, exist_ok=True)
    st_dtype = DTYPES[spec.dtype][0]
    itemsize = RAW_NUMPY_DTYPE[st_dtype].itemsize

    # Remove checkpoint files a previous run may have left with a different shard count, so the
    # directory never holds both layouts.
    for fname in os.listdir(out_dir):
        if fname.endswith(".safetensors") or fname == "model.safetensors.index.json":
            os.remove(os.path.join(out_dir, fname))

    _write_json(os.path.join(out_dir, "config.json"), config_dict(spec))
    _write_json(os.path.join(out_dir, "generation_config.json"), {
        "_from_model_config": True,
        "bos_token_id": 0,
        "eos_token_id": spec.eos_token_id,
        "transformers_version": "4.55.0",
    }, sort_keys=True)
    written = ["config.json", "generation_config.json"]

    def entry(name, shape, kind):
        def produce():
            if verbose:
                print(f"  {name} {list(shape)}", file=sys.stderr)
            return encode(make_tensor_f32(spec, name, shape, kind), st_dtype)
        return (name, st_dtype, shape, produce)

    specs = sorted(tensor_specs(spec), key=lambda t: t[0])
    entries = [entry(*t) for t in specs]
    nbytes = [itemsize * int(np.prod(t[1], dtype=np.int64)) for t in specs]

    if shards <= 1:
        write_safetensors_stream(os.path.join(out_dir, "model.safetensors"), entries)
        written.append("model.safetensors")
        return written

    weight_map = {}
    total = 0
    for k, group in enumerate(_split_into_shards(entries, nbytes, shards), start=1):
        fname = f"model-{k:05d}-of-{shards:05d}.safetensors"
        total += write_safetensors_stream(os.path.join(out_dir, fname), group)
        for e in group:
            weight_map[e[0]] = fname
        written.append(fname)
    _write_json(os.path.join(out_dir, "model.safetensors.index.json"),
                {"metadata": {"total_size": total}, "weight_map": weight_map}, sort_keys=True)
    written.append("model.safetensors.index.json")
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    ap.add_argument("--arch", choices=ARCHS, default=None,
                    help="ouro (default), llama, nanbeige or huginn (each the default for its "
                         "presets)")
    ap.add_argument("--tie-word-embeddings", action="store_true",
                    help="llama: no lm_head.weight, the head reuses embed_tokens")
    ap.add_argument("--rope-scaling", default=None,
                    help="llama: llama3:FACTOR:ORIGINAL_MAX[:LOW:HIGH] or linear:FACTOR")
    ap.add_argument("--vocab-size", type=int)
    ap.add_argument("--hidden-size", type=int)
    ap.add_argument("--intermediate-size", type=int)
    ap.add_argument("--num-layers", type=int)
    ap.add_argument("--num-heads", type=int)
    ap.add_argument("--num-kv-heads", type=int)
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--loops", type=int, help="total_ut_steps T (huginn: mean_recurrence)")
    ap.add_argument("--prelude-layers", type=int, help="huginn: blocks before the recurrence")
    ap.add_argument("--coda-layers", type=int, help="huginn: blocks after it")
    ap.add_argument("--max-positions", type=int)
    ap.add_argument("--rope-theta", type=float)
    ap.add_argument("--rms-norm-eps", type=float)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-std", type=float, default=None,
                    help="std of linear/embedding weights (default 1/sqrt(hidden_size); llama and "
                         "nanbeige o_proj/down_proj get this / sqrt(2 * num_layers))")
    ap.add_argument("--gate-bias", type=float, default=0.0)
    ap.add_argument("--eos-token-id", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="log each tensor to stderr")
    a = ap.parse_args(argv)
    if a.shards < 1:
        ap.error("--shards must be >= 1")
    try:
        spec = ModelSpec(
            preset=a.preset, dtype=a.dtype, seed=a.seed, init_std=a.init_std,
            gate_bias=a.gate_bias, eos_token_id=a.eos_token_id, arch=a.arch,
            tie_word_embeddings=a.tie_word_embeddings, rope_scaling=a.rope_scaling,
            vocab_size=a.vocab_size,
            hidden_size=a.hidden_size, intermediate_size=a.intermediate_size,
            num_layers=a.num_layers, num_heads=a.num_heads, num_kv_heads=a.num_kv_heads,
            head_dim=a.head_dim, loops=a.loops, max_positions=a.max_positions,
            prelude_layers=a.prelude_layers, coda_layers=a.coda_layers,
            rope_theta=a.rope_theta, rms_norm_eps=a.rms_norm_eps)
        files = make_model(a.out_dir, spec, shards=a.shards, verbose=a.verbose)
    except ValueError as e:
        ap.error(str(e))
    n_params = sum(int(np.prod(s, dtype=np.int64)) for _, s, _ in tensor_specs(spec))
    arch = "" if spec.arch == "ouro" else f"{spec.arch}, "
    print(f"wrote {a.out_dir}: {arch}{len(tensor_specs(spec))} tensors, {n_params} params, "
          f"{spec.dtype}, init_std {spec.init_std:.6g}, files {', '.join(files)}")


if __name__ == "__main__":
    main()
