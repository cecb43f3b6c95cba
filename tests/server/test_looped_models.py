"""`rlt serve` on the other looped architectures, driven by the official openai client:
nanbeige-tiny (a looped Llama) and huginn-tiny (prelude and coda blocks around a recurrent block,
per-token exit criteria as request fields). Each served output equals the offline dense
reference's for the same prompt ids and seed (`rlt generate --reference`), tokens and exit depths.
"""
import json
import os
import subprocess
import tempfile
import unittest

from serve_util import CacheDir, Server, rlt_bin


class LoopedModelServer(unittest.TestCase):
    PRESET = ""

    @classmethod
    def setUpClass(cls):
        import openai
        cls.folder = tempfile.TemporaryDirectory(prefix="rlt_serve_model_")
        cls.model_dir = os.path.join(cls.folder.name, cls.PRESET)
        subprocess.run([rlt_bin(), "--log-level", "warn", "make-model", "--preset", cls.PRESET, "--out", cls.model_dir],
                       check=True, capture_output=True)
        cls.cache = CacheDir()
        # f32 K/V and the reference attention: the dense reference's arithmetic, so the same
        # tokens and depths (the exit criteria follow every rounding of a random model).
        cls.server = Server("--model", cls.model_dir, "--kv-dtype", "f32", "--attention-backend", "cpu_reference",
                            cache_dir=cls.cache.path)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="unused", max_retries=0, timeout=60)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        cls.folder.cleanup()
        assert code == 0, f"rlt serve exited with {code}"

    def reference(self, prompt_ids, max_tokens, seed, **fields):
        job = {"prompt_ids": prompt_ids, "max_tokens": max_tokens, "ignore_eos": True, "seed": seed, **fields}
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write(json.dumps(job) + "\n")
        try:
            out = subprocess.run([rlt_bin(), "--log-level", "warn", "generate", "--reference", "--model", self.model_dir,
                                  "--prompts-file", f.name], capture_output=True, text=True, check=True)
        finally:
            os.unlink(f.name)
        return json.loads(out.stdout.splitlines()[0])

    def served(self, prompt_ids, max_tokens, seed, **fields):
        r = self.client.completions.create(model=self.PRESET, prompt=prompt_ids, max_tokens=max_tokens, temperature=0,
                                           seed=seed, extra_body={"ignore_eos": True, **fields})
        return r.choices[0].model_extra


class NanbeigeServer(LoopedModelServer):
    PRESET = "nanbeige-tiny"

    def test_completions_equal_the_reference(self):
        got = self.served([5, 40, 77, 120], 8, 3)
        want = self.reference([5, 40, 77, 120], 8, 3)
        self.assertEqual(got["token_ids"], want["tokens"])
        self.assertEqual(got["exit_depths"], [2] * 8)

    def test_chat(self):
        r = self.client.chat.completions.create(model=self.PRESET, messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=4, temperature=0)
        self.assertEqual(r.choices[0].finish_reason, "length")


class HuginnServer(LoopedModelServer):
    PRESET = "huginn-tiny"

    def test_every_criterion_equals_the_reference(self):
        prompt = [7, 99, 31, 200, 18]
        for n, criterion in enumerate(("none", "latent-diff", "entropy-diff", "kl", "minp-kl", "argmax-stability")):
            with self.subTest(criterion=criterion):
                fields = {"exit_criterion": criterion, "min_loops": 1}
                got = self.served(prompt, 10, 40 + n, **fields)
                want = self.reference(prompt, 10, 40 + n, **fields)
                self.assertEqual(got["token_ids"], want["tokens"])
                self.assertEqual(got["exit_depths"], want["exit_depths"])

    def test_thresholds_streaming_and_chat(self):
        fields = {"exit_criterion": "latent-diff", "exit_criterion_threshold": 0.2, "min_loops": 2, "max_loops": 6}
        got = self.served([3, 4, 5], 8, 9, **fields)
        self.assertEqual(got["token_ids"], self.reference([3, 4, 5], 8, 9, **fields)["tokens"])
        self.assertTrue(all(2 <= d <= 6 for d in got["exit_depths"][1:]), got["exit_depths"])
        text = self.client.completions.create(model=self.PRESET, prompt=[3, 4, 5], max_tokens=8, temperature=0, seed=9,
                                              extra_body={"ignore_eos": True, **fields}).choices[0].text
        streamed = "".join(c.choices[0].text for c in self.client.completions.create(
            model=self.PRESET, prompt=[3, 4, 5], max_tokens=8, temperature=0, seed=9, stream=True,
            extra_body={"ignore_eos": True, **fields}) if c.choices)
        self.assertEqual(streamed, text)
        r = self.client.chat.completions.create(model=self.PRESET, messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=4, temperature=0, extra_body={"exit_criterion": "kl"})
        self.assertEqual(len(r.choices[0].model_extra["exit_depths"]), 4)

    def test_refusals_name_the_reason(self):
        import openai
        with self.assertRaises(openai.BadRequestError) as e:
            self.served([3], 2, 1, exit_criterion="entropy")
        self.assertIn("unknown exit criterion", str(e.exception))
        with self.assertRaises(openai.BadRequestError) as e:
            self.served([3], 2, 1, speculative={"method": "ngram"})
        self.assertIn("huginn_raven", str(e.exception))


if __name__ == "__main__":
    unittest.main()
