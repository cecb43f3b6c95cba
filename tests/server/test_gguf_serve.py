"""`rlt serve --model FILE.gguf` with the real SmolLM2 GGUF (fetched by scripts/setup.sh; skipped
without it), driven by the official openai client: the served name is the file's name without
.gguf, chat completions use the template from the GGUF metadata and stop at its end-of-turn
token (unless ignore_eos), and a greedy answer to a factual question is right.
"""
import os
import sys
import unittest

import openai

from serve_util import CacheDir, Server

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"))
from rlt_cache import smollm2_path  # noqa: E402

NAME = "SmolLM2-135M-Instruct.Q4_1"




class ServeGguf(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        path = smollm2_path()  # before Server() points RLT_CACHE_DIR at a temporary folder
        if not os.path.exists(path):
            raise unittest.SkipTest(f"{path} is absent: scripts/setup.sh fetches it from PyPI")
        cls.cache = CacheDir()
        cls.server = Server("--model", path, "--threads", "2", cache_dir=cls.cache.path, startup_timeout=120)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="unused", max_retries=0, timeout=120)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"

    def test_chat_with_the_gguf_template(self):
        self.assertEqual([m.id for m in self.client.models.list().data], [NAME])
        r = self.client.chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=32, temperature=0)
        self.assertIn("Paris", r.choices[0].message.content)
        self.assertEqual(r.choices[0].finish_reason, "stop")  # the template's <|im_end|>
        self.assertNotIn("<|im_end|>", r.choices[0].message.content)
        streamed = "".join(c.choices[0].delta.content or "" for c in self.client.chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=32, temperature=0, stream=True) if c.choices)
        self.assertEqual(streamed, r.choices[0].message.content)

    def test_ignore_eos_continues_past_the_end_of_turn(self):
        # <|im_end|> is SmolLM2's eos and its end of turn: ignore_eos generates through it.
        messages = [{"role": "user", "content": "What is the capital of France?"}]
        r = self.client.chat.completions.create(model=NAME, messages=messages, max_tokens=48, temperature=0,
                                                extra_body={"ignore_eos": True})
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 48)
        plain = self.client.chat.completions.create(model=NAME, messages=messages, max_tokens=48, temperature=0)
        self.assertEqual(plain.choices[0].finish_reason, "stop")
        self.assertLess(plain.usage.completion_tokens, 48)


if __name__ == "__main__":
    unittest.main()
