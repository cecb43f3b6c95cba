"""The rlt command line: info, generate, and its error messages (exit status and text)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "..", "shared", "fixtures", "ouro-1.4b")


def rlt(*args, env=None):
    return subprocess.run([os.environ["RLT_BIN"], "--log-level", "warn", *args], capture_output=True,
                          text=True, env=env, timeout=300)


class Cli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if "RLT_BIN" not in os.environ:
            raise unittest.SkipTest("RLT_BIN is not set (run through ctest)")
        cls.cache = tempfile.mkdtemp(prefix="rlt_cli_")
        cls.env = dict(os.environ, RLT_CACHE_DIR=cls.cache)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.cache, ignore_errors=True)

    def test_info_reports_real_ouro_parameter_count(self):
        if not os.path.isdir(FIXTURE):
            self.skipTest(f"fixture {FIXTURE} is absent (only CI has ../shared/fixtures)")
        out = rlt("info", "--model", FIXTURE, "--json")
        self.assertEqual(out.returncode, 0, out.stderr)
        info = json.loads(out.stdout)
        self.assertEqual(info["parameters"], 1434652673)
        self.assertFalse(info["weights_present"])
        self.assertEqual(info["kv_bytes_per_token"]["last_exited"], 768 * 1024)
        self.assertEqual(info["kv_bytes_per_token"]["shared"], 192 * 1024)
        text = rlt("info", "--model", FIXTURE)
        self.assertIn("1,434,652,673", text.stdout)

    def test_demo_model_is_created_and_generates(self):
        out = rlt("generate", "--prompt-ids", "1,2,3", "--max-tokens", "5", "--exit-threshold", "0.7",
                  "--ignore-eos", env=self.env)
        self.assertEqual(out.returncode, 0, out.stderr)
        result = json.loads(out.stdout)
        self.assertEqual(len(result["tokens"]), 5)
        self.assertEqual(result["exit_depths"][0], 4)
        self.assertEqual(result["finish_reason"], "length")
        info = json.loads(rlt("info", "--json", env=self.env).stdout)
        self.assertTrue(info["valid"])
        self.assertTrue(info["weights_present"])

    def test_bench_reports_each_speculative_run_against_the_plain_run_before_it(self):
        out = rlt("bench", "--num-requests", "2", "--concurrency", "2", "--prompt-len", "8", "--output-len", "8",
                  "--no-roofline", "--speculative-method", "ngram", "--repeat", "3", env=self.env)
        self.assertEqual(out.returncode, 0, out.stderr)
        spec = json.loads(out.stdout)["speculative"]
        pairs = spec["pair_decode_speedups"]
        self.assertEqual(len(pairs), 3)
        self.assertTrue(all(p > 0 for p in pairs), pairs)
        self.assertAlmostEqual(spec["median_pair_decode_speedup"], sorted(pairs)[1])
        self.assertIn("decode speed-up per pair", out.stderr)

    def test_errors_are_clear_and_exit_nonzero(self):
        cases = [
            (["info", "--model", "/nonexistent"], "--model '/nonexistent' does not exist"),
            (["generate", "--prompt-ids", "1,99999"], "token id 99999 is outside the vocabulary"),
            (["generate", "--prompt-ids", "1", "--min-loops", "3", "--max-loops", "2"], "min_loops"),
            (["generate", "--prompt-ids", "1", "--max-loops", "9"], "max_loops must be in [1, 4]"),
            (["generate", "--prompt-ids", "1", "--exit-threshold", "2"], "exit_threshold must be in [0, 1], got 2"),
            (["generate"], "no prompts"),
            (["generate", "--prompt-ids", "1,x"], "'x' is not a token id"),
            (["generate", "--prompt-ids", "1", "--kv-layout", "diagonal"], "unknown kv layout 'diagonal'"),
            (["generate", "--prompt-ids", "1", "--num-kv-blocks", "1"], "cannot hold one page of 4 planes"),
            (["generate", "--prompt-ids", "1", "--num-kv-blocks", "8", "--max-tokens", "200"], "KV blocks over its life"),
            (["generate", "--prompt-ids", "1", "--top-p", "0"], "top_p"),
            (["generate", "--prompt-ids", "1", "--max-tokens", "5000"], "max_position_embeddings"),
            (["generate", "--prompt-ids", "1", "--pdl"], "use --device cuda or drop --pdl"),
            (["make-model", "--preset", "ouro-7b", "--out", "/tmp/unused"],
             "expected one of demo, ouro-1.4b, ouro-2.6b, nanbeige-tiny, nanbeige-4.2-3b"),
            (["make-model", "--preset", "demo", "--out", "/proc/rlt"], "cannot create '/proc/rlt'"),
            (["make-model", "--out", "/tmp/unused", "--seed", "-1"], "--seed"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                out = rlt(*args, env=self.env)
                self.assertNotEqual(out.returncode, 0)
                self.assertIn(needle, out.stderr + out.stdout)

    def test_make_model_writes_a_checkpoint_that_generates(self):
        def weights(folder):
            with open(os.path.join(folder, "model.safetensors"), "rb") as f:
                return f.read()

        self.assertEqual(rlt("info", env=self.env).returncode, 0)  # creates the demo
        demo = os.path.join(self.cache, "rlt-demo-ouro-v1")
        # The demo preset at its own seed is the demo (weights, config and tokenizer).
        same = os.path.join(self.cache, "made-demo")
        out = rlt("make-model", "--preset", "demo", "--out", same)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(sorted(os.listdir(same)),
                         ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                          "tokenizer_config.json"])
        self.assertEqual(weights(same), weights(demo))
        other = os.path.join(self.cache, "made-seed-5")
        out = rlt("make-model", "--preset", "demo", "--out", other, "--seed", "5")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("random bf16 weights from seed 5", out.stderr)
        self.assertNotEqual(weights(other), weights(demo))
        gen = rlt("generate", "--model", other, "--prompt-ids", "1,2,3", "--max-tokens", "3",
                  "--ignore-eos")
        self.assertEqual(gen.returncode, 0, gen.stderr)
        self.assertEqual(len(json.loads(gen.stdout)["tokens"]), 3)

    def test_nanbeige_runs_through_make_model_info_generate_and_chat(self):
        folder = os.path.join(self.cache, "nanbeige-tiny")
        out = rlt("make-model", "--preset", "nanbeige-tiny", "--out", folder)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("byte-level tokenizer", out.stderr)
        info = json.loads(rlt("info", "--model", folder, "--json").stdout)
        self.assertEqual((info["model_type"], info["total_ut_steps"], info["exit_gate"]), ("nanbeige", 2, False))
        self.assertFalse(info["capabilities"]["adaptive exit"]["supported"])
        self.assertTrue(info["capabilities"]["speculative self"]["supported"])
        text = rlt("info", "--model", folder).stdout
        self.assertIn("not supported  adaptive exit (nanbeige has no exit gate", text)
        # Every token runs both loops; the engine and the dense reference agree.
        engine = rlt("generate", "--model", folder, "--prompt", "Hello there", "--max-tokens", "6", "--ignore-eos",
                     "--kv-dtype", "f32", "--attention-backend", "cpu_reference")
        self.assertEqual(engine.returncode, 0, engine.stderr)
        got = json.loads(engine.stdout)
        self.assertEqual(got["exit_depths"], [2] * 6)
        ref = rlt("generate", "--model", folder, "--prompt", "Hello there", "--max-tokens", "6", "--ignore-eos",
                  "--reference")
        self.assertEqual(ref.returncode, 0, ref.stderr)
        self.assertEqual(json.loads(ref.stdout)["tokens"], got["tokens"])
        # Speculative decoding: self drafts run one of the two loops; the output is plain decoding's.
        spec = rlt("generate", "--model", folder, "--prompt", "Hello there", "--max-tokens", "6", "--ignore-eos",
                   "--kv-dtype", "f32", "--attention-backend", "cpu_reference", "--speculative-method", "self")
        self.assertEqual(spec.returncode, 0, spec.stderr)
        self.assertEqual(json.loads(spec.stdout)["tokens"], got["tokens"])

    def test_engine_matches_reference_and_reads_jsonl(self):
        prompt = "7,8,9,10,11"
        common = ["--prompt-ids", prompt, "--max-tokens", "8", "--exit-threshold", "0.7", "--ignore-eos"]
        ref = rlt("generate", "--reference", *common, env=self.env)
        eng = rlt("generate", "--kv-dtype", "f32", "--attention-backend", "cpu_reference", *common, env=self.env)
        self.assertEqual(ref.returncode, 0, ref.stderr)
        self.assertEqual(eng.returncode, 0, eng.stderr)
        r, e = json.loads(ref.stdout), json.loads(eng.stdout)
        self.assertEqual(r["tokens"], e["tokens"])
        self.assertEqual(r["exit_depths"], e["exit_depths"])
        jsonl = os.path.join(self.cache, "prompts.jsonl")
        with open(jsonl, "w") as f:
            f.write(json.dumps({"id": 7, "prompt_ids": [1, 2, 3], "max_tokens": 3, "ignore_eos": True}) + "\n")
            f.write(json.dumps({"prompt_ids": [4, 5], "max_tokens": 2, "temperature": 0.8, "seed": 3,
                                "logprobs": 2, "ignore_eos": True}) + "\n")
        out = rlt("generate", "--prompts-file", jsonl, env=self.env)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = {row["id"]: row for row in map(json.loads, out.stdout.splitlines())}
        self.assertEqual(len(rows[7]["tokens"]), 3)
        self.assertEqual(len(rows[1]["logprobs"]), 2)
        self.assertEqual(len(rows[1]["logprobs"][0]["top"]), 2)
        with open(jsonl, "w") as f:
            f.write('{"prompt_ids": [1], "temprature": 1}\n')
        bad = rlt("generate", "--prompts-file", jsonl, env=self.env)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("unknown field 'temprature'", bad.stderr)

    def test_tokenize_matches_hf_and_generate_takes_text(self):
        from tokenizers import Tokenizer
        text = "Hello wörld 123 <|im_start|>user\n日本語 😀"
        folder = FIXTURE if os.path.isdir(FIXTURE) else None
        if folder is None:
            rlt("info", env=self.env)
            folder = os.path.join(self.cache, "rlt-demo-ouro-v1")
        hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        out = rlt("tokenize", "--model", folder, "--text", text, env=self.env)
        self.assertEqual(out.returncode, 0, out.stderr)
        ids = json.loads(out.stdout)["ids"]
        self.assertEqual(ids, hf.encode(text).ids)
        back = rlt("detokenize", "--model", folder, "--ids", ",".join(map(str, ids)), env=self.env)
        self.assertEqual(json.loads(back.stdout)["text"], hf.decode(ids, skip_special_tokens=False))
        gen = rlt("generate", "--prompt", "Hi there", "--max-tokens", "5", "--ignore-eos", env=self.env)
        self.assertEqual(gen.returncode, 0, gen.stderr)
        row = json.loads(gen.stdout)
        demo = Tokenizer.from_file(os.path.join(self.cache, "rlt-demo-ouro-v1", "tokenizer.json"))
        self.assertEqual(row["prompt_tokens"], len(demo.encode("Hi there").ids))
        self.assertEqual(row["text"], demo.decode(row["tokens"], skip_special_tokens=True))

    def test_attention_explain_reports_every_candidate(self):
        out = rlt("attention", "explain", "--json", env=self.env)
        self.assertEqual(out.returncode, 0, out.stderr)
        report = json.loads(out.stdout)
        self.assertEqual(report["requested"], "auto")
        self.assertIn(report["selected"], ("cpu_flash", "cpu_reference"))
        self.assertEqual({c["backend"] for c in report["candidates"]},
                         {"cuda_hopper", "cuda_paged", "cudnn", "cpu_flash", "cpu_reference"})
        gpu = json.loads(rlt("attention", "explain", "--json", "--assume-device", "cuda:sm_90",
                             "--assume-cuda-build", env=self.env).stdout)
        # The demo model's head_dim 32 is not one of the Hopper kernel's sizes.
        self.assertEqual(gpu["selected"], "cuda_paged")
        codes = {c["backend"]: c["code"] for c in gpu["candidates"]}
        self.assertEqual(codes["cuda_hopper"], "head_dim")
        # Requirements nothing on this device meets fail startup, naming every candidate.
        graphs = rlt("attention", "explain", "--assume-device", "cpu:avx2", "--cuda-graphs", env=self.env)
        self.assertEqual(graphs.returncode, 1)
        self.assertIn("missing_capability:cuda_graphs", graphs.stdout)
        explicit = rlt("attention", "explain", "--attention-backend", "cuda_paged", env=self.env)
        self.assertEqual(explicit.returncode, 1)
        self.assertIn("no fallback", explicit.stdout)
        bad = rlt("attention", "explain", "--assume-device", "tpu:v5", env=self.env)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("--assume-device", bad.stderr)

    def test_info_refuses_broken_checkpoint(self):
        rlt("info", env=self.env)  # make sure the demo exists
        broken = os.path.join(self.cache, "broken")
        shutil.copytree(os.path.join(self.cache, "rlt-demo-ouro-v1"), broken)
        with open(os.path.join(broken, "model.safetensors"), "r+b") as f:
            f.truncate(1000)
        out = rlt("info", "--model", broken)
        self.assertEqual(out.returncode, 1)
        self.assertIn("invalid safetensors header", out.stdout + out.stderr)
        gen = rlt("generate", "--model", broken, "--prompt-ids", "1")
        self.assertEqual(gen.returncode, 1)
        self.assertIn("error:", gen.stderr)

    def test_activation_dtype_bf16_is_explicit(self):
        # bf16 activations run bf16 weights through the AVX512_BF16 kernel; anything that cannot
        # honour the choice is refused with the reason, never silently run in f32.
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import make_model  # noqa: E402
        f16 = os.path.join(self.cache, "tiny_f16")
        make_model.make_model(f16, make_model.ModelSpec("tiny", dtype="f16", seed=3))
        out = rlt("generate", "--model", f16, "--prompt-ids", "1,2", "--activation-dtype", "bf16")
        self.assertEqual(out.returncode, 1)
        supported = "needs a CPU with AVX512_BF16" not in out.stderr
        if supported:
            self.assertIn("applies to bf16 weights", out.stderr)
            self.assertIn("use --activation-dtype f32", out.stderr)
        bad = rlt("generate", "--prompt-ids", "1", "--activation-dtype", "fp8", env=self.env)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("fp8", bad.stderr)
        demo = rlt("generate", "--prompt-ids", "1,2,3", "--max-tokens", "4", "--activation-dtype", "bf16", env=self.env)
        if supported:
            self.assertEqual(demo.returncode, 0, demo.stderr)
            self.assertEqual(len(json.loads(demo.stdout.splitlines()[0])["tokens"]), 4)
        else:
            self.assertIn("needs a CPU with AVX512_BF16", demo.stderr)

    def test_llama_checkpoint_runs_through_info_and_generate(self):
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import make_model  # noqa: E402
        folder = os.path.join(self.cache, "tiny_llama")
        make_model.make_model(folder, make_model.ModelSpec("tiny", arch="llama", dtype="bf16", seed=4,
                                                           tie_word_embeddings=True))
        info = rlt("info", "--model", folder, "--json")
        self.assertEqual(info.returncode, 0, info.stderr)
        j = json.loads(info.stdout)
        self.assertEqual((j["model_type"], j["total_ut_steps"], j["exit_gate"], j["tie_word_embeddings"]),
                         ("llama", 1, False, True))
        gen = rlt("generate", "--model", folder, "--prompt-ids", "1,2,3", "--max-tokens", "5",
                  "--exit-threshold", "0.5")
        self.assertEqual(gen.returncode, 0, gen.stderr)
        self.assertEqual(json.loads(gen.stdout.splitlines()[0])["exit_depths"], [1] * 5)


if __name__ == "__main__":
    unittest.main()
