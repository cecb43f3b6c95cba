#!/usr/bin/env python3
"""GGUF files for the numpy oracle, read with the `gguf` PyPI package (independent of rlt's C++):

  * load_gguf(path)       -> reference_ouro.OuroModel with float64 weights under the Hugging Face
                             names: every tensor dequantized by gguf.quants.dequantize (the
                             dequantization oracle), each head's Q/K rows put back from
                             llama.cpp's interleaved RoPE order (2i, 2i+1) into Hugging Face's
                             (i, i + d/2). `weights="bf16"` rounds the dequantized matrices to
                             bf16 first, as `rlt --dtype bf16` holds them.
  * write_hf_folder(...)  -> the same model as a Hugging Face folder (config.json as transformers
                             5 or 4 writes it, model.safetensors with bf16 or f32 matrices and f32
                             norms, generation_config.json, the chat template, and a tokenizer.json
                             when given one).

  * write_gguf(...)       -> a Hugging Face folder (llama or ouro) as a GGUF file the way llama.cpp's
                             converter writes it: its tensor names, Q/K rows interleaved, norms in
                             F32, matrices in their stored float type; for Ouro, the exit gate
                             dropped (as llama.cpp does) or kept under rlt's names.

Usage:
    gguf_model.py from-hf --model DIR --out FILE.gguf [--keep-exit-gate]
    gguf_model.py to-hf --gguf FILE --out DIR [--config-style v5|v4] [--dtype bf16|f32]
                        [--tokenizer-json FILE]
    gguf_model.py generate --gguf FILE --prompt-ids 1,2,3 --max-tokens N [--weights f32|bf16]
        prints {"tokens": [...]} (greedy, the float64 reference)
    gguf_model.py perplexity --gguf FILE --ids-file IDS.json [--ctx 512] [--max-chunks N]
        prints {"perplexity": ..., "scored_tokens": ...}: llama.cpp's chunking (see perplexity())

Architectures: llama and ouro as llama.cpp's converter writes them (see docs/launching.md).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402

import reference_ouro  # noqa: E402
from safetensors_io import f32_to_bf16_bits, bf16_bits_to_f32, write_safetensors_stream  # noqa: E402

LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    # Ouro's sandwich norms (llama.cpp's converter maps them to these names)
    "post_attention_norm.weight": "input_layernorm_2.weight",
    "post_ffw_norm.weight": "post_attention_layernorm_2.weight",
}
GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "exit_gate.weight": "model.early_exit_gate.weight",
    "exit_gate.bias": "model.early_exit_gate.bias",
}


def field(reader, key, default=None):
    f = reader.get_field(key)
    return default if f is None else f.contents()


def hf_name(name):
    if name in GLOBAL_NAMES:
        return GLOBAL_NAMES[name]
    _, layer, rest = name.split(".", 2)
    return f"model.layers.{layer}.{LAYER_NAMES[rest]}"


def uninterleave(w, n_heads):
    """Rows [heads * d] in llama.cpp's order (pairs 2i, 2i+1) -> Hugging Face's (i, i + d/2)."""
    rows, cols = w.shape
    d = rows // n_heads
    return w.reshape(n_heads, d // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def config_dict(reader, style="v5"):
    """config.json as transformers writes it for this model (v5: rope_parameters and the generic
    PretrainedConfig fields; v4: rope_theta at the top level)."""
    arch = field(reader, "general.architecture")
    if arch not in ("llama", "ouro"):
        raise ValueError(f"architecture {arch!r}: only llama and ouro")
    a = arch + "."
    heads = int(field(reader, a + "attention.head_count"))
    hidden = int(field(reader, a + "embedding_length"))
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    tied = not any(t.name == "output.weight" for t in reader.tensors)
    eps = float(np.float32(field(reader, a + "attention.layer_norm_rms_epsilon")))
    theta = float(field(reader, a + "rope.freq_base", 10000.0))
    c = {
        "architectures": ["LlamaForCausalLM" if arch == "llama" else "OuroForCausalLM"],
        "model_type": arch,
        "vocab_size": int(field(reader, a + "vocab_size", int(embd.shape[1]))),
        "hidden_size": hidden,
        "intermediate_size": int(field(reader, a + "feed_forward_length")),
        "num_hidden_layers": int(field(reader, a + "block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(field(reader, a + "attention.head_count_kv", heads)),
        "head_dim": int(field(reader, a + "attention.key_length", hidden // heads)),
        "hidden_act": "silu",
        "max_position_embeddings": int(field(reader, a + "context_length")),
        "rms_norm_eps": eps,
        "tie_word_embeddings": tied,
        "bos_token_id": field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": field(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": field(reader, "tokenizer.ggml.padding_token_id"),
    }
    if arch == "ouro":
        c["total_ut_steps"] = int(field(reader, "ouro.num_loops", 1))
        c["early_exit_threshold"] = 1.0
    else:
        c.update({"attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False, "pretraining_tp": 1})
    if style == "v5":
        c["rope_parameters"] = {"rope_theta": theta, "rope_type": "default"}
        c["dtype"] = "bfloat16"
        c["transformers_version"] = "5.24.0"
        # The generic fields transformers 5 writes out for every model.
        c.update({"_name_or_path": os.path.basename(reader.data.filename) if hasattr(reader.data, "filename") else "",
                  "chunk_size_feed_forward": 0, "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
                  "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "is_encoder_decoder": False, "output_attentions": False,
                  "output_hidden_states": False, "problem_type": None, "return_dict": True,
                  "unk_token_id": field(reader, "tokenizer.ggml.unknown_token_id"), "use_cache": True})
    else:
        c["rope_theta"] = theta
        c["torch_dtype"] = "bfloat16"
        c["transformers_version"] = "4.45.0"
        c["use_cache"] = True
    return {k: v for k, v in c.items() if v is not None or k in ("problem_type",)}


def dequantized_tensors(reader):
    """(HF name, float32 array in HF layout) for every tensor, Q/K rows un-interleaved."""
    arch = field(reader, "general.architecture")
    heads = int(field(reader, arch + ".attention.head_count"))
    kv_heads = int(field(reader, arch + ".attention.head_count_kv", heads))
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(x) for x in reversed(t.shape)])
        if t.name.endswith("attn_q.weight"):
            w = uninterleave(w, heads)
        elif t.name.endswith("attn_k.weight"):
            w = uninterleave(w, kv_heads)
        yield hf_name(t.name), w


def round_bf16(w):
    return bf16_bits_to_f32(f32_to_bf16_bits(w)).reshape(w.shape)


def load_gguf(path, weights="f32"):
    """The GGUF as a reference_ouro.OuroModel (float64 weights). weights="bf16": matrices rounded
    to bf16 as rlt --dtype bf16 holds them (vectors stay f32, as rlt keeps them)."""
    reader = gguf.GGUFReader(path)
    cfg = reference_ouro.parse_config(config_dict(reader, "v4"))
    w = {}
    for name, x in dequantized_tensors(reader):
        if weights == "bf16" and x.ndim == 2 and x.shape[0] > 1:
            x = round_bf16(x)
        w[name] = x.astype(np.float64)
    expected = reference_ouro.expected_shapes(cfg)
    if set(w) != set(expected):
        raise ValueError(f"tensor set differs: missing {sorted(set(expected) - set(w))[:3]}, "
                         f"unexpected {sorted(set(w) - set(expected))[:3]}")
    return reference_ouro.OuroModel(cfg, w)


def write_hf_folder(gguf_path, out_dir, style="v5", dtype="bf16", tokenizer_json=None):
    """The GGUF as a Hugging Face model folder. Matrices in `dtype` (bf16 rounded to nearest even
    from the dequantized f32, exactly as rlt's loader rounds them), vectors in f32."""
    reader = gguf.GGUFReader(gguf_path)
    os.makedirs(out_dir, exist_ok=True)
    config = config_dict(reader, style)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": config.get("bos_token_id"), "eos_token_id": config.get("eos_token_id")}, f)
    entries = []
    for name, w in dequantized_tensors(reader):
        if w.ndim == 1 or dtype == "f32":
            entries.append((name, "F32", w.shape, (lambda a=w: a)))
        else:
            entries.append((name, "BF16", w.shape, (lambda a=w: f32_to_bf16_bits(a).reshape(a.shape))))
    write_safetensors_stream(os.path.join(out_dir, "model.safetensors"), entries)
    template = field(reader, "tokenizer.chat_template")
    tokens = field(reader, "tokenizer.ggml.tokens")
    specials = {}
    for key, name in (("bos_token_id", "bos_token"), ("eos_token_id", "eos_token"),
                      ("unknown_token_id", "unk_token"), ("padding_token_id", "pad_token")):
        i = field(reader, "tokenizer.ggml." + key)
        if i is not None:
            specials[name] = tokens[int(i)]
    tok_config = dict(specials)
    if template and style == "v5":
        # transformers >= 4.4x saves the template next to tokenizer_config.json.
        with open(os.path.join(out_dir, "chat_template.jinja"), "w") as f:
            f.write(template)
    elif template:
        tok_config["chat_template"] = template
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tok_config, f, indent=2)
    if tokenizer_json:
        with open(tokenizer_json, "rb") as src, open(os.path.join(out_dir, "tokenizer.json"), "wb") as dst:
            dst.write(src.read())


