#!/usr/bin/env python3
"""Write a deterministic random-weight Ouro checkpoint in the Hugging Face layout.

Written from shared/reference/looped-models.md (sections 1-2), not from the engine's C++, so it
can serve as an independent test input. Output directory:

    config.json                    the real Ouro field set, in the order of the shipped fixture
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

Usage:
    make_model.py OUT_DIR [--preset tiny|small|ouro-1.4b] [--vocab-size N] [--hidden-size N]
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
    "PRESETS", "DTYPES", "ModelSpec", "tensor_specs", "make_tensor_f32", "encode", "make_model",
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
}

# CLI dtype -> (safetensors dtype, config torch_dtype)
DTYPES = {"f32": ("F32", "float32"), "bf16": ("BF16", "bfloat16"), "f16": ("F16", "float16")}

# Std of the multiplicative noise on RMSNorm weights (1 + N(0, 0.1)): far enough from 1 that a
# skipped or misplaced norm changes the output, close enough that no channel is switched off.
NORM_WEIGHT_NOISE = 0.1


class ModelSpec:
    """All shape/config knobs of one synthetic checkpoint (preset values overridden by flags)."""

    FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
              "num_kv_heads", "head_dim", "loops", "max_positions", "rope_theta", "rms_norm_eps")

    def __init__(self, preset="tiny", dtype="f32", seed=0, init_std=None, gate_bias=0.0,
                 eos_token_id=0, **overrides):
        base = dict(PRESETS[preset])
        for key, value in overrides.items():
            if key not in self.FIELDS:
                raise TypeError(f"unknown field {key}")
            if value is not None:
                base[key] = value
        for key in self.FIELDS:
            setattr(self, key, base[key])
        self.preset = preset
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


def tensor_specs(spec):
    """Every tensor of the checkpoint (notes section 2): list of (name, shape, kind).

    kind: "linear" (normal(0, std): embeddings, projections, gate weight, lm_head),
    "norm" (1 + normal(0, 0.1)), "bias" (constant --gate-bias).
    """
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
            (p + "self_attn.o_proj.weight", (H, q_out), "linear"),
            (p + "mlp.gate_proj.weight", (I, H), "linear"),
            (p + "mlp.up_proj.weight", (I, H), "linear"),
            (p + "mlp.down_proj.weight", (H, I), "linear"),
            (p + "input_layernorm.weight", (H,), "norm"),
            (p + "input_layernorm_2.weight", (H,), "norm"),
            (p + "post_attention_layernorm.weight", (H,), "norm"),
            (p + "post_attention_layernorm_2.weight", (H,), "norm"),
        ]
    out += [
        ("model.norm.weight", (H,), "norm"),
        ("model.early_exit_gate.weight", (1, H), "linear"),
        ("model.early_exit_gate.bias", (1,), "bias"),
        ("lm_head.weight", (spec.vocab_size, H), "linear"),
    ]
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
    if kind == "norm":
        noise *= np.float32(NORM_WEIGHT_NOISE)
        noise += np.float32(1.0)
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
    ap.add_argument("--vocab-size", type=int)
    ap.add_argument("--hidden-size", type=int)
    ap.add_argument("--intermediate-size", type=int)
    ap.add_argument("--num-layers", type=int)
    ap.add_argument("--num-heads", type=int)
    ap.add_argument("--num-kv-heads", type=int)
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--loops", type=int, help="total_ut_steps T")
    ap.add_argument("--max-positions", type=int)
    ap.add_argument("--rope-theta", type=float)
    ap.add_argument("--rms-norm-eps", type=float)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-std", type=float, default=None,
                    help="std of linear/embedding weights (default 1/sqrt(hidden_size))")
    ap.add_argument("--gate-bias", type=float, default=0.0)
    ap.add_argument("--eos-token-id", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="log each tensor to stderr")
    a = ap.parse_args(argv)
    if a.shards < 1:
        ap.error("--shards must be >= 1")
    try:
        spec = ModelSpec(
            preset=a.preset, dtype=a.dtype, seed=a.seed, init_std=a.init_std,
            gate_bias=a.gate_bias, eos_token_id=a.eos_token_id, vocab_size=a.vocab_size,
            hidden_size=a.hidden_size, intermediate_size=a.intermediate_size,
            num_layers=a.num_layers, num_heads=a.num_heads, num_kv_heads=a.num_kv_heads,
            head_dim=a.head_dim, loops=a.loops, max_positions=a.max_positions,
            rope_theta=a.rope_theta, rms_norm_eps=a.rms_norm_eps)
        files = make_model(a.out_dir, spec, shards=a.shards, verbose=a.verbose)
    except ValueError as e:
        ap.error(str(e))
    n_params = sum(int(np.prod(s, dtype=np.int64)) for _, s, _ in tensor_specs(spec))
    print(f"wrote {a.out_dir}: {len(tensor_specs(spec))} tensors, {n_params} params, "
          f"{spec.dtype}, init_std {spec.init_std:.6g}, files {', '.join(files)}")


if __name__ == "__main__":
    main()
