"""`rlt serve --reasoning-parser deepseek_r1`: a chat output's <think> block becomes
`reasoning_content`, the rest `content`, streamed and not, as vLLM's parser of that name splits it.

The demo model has random weights: its output never closes a block, so it is all reasoning (the
split at a `</think>` is unit-tested in rlt_server_tests). Constrained outputs are never split.
"""
import unittest

from serve_util import MODEL, CacheDir, DemoServerCase, Server

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]


class ReasoningParser(DemoServerCase):
    SERVER_ARGS = ("--reasoning-parser", "deepseek_r1")

    def chat(self, **kw):
        return self.client.chat.completions.create(model=MODEL, messages=MESSAGES, temperature=0, max_tokens=12, **kw)

    def test_an_unclosed_block_is_all_reasoning_streamed_or_not(self):
        message = self.chat().choices[0].message
        self.assertNotIn("</think>", message.reasoning_content)
        self.assertGreater(len(message.reasoning_content), 0)
        self.assertIsNone(message.content)
        reasoning, content = "", ""
        for chunk in self.chat(stream=True):
            if chunk.choices:
                delta = chunk.choices[0].delta
                reasoning += getattr(delta, "reasoning_content", None) or ""
                content += delta.content or ""
        self.assertEqual(reasoning, message.reasoning_content)
        self.assertEqual(content, "")

    def test_constrained_output_is_all_answer(self):
        r = self.chat(extra_body={"structured_outputs": {"regex": "x</think>y"}})
        self.assertEqual(r.choices[0].message.content, "x</think>y")
        self.assertIsNone(getattr(r.choices[0].message, "reasoning_content", None))

    def test_completions_are_not_split(self):
        r = self.client.completions.create(model=MODEL, prompt="a", max_tokens=12, temperature=0,
                                           extra_body={"structured_outputs": {"regex": "x</think>y"}})
        self.assertEqual(r.choices[0].text, "x</think>y")

    def test_startup_log_names_the_parser(self):
        self.assertIn("reasoning parser deepseek_r1", self.server.logs())


class ReasoningParserFlag(unittest.TestCase):
    def test_unknown_parser_is_refused_at_startup(self):
        cache = CacheDir()
        try:
            with self.assertRaises(RuntimeError) as e:
                Server("--reasoning-parser", "granite", cache_dir=cache.path, startup_timeout=20)
            self.assertIn("accepted: none, deepseek_r1", str(e.exception))
        finally:
            cache.cleanup()


if __name__ == "__main__":
    unittest.main()
