"""`rlt serve --reasoning-parser`: a chat output's <think> block becomes `reasoning_content`, the
rest `content`, streamed and not, as vLLM's parsers of the same names split it.

The demo model has random weights, so its output is forced with a regular expression (structured
output) to a thinking model's shape: reasoning, `</think>`, an answer (the demo's ChatML template
does not open the block, as an R1-style template would: the deepseek_r1 convention).
"""
import unittest

import openai

from serve_util import MODEL, CacheDir, Server

THOUGHT = "First, 2 and 2.</think>\n\nFour."


class ReasoningParser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cache = CacheDir()
        cls.server = Server("--reasoning-parser", "deepseek_r1", cache_dir=cls.cache.path)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="unused", max_retries=0, timeout=60)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"

    def forced(self, text, **kw):
        regex = "".join("\\" + c if c in ".+*?()[]{}|^$\\" else c for c in text)
        return self.client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "What is 2 + 2?"}], temperature=0, max_tokens=64,
            extra_body={"structured_outputs": {"regex": regex}}, **kw)

    def test_reasoning_and_content_are_split(self):
        r = self.forced(THOUGHT)
        message = r.choices[0].message
        self.assertEqual(message.reasoning_content, "First, 2 and 2.")
        self.assertEqual(message.content, "\n\nFour.")
        self.assertEqual(r.choices[0].finish_reason, "stop")

    def test_streamed_deltas_add_up_to_the_same_split(self):
        reasoning, content = "", ""
        for chunk in self.forced(THOUGHT, stream=True):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            reasoning += getattr(delta, "reasoning_content", None) or ""
            content += delta.content or ""
        self.assertEqual(reasoning, "First, 2 and 2.")
        self.assertEqual(content, "\n\nFour.")

    def test_output_that_never_leaves_the_block_has_null_content(self):
        message = self.forced("Still thinking").choices[0].message
        self.assertEqual(message.reasoning_content, "Still thinking")
        self.assertIsNone(message.content)

    def test_completions_are_not_split(self):
        r = self.client.completions.create(model=MODEL, prompt="a", max_tokens=12, temperature=0,
                                           extra_body={"structured_outputs": {"regex": "x</think>y"}})
        self.assertEqual(r.choices[0].text, "x</think>y")


class ReasoningParserFlag(unittest.TestCase):
    def test_unknown_parser_is_refused_at_startup(self):
        cache = CacheDir()
        try:
            with self.assertRaises(RuntimeError) as e:
                Server("--reasoning-parser", "granite", cache_dir=cache.path, startup_timeout=20)
            self.assertIn("accepted: none, deepseek_r1, qwen3", str(e.exception))
        finally:
            cache.cleanup()


if __name__ == "__main__":
    unittest.main()