def perplexity(model, ids, ctx=512, max_chunks=0, bos=None):
    """llama.cpp's perplexity: chunks of `ctx` tokens, each evaluated from scratch; the second half
    of each chunk scored (position j's logits predict token j + 1, for ctx/2 <= j < ctx - 1); with
    a `bos` id, every chunk starts with it (the tokenizer adds BOS)."""
    chunks = len(ids) // ctx
    if max_chunks:
        chunks = min(chunks, max_chunks)
    first = ctx // 2
    nll, scored = 0.0, 0
    for c in range(chunks):
        chunk = np.array(ids[c * ctx:(c + 1) * ctx])
        if bos is not None:
            chunk[0] = bos
        logits = reference_ouro.forward_prompt(model, chunk)["logits"][-1]  # the last loop
        rows = logits[first:ctx - 1]
        m = rows.max(axis=1, keepdims=True)
        lse = (m[:, 0] + np.log(np.exp(rows - m).sum(axis=1)))
        nll += float(np.sum(lse - rows[np.arange(rows.shape[0]), chunk[first + 1:ctx]]))
        scored += rows.shape[0]
    return {"perplexity": float(np.exp(nll / scored)), "mean_nll": nll / scored, "scored_tokens": scored,
            "chunks": chunks, "ctx": ctx}


