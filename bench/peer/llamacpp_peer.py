#!/usr/bin/env python3
"""rlt against llama.cpp on the same random Llama (or Nanbeige) weights, on the same machine, in one run.

For each dtype (bf16, f16) the script
  1. writes a random plain-Llama checkpoint with tools/make_model.py (--arch llama; default the
     llama-1.4b preset = the Ouro-1.4B shape without loops, sandwich norms or exit gate) into a
     cache folder, reused when complete;
  2. converts the very same weights to GGUF (llama.cpp's format) with the `gguf` package: matrices
     copied bit for bit (BF16/F16, no re-rounding), norms widened exactly to F32, q/k rows
     permuted for llama.cpp's interleaved-pair RoPE (see rope_rows_to_interleaved) so both engines
     compute the same function; every tensor is read back and compared byte for byte;
  3. optionally checks that llama.cpp computes the checkpoint's function (its first-token logits
     against the float64 numpy oracle for small shapes, and against `rlt generate`);
  4. times llama.cpp through llama-cpp-python: pp = prompt tokens / time of one llm.eval(prompt)
     on a fresh context (the whole prompt in one batch); tg = (G - 1) / time of the G - 1
     single-token evals of a greedy generation (the first token comes from the prompt's logits);
  5. times `rlt bench` on the safetensors folder (1 request, concurrency 1, same prompt length,
     output length and threads) and reads full_depth.prefill_tokens_per_s / decode_tokens_per_s,
     defined the same way (pp = P / time to first token, tg = (G - 1) / time after it);
  6. prints raw tokens/s of both engines and the rlt / llama.cpp ratios, best of --reps each.

Usage (quick smoke run, then the real one):
    .venv/bin/python bench/peer/llamacpp_peer.py --num-layers 2 --prompt-len 64 --gen-len 8 --reps 1
    .venv/bin/python bench/peer/llamacpp_peer.py --out peer.json

With a nanbeige-* preset (or --arch nanbeige) the checkpoint is a Nanbeige4.2 (the whole layer
stack num_loops times, model.norm after every loop) and the GGUF uses llama.cpp's `nanbeige`
architecture (block_count = the physical layers, nanbeige.num_loops, q/k permuted as for llama):
    .venv/bin/python bench/peer/llamacpp_peer.py --preset nanbeige-4.2-3b --dtype bf16 --out nb.json

See bench/peer/README.md for what is held equal between the two engines.
"""

import argparse
import datetime
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import make_model as mm  # noqa: E402
from safetensors_io import raw_to_float64, read_safetensors  # noqa: E402

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
# The release build's binary (the CMake tree keeps it under src/cli/; a top-level copy wins).
DEFAULT_RLT_BIN = next((p for p in (os.path.join(ROOT, "build", "release", "rlt"),
                                    os.path.join(ROOT, "build", "release", "src", "cli", "rlt"))
                        if os.path.exists(p)), os.path.join(ROOT, "build", "release", "src", "cli", "rlt"))
CHECK_PROMPT_LEN = 16
# Above this the numpy oracle widens one tensor at a time (lazy) instead of all at load.
ORACLE_MAX_PARAMS = 400_000_000
# First-token logits of llama.cpp vs the float64 oracle / rlt. llama.cpp rounds activations to
# the weight dtype before each matmul (bf16: 8 bits of mantissa), so agreement is ~1e-2, not 1e-6;
# a wrong conversion (RoPE pairing, missing norm, transposed matrix) gives O(1) differences.
CHECK_REL_TOL = 0.05


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Dependencies
# --------------------------------------------------------------------------------------------

def cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def llama_cmake_args():
    """CMAKE_ARGS for building llama.cpp, or None for its native default. On CPUs with AMX,
    llama.cpp 0.3.36 built natively (-march=native turns its AMX backend on) crashed in
    ggml_backend_amx_mul_mat on every batch of more than one token (Xeon with AMX, 2026-12-04), so
    there the ISA is listed explicitly with AMX off: every other extension the CPU has stays on."""
    flags = cpu_flags()
    if "amx_int8" not in flags:
        return None
    isa = {"GGML_AVX": "avx", "GGML_AVX2": "avx2", "GGML_FMA": "fma", "GGML_F16C": "f16c",
           "GGML_BMI2": "bmi2", "GGML_AVX512": "avx512f", "GGML_AVX512_VBMI": "avx512vbmi",
           "GGML_AVX512_VNNI": "avx512_vnni", "GGML_AVX512_BF16": "avx512_bf16",
           "GGML_AVX_VNNI": "avx_vnni"}
    args = ["-DGGML_NATIVE=OFF"] + [f"-D{k}={'ON' if v in flags else 'OFF'}" for k, v in isa.items()]
    return " ".join(args + ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"])


def ensure_deps():
    """Import llama_cpp and gguf, building llama-cpp-python from source (native CPU) if needed."""
    try:
        import gguf  # noqa: F401
        import llama_cpp  # noqa: F401
    except ImportError:
        cmd = [sys.executable, "-m", "pip", "install", "--no-binary", "llama-cpp-python",
               f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "gguf"]
        env = dict(os.environ)
        cmake_args = llama_cmake_args()
        if cmake_args and "CMAKE_ARGS" not in env:
            env["CMAKE_ARGS"] = cmake_args
            log(f"this CPU has AMX: building llama.cpp with CMAKE_ARGS={cmake_args}")
        log("installing the llama.cpp Python binding (builds llama.cpp from source, minutes): " + " ".join(cmd))
        subprocess.run(cmd, check=True, env=env)
        importlib.invalidate_caches()
    import gguf
    import llama_cpp
    return llama_cpp, gguf


# --------------------------------------------------------------------------------------------
# Checkpoints: safetensors (rlt) and GGUF (llama.cpp) of the same weights
# --------------------------------------------------------------------------------------------

def spec_key(spec):
    """Everything that determines the weights bit for bit (compared with the cache marker)."""
    return {"config": mm.config_dict(spec), "seed": spec.seed, "init_std": spec.init_std,
            "dtype": spec.dtype}


def _read_marker(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def ensure_checkpoint(spec, hf_dir):
    """make_model into hf_dir unless a complete checkpoint of the same spec is already there."""
    marker = os.path.join(hf_dir, "rlt_peer_complete.json")
    if _read_marker(marker) == spec_key(spec):
        log(f"reusing {hf_dir}")
        return
    tmp = hf_dir + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(hf_dir, ignore_errors=True)
    log(f"writing the {spec.dtype} checkpoint to {hf_dir} ...")
    t0 = time.perf_counter()
    mm.make_model(tmp, spec)
    with open(os.path.join(tmp, "rlt_peer_complete.json"), "w", encoding="utf-8") as f:
        json.dump(spec_key(spec), f, indent=1)
    os.replace(tmp, hf_dir)
    log(f"  done in {time.perf_counter() - t0:.1f} s")


def load_raw_tensors(hf_dir):
    """{name: (safetensors dtype, memory-mapped raw array)} over single or sharded files."""
    out = {}
    for fname in sorted(os.listdir(hf_dir)):
        if fname.endswith(".safetensors"):
            out.update(read_safetensors(os.path.join(hf_dir, fname)))
    return out


def rope_rows_to_interleaved(w, n_heads):
    """Reorder the rows of a q_proj/k_proj weight [n_heads * d, in] for llama.cpp.

    HF Llama rotates dimension i of a head together with i + d/2 (rotate_half); llama.cpp's llama
    architecture rotates the adjacent pair (2i, 2i + 1) with the same frequency theta^(-2i/d).
    Moving row (head, half s, i) to (head, 2 i + s) turns the first into the second; applied to
    both q and k it leaves every q.k score unchanged, so the two engines compute one function.
    """
    rows, cols = w.shape
    d = rows // n_heads
    return np.ascontiguousarray(w.reshape(n_heads, 2, d // 2, cols).swapaxes(1, 2).reshape(rows, cols))


def gpt2_byte_chars():
    """The byte -> printable character table of byte-level BPE vocabularies (GPT-2 style):
    printable Latin-1 bytes map to themselves, the other 68 to U+0100 onwards in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return [table[b] for b in range(256)]


def placeholder_vocab(vocab_size):
    """A loadable byte-level vocabulary of exactly vocab_size tokens: 0 = <|endoftext|> (control,
    bos = eos = 0 as in the checkpoint's config), 1..256 = the 256 byte characters, then filler
    strings. The benchmark feeds token ids directly, so the vocabulary only has to load (llama.cpp
    insists on a newline token, which the byte characters provide)."""
    if vocab_size < 258:
        raise ValueError("the GGUF placeholder vocabulary needs vocab_size >= 258")
    tokens = ["<|endoftext|>"] + gpt2_byte_chars() + ["\u0120\u0120"]
    tokens += [f"[tok{i}]" for i in range(len(tokens), vocab_size)]
    types = [3] + [1] * (vocab_size - 1)  # gguf.TokenType: CONTROL, NORMAL
    return tokens, types, ["\u0120 \u0120"]


def gguf_tensors(spec, raw):
    """(gguf name, HF name, array to store, ggml type name) for every tensor, in llama.cpp order."""
    def mat(name):
        return raw[name][1]

    def norm(name):
        return raw_to_float64(*raw[name]).astype(np.float32)  # exact widening

    out = [("token_embd.weight", "model.embed_tokens.weight", mat("model.embed_tokens.weight"), "mat")]
    for i in range(spec.num_layers):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        out += [
            (b + "attn_norm.weight", p + "input_layernorm.weight", norm(p + "input_layernorm.weight"), "f32"),
            (b + "attn_q.weight", p + "self_attn.q_proj.weight",
             rope_rows_to_interleaved(mat(p + "self_attn.q_proj.weight"), spec.num_heads), "mat"),
            (b + "attn_k.weight", p + "self_attn.k_proj.weight",
             rope_rows_to_interleaved(mat(p + "self_attn.k_proj.weight"), spec.num_kv_heads), "mat"),
            (b + "attn_v.weight", p + "self_attn.v_proj.weight", mat(p + "self_attn.v_proj.weight"), "mat"),
            (b + "attn_output.weight", p + "self_attn.o_proj.weight", mat(p + "self_attn.o_proj.weight"), "mat"),
            (b + "ffn_norm.weight", p + "post_attention_layernorm.weight",
             norm(p + "post_attention_layernorm.weight"), "f32"),
            (b + "ffn_gate.weight", p + "mlp.gate_proj.weight", mat(p + "mlp.gate_proj.weight"), "mat"),
            (b + "ffn_up.weight", p + "mlp.up_proj.weight", mat(p + "mlp.up_proj.weight"), "mat"),
            (b + "ffn_down.weight", p + "mlp.down_proj.weight", mat(p + "mlp.down_proj.weight"), "mat"),
        ]
    out.append(("output_norm.weight", "model.norm.weight", norm("model.norm.weight"), "f32"))
    if not spec.tie_word_embeddings:  # tied: llama.cpp falls back to token_embd for the head
        out.append(("output.weight", "lm_head.weight", mat("lm_head.weight"), "mat"))
    return out


def write_gguf(gguf, spec, hf_dir, path):
    """Convert the safetensors checkpoint in hf_dir to a llama-architecture GGUF at path."""
    if spec.rope_scaling is not None:
        raise ValueError("the peer benchmark converts plain-RoPE checkpoints only")
    st_dtype = mm.DTYPES[spec.dtype][0]
    qt = gguf.GGMLQuantizationType
    mat_type = {"BF16": qt.BF16, "F16": qt.F16, "F32": qt.F32}[st_dtype]
    file_type = {"BF16": gguf.LlamaFileType.MOSTLY_BF16, "F16": gguf.LlamaFileType.MOSTLY_F16,
                 "F32": gguf.LlamaFileType.ALL_F32}[st_dtype]
    raw = load_raw_tensors(hf_dir)

    tmp = path + ".partial"
    arch = spec.arch  # "llama" or "nanbeige" (llama.cpp's names)
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(os.path.basename(os.path.dirname(path)))
    w.add_context_length(spec.max_positions)
    w.add_embedding_length(spec.hidden_size)
    w.add_block_count(spec.num_layers)
    w.add_feed_forward_length(spec.intermediate_size)
    w.add_head_count(spec.num_heads)
    w.add_head_count_kv(spec.num_kv_heads)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)
    w.add_layer_norm_rms_eps(float(spec.rms_norm_eps))
    w.add_rope_freq_base(float(spec.rope_theta))
    w.add_rope_dimension_count(spec.head_dim)
    w.add_vocab_size(spec.vocab_size)
    if arch == "nanbeige":
        w.add_uint32(f"{arch}.num_loops", spec.loops)
        w.add_bool(f"{arch}.skip_loop_final_norm", False)
    w.add_file_type(int(file_type))
    tokens, types, merges = placeholder_vocab(spec.vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(spec.eos_token_id)
    w.add_add_bos_token(False)

    for gname, _, arr, kind in gguf_tensors(spec, raw):
        if kind == "f32":
            w.add_tensor(gname, arr)
        elif mat_type == qt.BF16:
            w.add_tensor(gname, arr, raw_dtype=qt.BF16)  # uint16 bit patterns, stored as is
        else:
            w.add_tensor(gname, arr)  # float16 / float32 storage, stored as is
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def verify_gguf(gguf, spec, hf_dir, path):
    """Read the GGUF back: every tensor must equal its (permuted) safetensors bytes exactly."""
    raw = load_raw_tensors(hf_dir)
    reader = gguf.GGUFReader(path)
    stored = {t.name: t for t in reader.tensors}
    want = gguf_tensors(spec, raw)
    if set(stored) != {g for g, _, _, _ in want}:
        raise RuntimeError(f"{path}: tensor set differs from the checkpoint's")
    for gname, hname, arr, _ in want:
        t = stored[gname]
        if [int(x) for x in t.shape] != list(reversed(arr.shape)):
            raise RuntimeError(f"{gname}: GGUF shape {list(t.shape)} vs {hname} {list(arr.shape)}")
        a = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
        b = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        if not np.array_equal(a, b):
            raise RuntimeError(f"{gname}: GGUF bytes differ from {hname}")
    return len(want)


def ensure_gguf(gguf, spec, hf_dir, path):
    marker = path + ".complete.json"
    if _read_marker(marker) == spec_key(spec) and os.path.exists(path):
        log(f"reusing {path}")
        return
    log(f"converting to GGUF: {path} ...")
    t0 = time.perf_counter()
    write_gguf(gguf, spec, hf_dir, path)
    n = verify_gguf(gguf, spec, hf_dir, path)
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(spec_key(spec), f, indent=1)
    log(f"  {n} tensors written and verified byte for byte in {time.perf_counter() - t0:.1f} s")


# --------------------------------------------------------------------------------------------
# llama.cpp
# --------------------------------------------------------------------------------------------

class LlamaCppRunner:
    def __init__(self, llama_cpp, gguf_path, n_ctx, n_batch, threads, flash_attn):
        self.lc = llama_cpp
        self.llm = llama_cpp.Llama(model_path=gguf_path, n_ctx=n_ctx, n_threads=threads,
                                   n_threads_batch=threads, n_batch=n_batch, n_ubatch=n_batch,
                                   logits_all=False, flash_attn=flash_attn, verbose=False)
        self.n_vocab = self.llm.n_vocab()

    def last_logits(self):
        """The logits of the last evaluated token (reading them waits for the computation)."""
        ptr = self.lc.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def prefill(self, prompt):
        self.llm.reset()  # the next eval drops the cached K/V from position 0 on
        self.llm.eval(prompt)
        return self.last_logits()

    def timed_run(self, prompt, gen_len):
        """(pp seconds, tg seconds for gen_len - 1 decode steps, greedy tokens)."""
        t0 = time.perf_counter()
        tok = int(np.argmax(self.prefill(prompt)))
        t1 = time.perf_counter()
        tokens = [tok]
        for _ in range(gen_len - 1):
            self.llm.eval([tok])
            tok = int(np.argmax(self.last_logits()))
            tokens.append(tok)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, tokens

    def close(self):
        self.llm.close()


def bench_llamacpp(llama_cpp, gguf_path, prompt, gen_len, threads, reps, flash_attn):
    P = len(prompt)
    runner = LlamaCppRunner(llama_cpp, gguf_path, P + gen_len + 16, P, threads, flash_attn)
    try:
        runner.timed_run(prompt, min(gen_len, 4))  # warm-up: page in the weights, size buffers
        pp, tg = [], []
        for r in range(reps):
            t_pp, t_tg, _ = runner.timed_run(prompt, gen_len)
            pp.append(P / t_pp)
            if gen_len > 1:
                tg.append((gen_len - 1) / t_tg)
            log(f"  llama.cpp rep {r + 1}: pp {pp[-1]:.1f} tok/s, tg {tg[-1] if tg else float('nan'):.2f} tok/s")
    finally:
        runner.close()
    return {"pp_tokens_per_s": max(pp), "tg_tokens_per_s": max(tg) if tg else None,
            "pp_all": pp, "tg_all": tg}


# --------------------------------------------------------------------------------------------
# rlt
# --------------------------------------------------------------------------------------------

def _run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def _tail(text, n=600):
    text = (text or "").strip()
    return text[-n:] if len(text) > n else text


def rlt_bench_once(rlt_bin, hf_dir, P, G, threads, extra):
    base = [rlt_bin, "--log-level", "warn", "bench", "--model", hf_dir, "--num-requests", "1",
            "--concurrency", "1", "--prompt-len", str(P), "--output-len", str(G), "--threads", str(threads),
            # the whole prompt in one batch, as llama.cpp's n_batch = n_ubatch = P
            "--prefill-chunk-size", str(P), "--max-num-batched-tokens", str(max(P, 128)),
            # one untimed request first, as llama.cpp is warmed up once in-process
            "--warmup-requests", "1", "--no-roofline"] + list(extra)
    out = _run(base)  # prints its JSON report on stdout
    if out.returncode != 0:
        raise RuntimeError(f"rlt bench failed (exit {out.returncode}): {_tail(out.stderr or out.stdout)}")
    text = out.stdout
    try:
        return json.loads(text[text.index("{"):])
    except ValueError:
        raise RuntimeError(f"rlt bench printed no JSON: {_tail(text)}") from None


def bench_rlt(rlt_bin, hf_dir, P, G, threads, reps, extra):
    pp, tg, raw = [], [], None
    for r in range(reps):
        raw = rlt_bench_once(rlt_bin, hf_dir, P, G, threads, extra)
        full = raw.get("full_depth", {})
        if "prefill_tokens_per_s" not in full or "decode_tokens_per_s" not in full:
            raise RuntimeError("rlt bench JSON has no full_depth.prefill_tokens_per_s / decode_tokens_per_s "
                               f"(this rlt predates them); full_depth = {json.dumps(full)}")
        pp.append(float(full["prefill_tokens_per_s"]))
        tg.append(float(full["decode_tokens_per_s"]))
        log(f"  rlt rep {r + 1}: pp {pp[-1]:.1f} tok/s, tg {tg[-1]:.2f} tok/s")
    return {"pp_tokens_per_s": max(pp), "tg_tokens_per_s": max(tg), "pp_all": pp, "tg_all": tg,
            "last_json": raw}


def rlt_first_logits(rlt_bin, hf_dir, prompt, trace_path):
    cmd = [rlt_bin, "--log-level", "warn", "generate", "--model", hf_dir,
           "--prompt-ids", ",".join(str(t) for t in prompt), "--max-tokens", "1", "--ignore-eos",
           "--trace-out", trace_path]
    out = _run(cmd)
    if out.returncode != 0:
        raise RuntimeError(f"rlt generate failed (exit {out.returncode}): {_tail(out.stderr)}")
    with open(trace_path, encoding="utf-8") as f:
        return np.asarray(json.load(f)["steps"][0]["logits"], dtype=np.float64)


# --------------------------------------------------------------------------------------------
# Same-function check
# --------------------------------------------------------------------------------------------

def compare_logits(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    rel = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))
    top2 = np.sort(ref)[-2:]
    return {"rel_err": rel, "same_argmax": int(np.argmax(got)) == int(np.argmax(ref)),
            "ref_top2_gap": float(top2[1] - top2[0]), "ok": rel <= CHECK_REL_TOL}


def same_function_check(llama_cpp, spec, hf_dir, gguf_path, rlt_bin, threads, workdir, seed, flash_attn):
    """llama.cpp's first-token logits for a short prompt vs the oracle and vs rlt."""
    rng = np.random.default_rng(seed + 1)
    prompt = [int(x) for x in rng.integers(0, spec.vocab_size, size=CHECK_PROMPT_LEN)]
    runner = LlamaCppRunner(llama_cpp, gguf_path, CHECK_PROMPT_LEN + 16, CHECK_PROMPT_LEN, threads, flash_attn)
    try:
        ours = np.array(runner.prefill(prompt), dtype=np.float64)
    finally:
        runner.close()
    result = {"prompt_len": CHECK_PROMPT_LEN}
    n_params = sum(int(np.prod(s)) for _, s, _ in mm.tensor_specs(spec))
    import reference_ouro
    model = reference_ouro.load_model(hf_dir, lazy=n_params > ORACLE_MAX_PARAMS)
    ref = reference_ouro.forward_prompt(model, prompt)["logits"][-1, -1]  # after the last loop
    del model
    result["llamacpp_vs_oracle"] = compare_logits(ours, ref)
    try:
        theirs = rlt_first_logits(rlt_bin, hf_dir, prompt, os.path.join(workdir, "check_trace.json"))
        result["llamacpp_vs_rlt"] = compare_logits(ours, theirs)
    except (RuntimeError, OSError, KeyError, ValueError) as e:
        result["llamacpp_vs_rlt"] = f"skipped: {e}"
    return result


def _check_line(name, c):
    if isinstance(c, str):
        return f"  {name}: {c}"
    verdict = "ok" if c["ok"] else "MISMATCH"
    return (f"  {name}: max rel err {c['rel_err']:.2e} (tolerance {CHECK_REL_TOL}), same argmax "
            f"{c['same_argmax']} (reference top-2 gap {c['ref_top2_gap']:.3g}) -> {verdict}")


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _fmt(x, digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}"


def _ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def print_table(rows, machine):
    head = ["dtype", "pp tok/s rlt", "pp tok/s llama.cpp", "pp ratio", "tg tok/s rlt", "tg tok/s llama.cpp",
            "tg ratio"]
    body = []
    for r in rows:
        body.append([r["dtype"], _fmt(r["rlt"].get("pp_tokens_per_s")), _fmt(r["llamacpp"].get("pp_tokens_per_s")),
                     _fmt(r["pp_ratio"], 2), _fmt(r["rlt"].get("tg_tokens_per_s"), 2),
                     _fmt(r["llamacpp"].get("tg_tokens_per_s"), 2), _fmt(r["tg_ratio"], 2)])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    load = machine.get("loadavg_1min_at_start")
    print(f"machine: {machine['cpu']}, {machine['threads']} threads (of {machine['cpu_count']} CPUs), "
          f"{machine['date']}, load average at start {load}; llama-cpp-python {machine['llama_cpp_python']}")
    print(f"model: {machine['model']}; prompt {machine['prompt_len']} tokens, {machine['gen_len']} generated, "
          f"best of {machine['reps']}; ratio = rlt / llama.cpp (> 1: rlt faster)")
    print(" | ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("-+-".join("-" * w for w in widths))
    for b in body:
        print(" | ".join(v.ljust(w) for v, w in zip(b, widths)))
    for r in rows:
        for engine in ("rlt", "llamacpp"):
            if "error" in r[engine]:
                print(f"{r['dtype']} {engine}: {r[engine]['error']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description="rlt vs llama.cpp on the same random Llama or Nanbeige weights")
    ap.add_argument("--preset", choices=sorted(mm.PRESETS), default="llama-1.4b")
    ap.add_argument("--arch", choices=("llama", "nanbeige"), default=None,
                    help="default: nanbeige for the nanbeige-* presets, else llama")
    ap.add_argument("--loops", type=int, default=None, help="nanbeige: num_loops (default: the preset's)")
    for flag in ("--num-layers", "--vocab-size", "--hidden-size", "--intermediate-size", "--num-heads",
                 "--num-kv-heads", "--head-dim"):
        ap.add_argument(flag, type=int, default=None)
    ap.add_argument("--seed", type=int, default=0, help="weight seed (make_model)")
    ap.add_argument("--dtype", default="bf16,f16", help="comma-separated list of bf16, f16, f32")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per engine; the best is reported")
    ap.add_argument("--cache-dir", default=os.path.join(os.path.expanduser("~"), ".cache", "rlt", "peer"))
    ap.add_argument("--rlt-bin", default=os.environ.get("RLT_BIN", DEFAULT_RLT_BIN))
    ap.add_argument("--rlt-arg", action="append", default=[],
                    help="extra argument for `rlt bench` (repeat the flag for several)")
    ap.add_argument("--llamacpp-flash-attn", choices=("on", "off"), default="on",
                    help="llama.cpp flash attention (its fastest CPU setting; default on)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the same-function check (llama.cpp logits vs the oracle and rlt)")
    ap.add_argument("--skip-rlt", action="store_true")
    ap.add_argument("--no-rlt-bf16-activations", action="store_true",
                    help="for bf16 weights, do not also run rlt with --activation-dtype bf16 (the precision "
                         "llama.cpp computes bf16 weights with: activations rounded to bf16)")
    ap.add_argument("--skip-llamacpp", action="store_true")
    ap.add_argument("--out", help="also write the results as JSON here")
    a = ap.parse_args(argv)
    dtypes = [d.strip() for d in a.dtype.split(",") if d.strip()]
    for d in dtypes:
        if d not in mm.DTYPES:
            ap.error(f"--dtype {d}: want one of {sorted(mm.DTYPES)}")
    if a.prompt_len < 1 or a.gen_len < 2 or a.reps < 1 or a.threads < 1:
        ap.error("need --prompt-len >= 1, --gen-len >= 2, --reps >= 1, --threads >= 1")
    overrides = dict(num_layers=a.num_layers, vocab_size=a.vocab_size, hidden_size=a.hidden_size,
                     intermediate_size=a.intermediate_size, num_heads=a.num_heads,
                     num_kv_heads=a.num_kv_heads, head_dim=a.head_dim)
    arch = a.arch or ("nanbeige" if mm.PRESET_ARCH.get(a.preset) == "nanbeige" else "llama")
    if a.loops is not None:
        if arch != "nanbeige":
            ap.error("--loops is for --arch nanbeige")
        overrides["loops"] = a.loops
    try:
        specs = {d: mm.ModelSpec(preset=a.preset, arch=arch, dtype=d, seed=a.seed, **overrides) for d in dtypes}
    except ValueError as e:
        ap.error(str(e))
    spec0 = specs[dtypes[0]]
    if a.prompt_len + a.gen_len > spec0.max_positions:
        ap.error("prompt + generated tokens exceed max_position_embeddings")

    llama_cpp, gguf = ensure_deps()
    system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    log(f"llama-cpp-python {llama_cpp.__version__}")
    log("llama.cpp system info: " + system_info)

    suffix = "".join(f"-{k.replace('_', '')}{v}" for k, v in overrides.items() if v is not None)
    name = f"{a.preset}{'' if arch == mm.PRESET_ARCH.get(a.preset, 'ouro') else '-' + arch}{suffix}-seed{a.seed}"
    machine = {"cpu": cpu_model(), "threads": a.threads, "cpu_count": os.cpu_count(),
               "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
               "llama_cpp_python": llama_cpp.__version__, "llamacpp_system_info": system_info, "model": name,
               "prompt_len": a.prompt_len, "gen_len": a.gen_len, "reps": a.reps,
               "llamacpp_flash_attn": a.llamacpp_flash_attn, "rlt_bin": a.rlt_bin,
               "rlt_extra_args": a.rlt_arg}
    try:
        machine["loadavg_1min_at_start"] = round(os.getloadavg()[0], 2)
        if machine["loadavg_1min_at_start"] > 0.5:
            log(f"WARNING: 1-minute load average {machine['loadavg_1min_at_start']} before starting: llama.cpp's "
                "threads spin at every barrier, so other load on the cores distorts its numbers badly")
    except OSError:
        pass
    rng = np.random.default_rng(a.seed)
    prompt = [int(x) for x in rng.integers(0, spec0.vocab_size, size=a.prompt_len)]

    rows, failed_check = [], False
    for d in dtypes:
        spec = specs[d]
        folder = os.path.join(a.cache_dir, f"{name}-{d}")
        hf_dir, gguf_path = os.path.join(folder, "hf"), os.path.join(folder, "model.gguf")
        os.makedirs(folder, exist_ok=True)
        log(f"== {d}: {folder}")
        ensure_checkpoint(spec, hf_dir)
        ensure_gguf(gguf, spec, hf_dir, gguf_path)
        row = {"dtype": d, "hf_dir": hf_dir, "gguf": gguf_path, "rlt": {}, "llamacpp": {}}
        if not a.no_check:
            log("same-function check ...")
            row["check"] = same_function_check(llama_cpp, spec, hf_dir, gguf_path, a.rlt_bin, a.threads, folder,
                                               a.seed, a.llamacpp_flash_attn == "on")
            for key in ("llamacpp_vs_oracle", "llamacpp_vs_rlt"):
                log(_check_line(key, row["check"][key]))
                if isinstance(row["check"][key], dict) and not row["check"][key]["ok"]:
                    failed_check = True
        if not a.skip_llamacpp:
            log("llama.cpp ...")
            try:
                row["llamacpp"] = bench_llamacpp(llama_cpp, gguf_path, prompt, a.gen_len, a.threads, a.reps,
                                                 a.llamacpp_flash_attn == "on")
            except Exception as e:  # report and go on with rlt
                row["llamacpp"] = {"error": f"{type(e).__name__}: {e}"}
        if not a.skip_rlt:
            log("rlt ...")
            try:
                row["rlt"] = bench_rlt(a.rlt_bin, hf_dir, a.prompt_len, a.gen_len, a.threads, a.reps, a.rlt_arg)
            except (RuntimeError, OSError) as e:
                row["rlt"] = {"error": str(e)}
        row["pp_ratio"] = _ratio(row["rlt"].get("pp_tokens_per_s"), row["llamacpp"].get("pp_tokens_per_s"))
        row["tg_ratio"] = _ratio(row["rlt"].get("tg_tokens_per_s"), row["llamacpp"].get("tg_tokens_per_s"))
        rows.append(row)
        if d == "bf16" and not a.skip_rlt and not a.no_rlt_bf16_activations:
            # The same comparison with rlt's activations rounded to bf16 as llama.cpp rounds them.
            log("rlt --activation-dtype bf16 ...")
            act = dict(row, dtype="bf16, bf16 act.")
            try:
                act["rlt"] = bench_rlt(a.rlt_bin, hf_dir, a.prompt_len, a.gen_len, a.threads, a.reps,
                                       list(a.rlt_arg) + ["--activation-dtype", "bf16"])
            except (RuntimeError, OSError) as e:
                act["rlt"] = {"error": str(e)}
            act["pp_ratio"] = _ratio(act["rlt"].get("pp_tokens_per_s"), act["llamacpp"].get("pp_tokens_per_s"))
            act["tg_ratio"] = _ratio(act["rlt"].get("tg_tokens_per_s"), act["llamacpp"].get("tg_tokens_per_s"))
            rows.append(act)

    print_table(rows, machine)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "results": rows}, f, indent=2)
            f.write("\n")
        log(f"wrote {a.out}")
    if failed_check:
        print("the same-function check FAILED: the two engines may not compute the same model", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
