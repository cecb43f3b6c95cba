"""Self-checks for the independent Python oracle (tools/make_model.py, tools/reference_ouro.py).

Run from the repository root:
    .venv/bin/python -m unittest discover -s tests/oracle -p 'test_*.py'

Expected values come from shared/reference/looped-models.md (section numbers cited inline) or are
computed by hand in the test, never from the engine.
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")
sys.path.insert(0, TOOLS)

import make_model as mm  # noqa: E402
import reference_ouro as ro  # noqa: E402

FIXTURE_CONFIG = "/work/shared/fixtures/ouro-1.4b/config.json"


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_dir_bytes(d):
    return {f: read_bytes(os.path.join(d, f)) for f in sorted(os.listdir(d))}


def read_all_tensors(d):
    """{name: (dtype, raw copy)} over single-file or sharded checkpoints."""
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            for name, (dtype, raw) in mm.read_safetensors(os.path.join(d, f)).items():
                assert name not in out
                out[name] = (dtype, np.array(raw))
    return out


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def make(self, name, shards=1, **kw):
        d = os.path.join(self.tmp, name)
        mm.make_model(d, mm.ModelSpec(**kw), shards=shards)
        return d


class MakeModelTests(TempDirCase):
    def test_same_args_give_identical_bytes(self):
        for kw, shards in (({}, 1), ({"dtype": "bf16", "seed": 7}, 3), ({"preset": "small", "dtype": "f16"}, 1)):
            a = read_dir_bytes(self.make("a", shards, **kw))
            b = read_dir_bytes(self.make("b", shards, **kw))
            self.assertEqual(a, b, kw)

    def test_seed_changes_weights(self):
        a = read_all_tensors(self.make("a", seed=0))
        b = read_all_tensors(self.make("b", seed=1))
        self.assertFalse(np.array_equal(a["lm_head.weight"][1], b["lm_head.weight"][1]))

    def test_sharded_equals_single(self):
        single = self.make("single")
        sharded = self.make("sharded", shards=3)
        files = sorted(os.listdir(sharded))
        self.assertEqual(files, ["config.json", "generation_config.json",
                                 "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                 "model-00003-of-00003.safetensors", "model.safetensors.index.json"])
        a, b = read_all_tensors(single), read_all_tensors(sharded)
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertEqual(a[name][0], b[name][0])
            np.testing.assert_array_equal(a[name][1], b[name][1])
        with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
            index = json.load(f)
        self.assertEqual(set(index["weight_map"]), set(a))
        self.assertEqual(index["metadata"]["total_size"], sum(raw.nbytes for _, raw in a.values()))
        for name, fname in index["weight_map"].items():
            self.assertIn(name, mm.read_safetensors_header(os.path.join(sharded, fname))[0])

    def test_safetensors_layout(self):
        path = os.path.join(self.make("m", dtype="bf16"), "model.safetensors")
        blob = read_bytes(path)
        (n,) = struct.unpack("<Q", blob[:8])
        self.assertEqual(n % 8, 0)
        text = blob[8:8 + n].decode("utf-8")
        self.assertEqual(text, text.rstrip(" ") + " " * (len(text) - len(text.rstrip(" "))))
        header = json.loads(text)
        self.assertEqual(header.pop("__metadata__"), {"format": "pt"})
        names = sorted(header)
        offset = 0
        for name in names:  # packed in name order, no gaps
            info = header[name]
            self.assertEqual(info["dtype"], "BF16")
            self.assertEqual(info["data_offsets"][0], offset)
            offset = info["data_offsets"][1]
            self.assertEqual(offset - info["data_offsets"][0], 2 * int(np.prod(info["shape"])))
        self.assertEqual(len(blob), 8 + n + offset)

    def test_bf16_round_to_nearest_even(self):
        cases = {  # f32 bits -> bf16 bits
            0x3F800000: 0x3F80,  # 1.0 exact
            0x3F808000: 0x3F80,  # halfway, even below -> stays
            0x3F818000: 0x3F82,  # halfway, odd below -> rounds up to even
            0x3F808001: 0x3F81,  # just above halfway -> up
            0x3F807FFF: 0x3F80,  # just below halfway -> down
            0xBF818000: 0xBF82,  # sign-symmetric
            0x7F7FFFFF: 0x7F80,  # max finite rounds to +inf, as torch does
            0x00000001: 0x0000,  # smallest subnormal -> 0
        }
        bits = np.array(list(cases), dtype=np.uint32)
        got = mm.f32_to_bf16_bits(bits.view(np.float32))
        self.assertEqual([hex(x) for x in got.tolist()], [hex(x) for x in cases.values()])
        # Random values: result is one of the two neighbours and the nearer one.
        x = np.random.default_rng(3).standard_normal(20000).astype(np.float32)
        b = mm.f32_to_bf16_bits(x)
        y = mm.bf16_bits_to_f32(b).astype(np.float64)
        lo = mm.bf16_bits_to_f32((x.view(np.uint32) >> 16).astype(np.uint16)).astype(np.float64)
        hi = mm.bf16_bits_to_f32(((x.view(np.uint32) >> 16) + 1).astype(np.uint16)).astype(np.float64)
        err = np.abs(y - x)
        self.assertTrue(np.all(err <= np.minimum(np.abs(lo - x), np.abs(hi - x))))
        nan = mm.f32_to_bf16_bits(np.array([np.nan], dtype=np.float32))
        self.assertTrue(np.isnan(mm.bf16_bits_to_f32(nan))[0])

    def test_storage_dtypes_round_the_same_master_values(self):
        f32 = read_all_tensors(self.make("f32"))
        bf16 = read_all_tensors(self.make("bf16", dtype="bf16"))
        f16 = read_all_tensors(self.make("f16", dtype="f16"))
        for name, (_, x) in f32.items():
            self.assertEqual(bf16[name][0], "BF16")
            np.testing.assert_array_equal(bf16[name][1], mm.f32_to_bf16_bits(x))
            self.assertEqual(f16[name][0], "F16")
            np.testing.assert_array_equal(f16[name][1], x.astype(np.float16))

    def test_weight_statistics(self):
        spec = mm.ModelSpec(gate_bias=-0.75)
        t = read_all_tensors(self.make("m", gate_bias=-0.75))
        self.assertAlmostEqual(spec.init_std, 1 / math.sqrt(32))
        self.assertEqual(t["model.early_exit_gate.bias"][1].tolist(), [np.float32(-0.75)])
        emb = t["model.embed_tokens.weight"][1]
        self.assertLess(abs(emb.std() / spec.init_std - 1), 0.1)
        norm = t["model.layers.1.post_attention_layernorm_2.weight"][1]
        self.assertLess(abs(norm.mean() - 1), 0.1)
        self.assertGreater(norm.std(), 0.03)  # not the identity

    def test_config_json(self):
        d = self.make("m", preset="small", dtype="bf16", eos_token_id=5, num_layers=3)
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(cfg["architectures"], ["OuroForCausalLM"])
        self.assertEqual(cfg["model_type"], "ouro")
        self.assertEqual(cfg["torch_dtype"], "bfloat16")
        self.assertEqual(cfg["layer_types"], ["full_attention"] * 3)
        self.assertEqual(cfg["max_window_layers"], 3)
        self.assertEqual((cfg["hidden_size"], cfg["head_dim"], cfg["total_ut_steps"]), (128, 32, 4))
        self.assertEqual(cfg["eos_token_id"], 5)
        self.assertIsNone(cfg["rope_scaling"])
        self.assertFalse(cfg["tie_word_embeddings"])
        with open(os.path.join(d, "generation_config.json")) as f:
            self.assertEqual(json.load(f)["eos_token_id"], 5)
        if os.path.exists(FIXTURE_CONFIG):
            with open(FIXTURE_CONFIG) as f:
                fixture = json.load(f)
            self.assertEqual(list(cfg), list(fixture))  # same fields, same order
            self.assertEqual(cfg["auto_map"], fixture["auto_map"])
            real = mm.config_dict(mm.ModelSpec(preset="ouro-1.4b", dtype="bf16", init_std=0.02))
            self.assertEqual(real, fixture)

    def test_ouro_1p4b_tensor_census(self):
        # Section 2: 269 tensors, 1,434,652,673 params; with L = 48: 2,667,974,657.
        specs = mm.tensor_specs(mm.ModelSpec(preset="ouro-1.4b"))
        self.assertEqual(len(specs), 269)
        self.assertEqual(sum(int(np.prod(s)) for _, s, _ in specs), 1_434_652_673)
        specs48 = mm.tensor_specs(mm.ModelSpec(preset="ouro-1.4b", num_layers=48))
        self.assertEqual(sum(int(np.prod(s)) for _, s, _ in specs48), 2_667_974_657)
        # The reference's independent name/shape table agrees.
        cfg = ro.OuroConfig(mm.config_dict(mm.ModelSpec(preset="ouro-1.4b")))
        self.assertEqual(ro.expected_shapes(cfg), {n: tuple(s) for n, s, _ in specs})

    def test_generic_roundtrip(self):
        path = os.path.join(self.tmp, "x.safetensors")
        t = {"b": ("I64", np.arange(6, dtype=np.int64).reshape(2, 3)),
             "a": ("F16", np.array([1.5, -2.0], dtype=np.float16)),
             "c": ("BF16", mm.f32_to_bf16_bits(np.array([[3.0]], dtype=np.float32)))}
        mm.write_safetensors(path, t)
        back = mm.read_safetensors(path)
        for name, (dtype, arr) in t.items():
            self.assertEqual(back[name][0], dtype)
            np.testing.assert_array_equal(back[name][1], arr)
        self.assertEqual(mm.raw_to_float64("BF16", back["c"][1]).tolist(), [[3.0]])


class LlamaMakeModelTests(TempDirCase):
    """--arch llama: the HF Llama layout (the one-loop case without sandwich norms or gate)."""

    def test_config_round_trip(self):
        d = self.make("m", preset="small", arch="llama", dtype="bf16", num_kv_heads=1, eos_token_id=3,
                      rope_scaling="llama3:8:64")
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(list(cfg), sorted(cfg))  # save_pretrained writes sorted keys
        self.assertEqual(cfg["architectures"], ["LlamaForCausalLM"])
        self.assertEqual(cfg["model_type"], "llama")
        self.assertEqual((cfg["attention_bias"], cfg["mlp_bias"], cfg["tie_word_embeddings"]), (False, False, False))
        self.assertEqual(cfg["rope_scaling"], {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                               "original_max_position_embeddings": 64, "rope_type": "llama3"})
        self.assertEqual(cfg["torch_dtype"], "bfloat16")
        for ouro_only in ("total_ut_steps", "early_exit_threshold", "auto_map", "layer_types"):
            self.assertNotIn(ouro_only, cfg)
        with open(os.path.join(d, "generation_config.json")) as f:
            self.assertEqual(json.load(f)["eos_token_id"], 3)
        c = ro.parse_config(cfg)
        self.assertIsInstance(c, ro.LlamaConfig)
        self.assertEqual((c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads,
                          c.num_kv_heads, c.head_dim, c.loops, c.max_positions),
                         (512, 128, 352, 2, 4, 1, 32, 1, 2048))
        self.assertEqual((c.rope_theta, c.rms_norm_eps, c.has_gate), (1e6, 1e-6, False))
        self.assertEqual(c.rope_scaling["rope_type"], "llama3")
        m = ro.load_model(d)
        self.assertEqual(set(m.w), set(ro.expected_shapes(c)))
        # Spec fields and the CLI string give the same dict; linear is accepted too.
        self.assertEqual(mm.parse_rope_scaling(cfg["rope_scaling"]), cfg["rope_scaling"])
        self.assertEqual(mm.parse_rope_scaling("linear:2"), {"factor": 2.0, "rope_type": "linear"})
        self.assertIsNone(mm.parse_rope_scaling(None))
        # HF's sparse form: head_dim / num_key_value_heads absent are derived.
        sparse = {k: v for k, v in cfg.items() if k not in ("head_dim", "num_key_value_heads", "rope_scaling")}
        c2 = ro.parse_config(sparse)
        self.assertEqual((c2.head_dim, c2.num_kv_heads, c2.rope_scaling), (32, 4, None))

    def test_preset_and_validation(self):
        spec = mm.ModelSpec(preset="llama-1.4b")
        self.assertEqual((spec.arch, spec.loops, spec.hidden_size, spec.num_kv_heads), ("llama", 1, 2048, 16))
        cfg = mm.config_dict(spec)
        self.assertEqual((cfg["vocab_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["head_dim"],
                          cfg["rope_theta"], cfg["rms_norm_eps"], cfg["max_position_embeddings"]),
                         (49152, 5632, 24, 128, 1e6, 1e-6, 65536))
        self.assertEqual(mm.ModelSpec().arch, "ouro")
        self.assertEqual(mm.ModelSpec(arch="llama").loops, 1)
        bad = [dict(tie_word_embeddings=True), dict(rope_scaling="linear:2"),  # Ouro rejects both
               dict(arch="llama", loops=2), dict(arch="gpt2"),
               dict(arch="llama", rope_scaling="llama3:8"), dict(arch="llama", rope_scaling="yarn:4"),
               dict(arch="llama", rope_scaling="linear:0"), dict(arch="llama", rope_scaling="llama3:8:64:4:1")]
        for kw in bad:
            with self.assertRaises(ValueError, msg=kw):
                mm.ModelSpec(**kw)

    def test_llama_1p4b_tensor_census(self):
        # Ouro-1.4B minus the 2 sandwich norms per layer (24 * 2 * 2048) and the gate (2049):
        # 1,434,652,673 - 98,304 - 2,049 = 1,434,552,320 in 1 + 24 * 9 + 2 = 219 tensors.
        specs = mm.tensor_specs(mm.ModelSpec(preset="llama-1.4b"))
        self.assertEqual(len(specs), 219)
        self.assertEqual(sum(int(np.prod(s)) for _, s, _ in specs), 1_434_552_320)
        tied = mm.tensor_specs(mm.ModelSpec(preset="llama-1.4b", tie_word_embeddings=True))
        self.assertEqual(sum(int(np.prod(s)) for _, s, _ in tied), 1_434_552_320 - 49152 * 2048)
        cfg = ro.parse_config(mm.config_dict(mm.ModelSpec(preset="llama-1.4b")))
        self.assertEqual(ro.expected_shapes(cfg), {n: tuple(s) for n, s, _ in specs})

    def test_tied_embeddings_tensor_set(self):
        untied = read_all_tensors(self.make("u", arch="llama"))
        tied_dir = self.make("t", arch="llama", tie_word_embeddings=True)
        tied = read_all_tensors(tied_dir)
        self.assertEqual(set(untied) - set(tied), {"lm_head.weight"})
        self.assertEqual(set(tied) - set(untied), set())
        for name in tied:  # every other tensor is the same draw
            np.testing.assert_array_equal(tied[name][1], untied[name][1])
        self.assertEqual(len(tied), 1 + 2 * 9 + 1)
        for name in tied:
            self.assertNotIn("_2.weight", name)
            self.assertNotIn("early_exit_gate", name)
        m = ro.load_model(tied_dir)
        self.assertTrue(m.cfg.tie_word_embeddings)
        self.assertIs(m.lm_head_weight, m.w["model.embed_tokens.weight"])
        # A tied checkpoint that still stores lm_head.weight is rejected (strict loader), and an
        # untied one without it is missing a tensor.
        mm.write_safetensors(os.path.join(tied_dir, "model.safetensors"), untied)
        with self.assertRaises(ValueError):
            ro.load_model(tied_dir)

    def test_llama_init_scales(self):
        spec = mm.ModelSpec(preset="small", arch="llama", num_layers=8)
        t = read_all_tensors(self.make("m", preset="small", arch="llama", num_layers=8))
        std = {n: float(np.std(raw)) for n, (_, raw) in t.items()}
        for name in ("model.embed_tokens.weight", "lm_head.weight", "model.layers.3.self_attn.q_proj.weight",
                     "model.layers.3.mlp.up_proj.weight"):
            self.assertLess(abs(std[name] / spec.init_std - 1), 0.05, name)
        for name in ("model.layers.3.self_attn.o_proj.weight", "model.layers.3.mlp.down_proj.weight"):
            self.assertLess(abs(std[name] / (spec.init_std / 4.0) - 1), 0.05, name)  # sqrt(2 * 8) = 4


class ExitRuleTests(unittest.TestCase):
    """Section 5.3, column `ouro` (T = 4)."""

    ROWS = [  # (row, hazards, threshold, min, max, expected depth)
        (1, [0.3, 0.3], 0.5, 2, 4, 2),
        (4, [0.3] * 4, 0.5, 3, 4, 3),
        (5, [0.3] * 4, 1.0, 1, 4, 4),
        (6, [0.3] * 4, 0.0, 2, 4, 2),
        (7, [0.5] * 4, 0.75, 2, 4, 2),
        (8, [0.1, 0.9, 0.5, 0.5], 0.9, 2, 4, 2),
        (9, [0.9] * 4, 0.5, 2, 3, 2),
    ]

    def test_table_rows(self):
        for row, hz, thr, lo, hi, want in self.ROWS:
            self.assertEqual(ro.ouro_exit_depth(hz, thr, lo, hi), want, f"row {row}")

    def test_row10_max_wins(self):
        for hz in ([0.0] * 4, [0.3] * 4, [0.99] * 4, [1.0] * 4):
            for thr in (0.0, 0.3, 0.999, 1.0):
                self.assertEqual(ro.ouro_exit_depth(hz, thr, 2, 2), 2)

    def test_float64_accumulation_values(self):
        # float32(0.3) = 0.30000001192...; CDF after two loops 0.5100000167 in float64.
        _, p = ro.ouro_exit([0.3, 0.3], 0.5, 2, 4)
        self.assertAlmostEqual(p, 0.5100000167, delta=1e-10)
        f = float(np.float32(0.3))
        self.assertEqual(p, 1.0 - (1.0 - f) * (1.0 - f))
        # Row 8: float32 inputs give 0.90999998 (>= 0.9).
        _, p8 = ro.ouro_exit([0.1, 0.9], 0.9, 2, 4)
        self.assertAlmostEqual(p8, 0.90999998, delta=1e-8)
        # Row 7: exactly 0.75 must exit (>=, not >).
        self.assertEqual(ro.ouro_exit([0.5, 0.5], 0.75, 2, 4), (2, 0.75))
        # A threshold just above the CDF does not exit at 2.
        self.assertEqual(ro.ouro_exit_depth([0.5, 0.5, 0.5, 0.5], 0.7500001, 2, 4), 3)

    def test_lazy_and_validation(self):
        def hazards():
            yield 0.9
            yield 0.9
            raise AssertionError("read a hazard after the exit")
        self.assertEqual(ro.ouro_exit_depth(hazards(), 0.5, 2, 4), 2)
        with self.assertRaises(ValueError):
            ro.ouro_exit_depth([0.1], 0.5, 2, 4)  # ran out before deciding
        for bad in ((1.5, 2, 4), (-0.1, 2, 4), (0.5, 0, 4), (0.5, 3, 2)):
            with self.assertRaises(ValueError):
                ro.ouro_exit_depth([0.5] * 4, *bad)

    def test_hazard_rounding(self):
        self.assertEqual(ro.ouro_hazard(0.0), 0.5)
        h = ro.ouro_hazard(0.3)
        self.assertEqual(h, float(np.float32(h)))  # a float32 value
        self.assertAlmostEqual(h, 1 / (1 + math.exp(-0.3)), delta=1e-7)
        self.assertEqual(ro.ouro_hazard(-1e4), 0.0)  # Huginn/Nanbeige constant gate
        self.assertEqual(ro.ouro_hazard(200.0), 1.0)


class BuildingBlockTests(unittest.TestCase):
    def test_rope_hand_example(self):
        # d = 4, theta = 100: inv_freq = [1, 100^(-1/2)] = [1, 0.1]; position 2 -> angles [2, 0.2].
        # Split-half pairing: (x0, x2) rotate by 2 rad, (x1, x3) by 0.2 rad.
        x = np.array([[[1.0, 2.0, 3.0, 4.0]]])
        cos, sin = ro.rope_cos_sin([2], 4, 100.0)
        got = ro.apply_rope(x, cos, sin)[0, 0]
        c2, s2, c02, s02 = math.cos(2), math.sin(2), math.cos(0.2), math.sin(0.2)
        want = [1 * c2 - 3 * s2, 2 * c02 - 4 * s02, 3 * c2 + 1 * s2, 4 * c02 + 2 * s02]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
        # Adjacent-pair (Huginn-style) rotation would give something else.
        adjacent = [1 * c2 - 2 * s2, 2 * c2 + 1 * s2, 3 * c02 - 4 * s02, 4 * c02 + 3 * s02]
        self.assertGreater(np.abs(got - adjacent).max(), 0.1)
        # Position 0 is the identity; rotation preserves the norm of each pair.
        c0, s0 = ro.rope_cos_sin([0], 4, 100.0)
        np.testing.assert_array_equal(ro.apply_rope(x, c0, s0), x)
        self.assertAlmostEqual(got[0] ** 2 + got[2] ** 2, 10.0, places=12)

    def test_rope_inv_freq_ouro(self):
        f = ro.rope_inv_freq(128, 1e6)  # section 3.1: 10^(-0.09375 i)
        self.assertEqual(f[0], 1.0)
        self.assertAlmostEqual(f[1], 0.80584, places=5)
        self.assertAlmostEqual(f[63] / 1.2409e-6, 1.0, places=4)

    def test_rope_llama3_inv_freq_hand_example(self):
        # d = 8, theta = 1e4: inv_freq = [1, 0.1, 0.01, 0.001], wavelengths 2 pi / f =
        # [6.28, 62.8, 628.3, 6283]. factor 8, original 1024, low/high freq factors 1/4: the
        # low-frequency wavelength bound is 1024 / 1 = 1024, the high one 1024 / 4 = 256.
        #   i = 0, 1: wavelength < 256 -> unchanged.
        #   i = 3: 6283 > 1024 -> 0.001 / 8 = 1.25e-4.
        #   i = 2: medium band, s = (1024 / 628.3185 - 1) / (4 - 1) = 0.2099155,
        #          (1 - s) * 0.01 / 8 + s * 0.01 = 0.0009876 + 0.0020992 = 0.0030868.
        rs = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 1024}
        f = ro.rope_inv_freq(8, 1e4, ro.check_rope_scaling(rs))
        self.assertEqual(f[0], 1.0)
        self.assertAlmostEqual(f[1], 0.1, places=15)
        self.assertAlmostEqual(f[2], 0.0030868, delta=1e-7)
        s = (1024 / (200 * math.pi) - 1) / 3
        self.assertAlmostEqual(f[2], 0.01 * ((1 - s) / 8 + s), places=15)
        self.assertAlmostEqual(f[3], 1.25e-4, places=15)
        # HF's "type" spelling and the "default" rope_type are understood.
        self.assertIsNone(ro.check_rope_scaling({"rope_type": "default"}))
        with self.assertRaises(ValueError):
            ro.check_rope_scaling({"rope_type": "yarn", "factor": 4.0})

    def test_rope_linear_is_position_division(self):
        lin = ro.check_rope_scaling({"type": "linear", "factor": 4.0})
        np.testing.assert_allclose(ro.rope_inv_freq(16, 1e4, lin), ro.rope_inv_freq(16, 1e4) / 4, rtol=1e-15)
        c1, s1 = ro.rope_cos_sin([3, 10], 16, 1e4, lin)
        c2, s2 = ro.rope_cos_sin([0.75, 2.5], 16, 1e4)
        np.testing.assert_allclose(c1, c2, rtol=0, atol=1e-14)
        np.testing.assert_allclose(s1, s2, rtol=0, atol=1e-14)

    def test_gqa_head_mapping(self):
        # nh 4, nkv 2: q heads 0,1 -> kv 0; heads 2,3 -> kv 1. A single key: output = its value.
        rng = np.random.default_rng(0)
        q = rng.standard_normal((1, 4, 8))
        k = rng.standard_normal((1, 2, 8))
        v = np.stack([np.full(8, 10.0), np.full(8, 20.0)])[None]
        out = ro.attention(q, k, v, [0], [0])
        self.assertEqual(out[0, :, 0].tolist(), [10.0, 10.0, 20.0, 20.0])

    def test_attention_brute_force(self):
        rng = np.random.default_rng(1)
        n, nh, nkv, d = 5, 4, 2, 8
        q, k, v = rng.standard_normal((n, nh, d)), rng.standard_normal((n, nkv, d)), rng.standard_normal((n, nkv, d))
        got = ro.attention(q, k, v, np.arange(n), np.arange(n))
        for p in range(n):
            for h in range(nh):
                kv = h // 2
                s = [float(q[p, h] @ k[j, kv]) / math.sqrt(d) for j in range(p + 1)]
                w = [math.exp(x - max(s)) for x in s]
                want = sum(w[j] / sum(w) * v[j, kv] for j in range(p + 1))
                np.testing.assert_allclose(got[p, h], want, rtol=1e-13, atol=1e-14)

    def test_rms_norm_and_silu(self):
        x = np.array([3.0, 4.0])
        np.testing.assert_allclose(ro.rms_norm(x, np.array([1.0, 2.0]), 0.0),
                                   [3 / math.sqrt(12.5), 8 / math.sqrt(12.5)], rtol=1e-15)
        self.assertEqual(ro.silu(np.array([0.0]))[0], 0.0)
        self.assertAlmostEqual(ro.silu(np.array([1.0]))[0], 1 / (1 + math.exp(-1)), places=15)
        self.assertEqual(ro.silu(np.array([-1000.0]))[0], 0.0)


class ReferenceForwardTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls._tmp.name, "tiny")
        mm.make_model(cls.dir, mm.ModelSpec(), shards=2)
        cls.model = ro.load_model(cls.dir)
        cls.T = cls.model.cfg.loops

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_prompt_causality(self):
        a = ro.forward_prompt(self.model, [5, 17, 42])
        b = ro.forward_prompt(self.model, [5, 17, 42, 9])
        for key in ("hidden", "gate_logits", "logits"):
            np.testing.assert_allclose(a[key], b[key][:, :3], rtol=1e-12, atol=1e-12, err_msg=key)
        self.assertFalse(np.allclose(a["logits"][-1, -1], b["logits"][-1, -1]))
        # Loops really differ from each other (h is transformed, not a fixed point).
        self.assertGreater(np.abs(a["logits"][0] - a["logits"][-1]).max(), 0.1)

    def test_full_depth_decode_equals_dense_recompute(self):
        prompt = [3, 1, 4, 1, 5]
        r = ro.generate(self.model, prompt, max_tokens=6, exit_threshold=1.0, min_loops=2)
        self.assertEqual(r["exit_depths"].tolist(), [self.T] * 6)
        self.assertFalse(np.isnan(r["step_gate_logits"]).any())
        self.assertTrue(np.isnan(r["step_exit_prob"][0]))
        for n in range(6):
            dense = ro.forward_prompt(self.model, prompt + r["tokens"][:n].tolist())
            np.testing.assert_allclose(r["step_logits"][n], dense["logits"][-1, -1], rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(r["step_gate_logits"][n], dense["gate_logits"][:, -1], rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(r["step_hidden"][n], dense["hidden"][-1, -1], rtol=1e-10, atol=1e-10)
            self.assertEqual(r["tokens"][n], int(np.argmax(r["step_logits"][n])))
            if n:
                hz = [ro.ouro_hazard(g) for g in r["step_gate_logits"][n]]
                self.assertEqual(r["step_exit_prob"][n], 1.0 - np.prod([1.0 - h for h in hz]))

    def test_early_exit_bookkeeping(self):
        r = ro.generate(self.model, [7, 8, 9], max_tokens=16, exit_threshold=0.6, min_loops=2)
        depths = r["exit_depths"].tolist()
        self.assertEqual(depths[0], self.T)
        self.assertGreater(len(set(depths[1:])), 1, "want a mix of exit depths for this test")
        for n in range(1, 16):
            e = depths[n]
            g = r["step_gate_logits"][n]
            self.assertFalse(np.isnan(g[:e]).any())
            self.assertTrue(np.isnan(g[e:]).all())
            hz = [ro.ouro_hazard(x) for x in g[:e]]
            self.assertEqual(ro.ouro_exit(hz, 0.6, 2, self.T), (e, r["step_exit_prob"][n]))
            if e < self.T:
                self.assertGreaterEqual(r["step_exit_prob"][n], 0.6)
            np.testing.assert_allclose(r["step_logits"][n], ro.lm_head(self.model, r["step_hidden"][n]), rtol=1e-13)
        # last_exited: planes e+1..T of a decode position hold its loop-e K/V (section 4).
        cache, P = r["cache"], 3
        for n in range(1, 16):
            pos, e = P + n - 1, depths[n]
            for plane in range(e, self.T):
                np.testing.assert_array_equal(cache.k[plane, :, pos], cache.k[e - 1, :, pos])
                np.testing.assert_array_equal(cache.v[plane, :, pos], cache.v[e - 1, :, pos])

    def test_last_exited_copies_are_read(self):
        # Without the copies a deeper query of a later token would hit an unwritten plane row;
        # the cache asserts on that, which proves the run depends on last_exited versions.
        orig = ro.KVCache.finalize_last_exited
        ro.KVCache.finalize_last_exited = lambda self, pos, e: None
        try:
            with self.assertRaises(AssertionError):
                ro.generate(self.model, [7, 8, 9], max_tokens=16, exit_threshold=0.6, min_loops=2)
        finally:
            ro.KVCache.finalize_last_exited = orig

    def test_fixed_depth_and_limits(self):
        r = ro.generate(self.model, [1, 2], max_tokens=5, exit_threshold=0.0, min_loops=3, max_loops=3)
        self.assertEqual(r["exit_depths"].tolist(), [self.T, 3, 3, 3, 3])
        r = ro.generate(self.model, [1, 2], max_tokens=4, exit_threshold=1.0, min_loops=1, max_loops=1)
        self.assertEqual(r["exit_depths"].tolist(), [self.T, 1, 1, 1])
        r0 = ro.generate(self.model, [1, 2], max_tokens=0)
        self.assertEqual(r0["tokens"].shape, (0,))
        self.assertEqual(r0["step_logits"].shape, (0, 64))
        for bad in (dict(min_loops=0), dict(min_loops=3, max_loops=2), dict(max_loops=5),
                    dict(exit_threshold=1.5)):
            with self.assertRaises(ValueError):
                ro.generate(self.model, [1], max_tokens=2, **bad)
        with self.assertRaises(ValueError):
            ro.generate(self.model, [64], max_tokens=1)
        with self.assertRaises(ValueError):  # 120 + 10 - 1 > 128 positions
            ro.generate(self.model, [1] * 120, max_tokens=10)

    def test_loader_matches_file_and_rejects_bad_checkpoints(self):
        raw = read_all_tensors(self.dir)
        for name, (_, x) in raw.items():
            np.testing.assert_array_equal(self.model.w[name], x.astype(np.float64))
        bad = os.path.join(self._tmp.name, "bad")
        os.makedirs(bad, exist_ok=True)
        with open(os.path.join(self.dir, "config.json")) as f:
            cfg_text = f.read()
        with open(os.path.join(bad, "config.json"), "w") as f:
            f.write(cfg_text)
        variants = {
            "missing": {k: v for k, v in raw.items() if k != "model.norm.weight"},
            "extra": {**raw, "model.rotary_emb.inv_freq": ("F32", np.zeros(4, np.float32))},
            "shape": {**raw, "model.norm.weight": ("F32", np.zeros(31, np.float32))},
        }
        for label, tensors in variants.items():
            mm.write_safetensors(os.path.join(bad, "model.safetensors"), tensors)
            with self.assertRaises(ValueError, msg=label):
                ro.load_model(bad)

    def test_bf16_checkpoint_widens_exactly(self):
        d = os.path.join(self._tmp.name, "bf16")
        mm.make_model(d, mm.ModelSpec(dtype="bf16"))
        m = ro.load_model(d)
        x = self.model.w["lm_head.weight"].astype(np.float32)
        want = mm.bf16_bits_to_f32(mm.f32_to_bf16_bits(x)).astype(np.float64)
        np.testing.assert_array_equal(m.w["lm_head.weight"], want)

    def test_cli_end_to_end(self):
        d = os.path.join(self._tmp.name, "cli")
        out = os.path.join(self._tmp.name, "r.npz")
        py = sys.executable
        subprocess.run([py, os.path.join(TOOLS, "make_model.py"), d, "--preset", "tiny", "--dtype", "bf16",
                        "--shards", "2", "--num-layers", "1", "--loops", "3", "--gate-bias", "0.5"],
                       check=True, capture_output=True)
        subprocess.run([py, os.path.join(TOOLS, "reference_ouro.py"), "--model", d, "--prompt-ids", "1,2,3,4",
                        "--max-tokens", "5", "--exit-threshold", "0.7", "--min-loops", "1", "--out", out],
                       check=True, capture_output=True)
        z = np.load(out)
        T, P, N, H, V = 3, 4, 5, 32, 64
        shapes = {"prompt_ids": (P,), "prompt_hidden": (T, P, H), "prompt_gate_logits": (T, P),
                  "prompt_logits": (T, P, V), "tokens": (N,), "exit_depths": (N,), "step_logits": (N, V),
                  "step_gate_logits": (N, T), "step_exit_prob": (N,), "step_hidden": (N, H)}
        self.assertEqual({k: z[k].shape for k in z.files}, shapes)
        self.assertEqual(z["tokens"].dtype, np.int64)
        self.assertEqual(z["exit_depths"][0], T)
        # Same result through the Python API.
        r = ro.generate(ro.load_model(d), [1, 2, 3, 4], 5, 0.7, 1, None)
        for k in shapes:
            np.testing.assert_array_equal(z[k], r[k], err_msg=k)



class LlamaForwardTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls._tmp.name, "llama")
        mm.make_model(cls.dir, mm.ModelSpec(arch="llama", seed=3, rope_scaling="llama3:4:16"), shards=2)
        cls.model = ro.load_model(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_shapes_and_no_gate(self):
        r = ro.generate(self.model, [3, 1, 4, 1, 5], max_tokens=6, exit_threshold=0.3, min_loops=2)
        self.assertEqual(r["prompt_hidden"].shape, (1, 5, 32))
        self.assertEqual(r["prompt_gate_logits"].shape, (1, 5))
        self.assertEqual(r["step_gate_logits"].shape, (6, 1))
        self.assertTrue(np.isnan(r["prompt_gate_logits"]).all())
        self.assertTrue(np.isnan(r["step_gate_logits"]).all())
        self.assertTrue(np.isnan(r["step_exit_prob"]).all())
        self.assertEqual(r["exit_depths"].tolist(), [1] * 6)  # exit arguments are ignored
        self.assertFalse(np.isnan(r["step_logits"]).any())

    def test_decode_equals_dense_recompute(self):
        prompt = [9, 8, 7, 6]
        r = ro.generate(self.model, prompt, max_tokens=8)
        for n in range(8):
            dense = ro.forward_prompt(self.model, prompt + r["tokens"][:n].tolist())
            np.testing.assert_allclose(r["step_logits"][n], dense["logits"][0, -1], rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(r["step_hidden"][n], dense["hidden"][0, -1], rtol=1e-10, atol=1e-10)
            self.assertEqual(r["tokens"][n], int(np.argmax(r["step_logits"][n])))
        a = ro.forward_prompt(self.model, prompt[:3])
        np.testing.assert_allclose(a["hidden"], ro.forward_prompt(self.model, prompt)["hidden"][:, :3], rtol=1e-12)

    def test_pre_norm_residual_structure(self):
        # With o_proj and down_proj zeroed every block adds exactly 0: the output is
        # model.norm(E[tok]) and the logits lm_head of that (no sandwich norm could rescue a
        # zero block output, and there is no norm between the layers).
        w = dict(self.model.w)
        for l in range(self.model.cfg.num_layers):
            for name in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
                w[f"model.layers.{l}.{name}"] = np.zeros_like(w[f"model.layers.{l}.{name}"])
        m = ro.OuroModel(self.model.cfg, w)
        ids = [5, 6, 7]
        f = ro.forward_prompt(m, ids)
        E = w["model.embed_tokens.weight"][ids]
        want = ro.rms_norm(E, w["model.norm.weight"], self.model.cfg.rms_norm_eps)
        np.testing.assert_allclose(f["hidden"][0], want, rtol=1e-14)
        np.testing.assert_allclose(f["logits"][0], want @ w["lm_head.weight"].T, rtol=1e-13)
        # Restoring only the MLP: h = E + down(mlp(norm_post(E))) for layer 0 at position 0
        # (attention of a lone first token is v; zero o_proj removes it).
        w1 = dict(w)
        w1["model.layers.0.mlp.down_proj.weight"] = self.model.w["model.layers.0.mlp.down_proj.weight"]
        f1 = ro.forward_prompt(ro.OuroModel(self.model.cfg, w1), ids[:1])
        eps = self.model.cfg.rms_norm_eps
        x = ro.rms_norm(E[:1], w["model.layers.0.post_attention_layernorm.weight"], eps)
        mlp = (ro.silu(x @ w["model.layers.0.mlp.gate_proj.weight"].T) * (x @ w["model.layers.0.mlp.up_proj.weight"].T)
               ) @ w1["model.layers.0.mlp.down_proj.weight"].T
        np.testing.assert_allclose(f1["hidden"][0], ro.rms_norm(E[:1] + mlp, w["model.norm.weight"], eps), rtol=1e-12)

    def test_tied_head_uses_embeddings(self):
        d = os.path.join(self._tmp.name, "tied")
        mm.make_model(d, mm.ModelSpec(arch="llama", seed=3, rope_scaling="llama3:4:16", tie_word_embeddings=True))
        tied = ro.load_model(d)
        f = ro.forward_prompt(tied, [1, 2, 3])
        # Same draws for every shared tensor, so the hidden states equal the untied model's.
        np.testing.assert_array_equal(f["hidden"], ro.forward_prompt(self.model, [1, 2, 3])["hidden"])
        np.testing.assert_allclose(f["logits"][0], f["hidden"][0] @ tied.w["model.embed_tokens.weight"].T, rtol=1e-14)

    def test_rope_scaling_changes_the_output(self):
        d = os.path.join(self._tmp.name, "plain")
        mm.make_model(d, mm.ModelSpec(arch="llama", seed=3))
        plain = ro.load_model(d)
        ids = list(range(20))
        a, b = ro.forward_prompt(plain, ids)["logits"], ro.forward_prompt(self.model, ids)["logits"]
        np.testing.assert_allclose(a[0, 0], b[0, 0], rtol=1e-12)  # position 0: RoPE is the identity
        self.assertGreater(np.abs(a[0, -1] - b[0, -1]).max(), 1e-3)

    def test_cli_end_to_end(self):
        d = os.path.join(self._tmp.name, "cli")
        out = os.path.join(self._tmp.name, "r.npz")
        py = sys.executable
        subprocess.run([py, os.path.join(TOOLS, "make_model.py"), d, "--arch", "llama", "--dtype", "f16",
                        "--tie-word-embeddings", "--rope-scaling", "llama3:8:32", "--num-kv-heads", "1"],
                       check=True, capture_output=True)
        subprocess.run([py, os.path.join(TOOLS, "reference_ouro.py"), "--model", d, "--prompt-ids", "1,2,3",
                        "--max-tokens", "4", "--out", out], check=True, capture_output=True)
        z = np.load(out)
        P, N, H, V = 3, 4, 32, 64
        shapes = {"prompt_ids": (P,), "prompt_hidden": (1, P, H), "prompt_gate_logits": (1, P),
                  "prompt_logits": (1, P, V), "tokens": (N,), "exit_depths": (N,), "step_logits": (N, V),
                  "step_gate_logits": (N, 1), "step_exit_prob": (N,), "step_hidden": (N, H)}
        self.assertEqual({k: z[k].shape for k in z.files}, shapes)
        self.assertEqual(z["exit_depths"].tolist(), [1] * N)
        r = ro.generate(ro.load_model(d), [1, 2, 3], 4)
        for k in shapes:
            np.testing.assert_array_equal(z[k], r[k], err_msg=k)


class HuginnOracleTests(TempDirCase):
    """tools/reference_huginn.py on make_model's huginn-tiny: its own invariants (the oracle for
    rlt's Huginn support)."""

    def setUp(self):
        super().setUp()
        import reference_huginn
        self.rh = reference_huginn
        self.dir = self.make("huginn", preset="huginn-tiny", seed=3)
        self.model = reference_huginn.load_model(self.dir)
        rng = np.random.default_rng(11)
        self.states = {}

        def init_state(position):
            if position not in self.states:
                self.states[position] = reference_huginn.truncated_normal_state(rng, self.model.cfg, 1)[0]
            return self.states[position]
        self.init_state = init_state

    def test_checkpoint_layout(self):
        with open(os.path.join(self.dir, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual((cfg["model_type"], cfg["architectures"]), ("huginn_raven", ["RavenForCausalLM"]))
        self.assertEqual((cfg["n_layers_in_prelude"], cfg["n_layers_in_recurrent_block"], cfg["n_layers_in_coda"]),
                         (1, 2, 1))
        names = {n for n, _, _ in mm.tensor_specs(mm.ModelSpec(preset="huginn-tiny"))}
        self.assertIn("transformer.core_block.1.attn.qk_bias", names)
        self.assertNotIn("lm_head.weight", names)  # tied to wte
        real = mm.tensor_specs(mm.ModelSpec(preset="huginn-0125"))
        params = sum(int(np.prod(s)) for _, s, _ in real)
        # 8 blocks of (Wqkv 3H^2 + qk bias 2H + proj H^2 + fc 2IH + proj IH + 4 norms), the
        # adapter 2H^2, ln_f, the tied embedding.
        H, I = 5280, 17920
        self.assertEqual(params, 8 * (4 * H * H + 2 * H + 3 * I * H + 4 * H) + 2 * H * H + H + 65536 * H)
        with self.assertRaises(ValueError):
            self.rh.HuginnConfig(dict(cfg, qk_bias=False))
        with self.assertRaises(ValueError):
            self.rh.HuginnConfig(dict(cfg, tie_embeddings=False))

    def test_initial_state_is_a_truncated_normal_of_std_sqrt_0_4(self):
        s = self.rh.truncated_normal_state(np.random.default_rng(0), self.model.cfg, 4000)
        std = math.sqrt(0.4)
        self.assertAlmostEqual(self.model.cfg.state_std, std, places=12)
        self.assertLessEqual(float(np.abs(s).max()), 3 * std)
        # A normal cut at 3 sigma keeps 97.3 % of its variance (98.7 % of its std); the
        # uncut normal's std is 0.0085 above, well outside this bound (sampling error ~0.001).
        self.assertAlmostEqual(float(s.std()), std * math.sqrt(0.9733), delta=0.003)

    def test_adjacent_pair_rope_is_split_half_rope_on_permuted_rows(self):
        # What lets an engine with split-half RoPE run Huginn: reorder each head's q/k rows
        # (2i, 2i+1) -> (i, i + d/2); the scores are unchanged.
        rng = np.random.default_rng(5)
        d, heads, positions = 16, 3, np.array([0, 7, 300])
        q, k = rng.standard_normal((3, heads, d)), rng.standard_normal((3, heads, d))
        adjacent = np.einsum("qhd,khd->hqk", self.rh.rope_adjacent(q, positions, 5e4),
                             self.rh.rope_adjacent(k, positions, 5e4))
        perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])
        cos, sin = ro.rope_cos_sin(positions, d, 5e4)
        half = [ro.apply_rope(x[..., perm], cos, sin) for x in (q, k)]
        np.testing.assert_allclose(np.einsum("qhd,khd->hqk", *half), adjacent, rtol=1e-12, atol=1e-12)

    def test_incremental_decode_equals_full_recompute(self):
        prompt = [5, 9, 2, 250, 17]
        res = self.rh.generate(self.model, prompt, 5, self.init_state)
        self.assertEqual(res["exit_depths"].tolist(), [8] * 5)
        # The whole sequence as one prompt, every token at full depth from the same initial
        # states: the last position's logits are the last decode step's.
        full = prompt + res["tokens"][:-1].tolist()
        again = self.rh.generate(self.model, full, 1, self.init_state)
        np.testing.assert_allclose(again["step_logits"][0], res["step_logits"][-1], rtol=1e-10, atol=1e-10)

    def test_exit_criteria_stop_tokens_at_different_depths(self):
        for criterion, threshold in (("latent-diff", 0.03), ("kl", 5e-4), ("entropy-diff", 1e-3),
                                     ("argmax-stability", 2), ("minp-kl", 1e-4)):
            self.states.clear()
            res = self.rh.generate(self.model, [1, 2, 3, 4, 5], 12, self.init_state, criterion, threshold)
            d = res["exit_depths"].tolist()
            self.assertEqual(d[0], 8, "the prompt runs every step")
            self.assertTrue(all(1 <= x <= 8 for x in d), (criterion, d))
            self.assertTrue(any(x < 8 for x in d[1:]), (criterion, d))
            self.assertGreater(len(set(d[1:])), 1, (criterion, d))
        with self.assertRaises(ValueError):
            self.rh.generate(self.model, [1], 2, self.init_state, "perplexity")

    def test_an_early_exit_token_lends_its_last_step_to_deeper_ones(self):
        # A token that exited at step e is read, at deeper steps, at its step-e K/V (not an
        # earlier one); the cache raises rather than invent anything else.
        cache = self.rh.KVCache()
        k = np.ones((1, 4, 16))
        for step in range(3):
            cache.write(("core", step, 0), [0], (step + 1) * k, (step + 10) * k)
        keys, values = cache.read(("core", 5, 0), 1)
        np.testing.assert_array_equal(keys[0], 3 * k[0])
        np.testing.assert_array_equal(values[0], 12 * k[0])
        keys, _ = cache.read(("core", 1, 0), 1)
        np.testing.assert_array_equal(keys[0], 2 * k[0])
        with self.assertRaises(ValueError):
            cache.read(("core", 5, 1), 1)

    def test_stored_head_and_rope_table_are_checked(self):
        from safetensors_io import read_safetensors, write_safetensors
        path = os.path.join(self.dir, "model.safetensors")
        # Copies: the file is rewritten below, under the mapping read_safetensors returns.
        tensors = {n: (dt, np.array(v)) for n, (dt, v) in read_safetensors(path).items()}
        wte = tensors["transformer.wte.weight"]
        H, d, base = 64, 16, 5e4
        inv = 1.0 / np.power(base, np.arange(0, d, 2) / d)
        angle = np.arange(512)[:, None] * inv[None, :]
        table = np.stack([np.cos(angle), np.sin(angle)], -1).reshape(1, 512, 1, d // 2, 2).astype(np.float32)
        extra = dict(tensors, **{"lm_head.weight": wte, "freqs_cis": ("F32", table)})
        write_safetensors(path, extra)
        self.rh.load_model(self.dir)  # consistent: loads
        bad = dict(extra, **{"freqs_cis": ("F32", table * 0.5)})
        write_safetensors(path, bad)
        with self.assertRaises(ValueError):
            self.rh.load_model(self.dir)


if __name__ == "__main__":
    unittest.main()