def interleave(w, n_heads):
    """Hugging Face Q/K rows (i, i + d/2) -> llama.cpp's (2i, 2i+1): its converter's permute."""
    rows, cols = w.shape
    return w.reshape(n_heads, 2, rows // n_heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def write_gguf(model_dir, out_path, keep_exit_gate=False):
    """The folder's model as a GGUF file (F32 norms, matrices in their stored F32/BF16/F16)."""
    from safetensors_io import read_safetensors
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    arch = cfg["model_type"]
    if arch not in ("llama", "ouro"):
        raise ValueError(f"model_type {arch!r}: only llama and ouro")
    heads, kv_heads = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    w = gguf.GGUFWriter(out_path, arch)
    a = arch + "."
    w.add_uint32(a + "context_length", cfg["max_position_embeddings"])
    w.add_uint32(a + "embedding_length", cfg["hidden_size"])
    w.add_uint32(a + "block_count", cfg["num_hidden_layers"])
    w.add_uint32(a + "feed_forward_length", cfg["intermediate_size"])
    w.add_uint32(a + "attention.head_count", heads)
    w.add_uint32(a + "attention.head_count_kv", kv_heads)
    w.add_uint32(a + "attention.key_length", head_dim)
    w.add_uint32(a + "attention.value_length", head_dim)
    w.add_float32(a + "attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"])
    w.add_float32(a + "rope.freq_base", cfg.get("rope_theta", 10000.0))
    w.add_uint32(a + "rope.dimension_count", head_dim)
    w.add_uint32(a + "vocab_size", cfg["vocab_size"])
    if arch == "ouro":
        w.add_uint32("ouro.num_loops", cfg["total_ut_steps"])
        w.add_bool("ouro.skip_loop_final_norm", False)
        if keep_exit_gate:
            w.add_float32("ouro.early_exit_threshold", cfg.get("early_exit_threshold", 1.0))
    for key in ("bos_token_id", "eos_token_id"):
        if isinstance(cfg.get(key), int):
            w.add_uint32("tokenizer.ggml." + key, cfg[key])
    to_gguf = {v: k for k, v in GLOBAL_NAMES.items()}
    layer_to_gguf = {v: k for k, v in LAYER_NAMES.items()}
    gguf_types = {"BF16": gguf.GGMLQuantizationType.BF16, "F16": gguf.GGMLQuantizationType.F16,
                  "F32": gguf.GGMLQuantizationType.F32}
    for name, (dtype, raw) in sorted(read_safetensors(os.path.join(model_dir, "model.safetensors")).items()):
        if name.startswith("model.early_exit_gate.") and not keep_exit_gate:
            continue  # llama.cpp's converter drops it
        if name.startswith("model.layers."):
            _, _, layer, rest = name.split(".", 3)
            out_name = f"blk.{layer}.{layer_to_gguf[rest]}"
        else:
            out_name = to_gguf[name]
        if raw.ndim == 1 or name.startswith("model.early_exit_gate."):
            w.add_tensor(out_name, raw_to_f32(dtype, raw))  # vectors and the gate in F32, as the converter
            continue
        if name.endswith("q_proj.weight"):
            raw = interleave(raw, heads)
        elif name.endswith("k_proj.weight"):
            raw = interleave(raw, kv_heads)
        raw = np.ascontiguousarray(raw)
        if dtype == "BF16":
            w.add_tensor(out_name, raw.view(np.uint16), raw_dtype=gguf_types[dtype])
        else:
            w.add_tensor(out_name, raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def raw_to_f32(dtype, raw):
    if dtype == "BF16":
        return bf16_bits_to_f32(raw).reshape(raw.shape)
    return np.asarray(raw, dtype=np.float32)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    fh = sub.add_parser("from-hf", help="write a Hugging Face folder as a GGUF file (llama.cpp's layout)")
    fh.add_argument("--model", required=True)
    fh.add_argument("--out", required=True)
    fh.add_argument("--keep-exit-gate", action="store_true")
    h = sub.add_parser("to-hf", help="write the GGUF as a Hugging Face folder")
    h.add_argument("--gguf", required=True)
    h.add_argument("--out", required=True)
    h.add_argument("--config-style", choices=["v5", "v4"], default="v5")
    h.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    h.add_argument("--tokenizer-json")
    g = sub.add_parser("generate", help="greedy tokens of the float64 reference")
    g.add_argument("--gguf", required=True)
    g.add_argument("--prompt-ids", required=True)
    g.add_argument("--max-tokens", type=int, default=16)
    g.add_argument("--weights", choices=["f32", "bf16"], default="f32")
    p = sub.add_parser("perplexity", help="perplexity of the float64 reference, chunked as llama.cpp")
    p.add_argument("--gguf", required=True)
    p.add_argument("--ids-file", required=True, help="a JSON array of token ids")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--max-chunks", type=int, default=0)
    p.add_argument("--weights", choices=["f32", "bf16"], default="f32")
    a = ap.parse_args(argv)
    if a.cmd == "from-hf":
        write_gguf(a.model, a.out, a.keep_exit_gate)
        print(f"wrote {a.out}")
        return
    if a.cmd == "to-hf":
        write_hf_folder(a.gguf, a.out, a.config_style, a.dtype, a.tokenizer_json)
        print(f"wrote {a.out}")
        return
    model = load_gguf(a.gguf, a.weights)
    if a.cmd == "perplexity":
        with open(a.ids_file) as f:
            ids = np.asarray(json.load(f), dtype=np.int64)
        print(json.dumps(perplexity(model, ids, a.ctx, a.max_chunks)))
        return
    prompt = [int(x) for x in a.prompt_ids.split(",")]
    res = reference_ouro.generate(model, prompt, a.max_tokens)
    print(json.dumps({"tokens": res["tokens"].tolist()}))


if __name__ == "__main__":
    main()
