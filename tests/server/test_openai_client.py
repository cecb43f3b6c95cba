"""`rlt serve` driven by the official openai client: completions and chat, streaming and not,
stop strings, usage, logprobs, seeds and rlt's depth extensions.

The demo model has random weights: tests check mechanics (streamed = non-streamed, counts,
formats), never content.
"""
import unittest

import openai

from serve_util import MODEL, DemoServerCase

GREEDY = {"temperature": 0}


class OpenAIClient(DemoServerCase):

    def completion(self, **kw):
        return self.client.completions.create(model=MODEL, **kw)

    def stream_completion(self, **kw):
        chunks = list(self.client.completions.create(model=MODEL, stream=True, **kw))
        return chunks

    def chat(self, **kw):
        return self.client.chat.completions.create(model=MODEL, **kw)

    # --- models ---

    def test_models_lists_the_served_model(self):
        models = self.client.models.list()
        self.assertEqual([m.id for m in models.data], [MODEL])

    # --- completions ---

    def test_completion_counts_tokens_and_reports_depths(self):
        r = self.completion(prompt="Hello there", max_tokens=7, extra_body={"ignore_eos": True}, **GREEDY)
        self.assertEqual(r.object, "text_completion")
        self.assertTrue(r.id.startswith("cmpl-"))
        c = r.choices[0]
        self.assertEqual(c.finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 7)
        self.assertEqual(r.usage.prompt_tokens, len("Hello there"))  # byte-level demo tokenizer
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 7)
        extra = c.model_extra
        self.assertEqual(len(extra["token_ids"]), 7)
        self.assertEqual(len(extra["exit_depths"]), 7)
        self.assertEqual(extra["exit_depths"][0], 4)  # the first token always runs the full depth
        self.assertTrue(all(1 <= d <= 4 for d in extra["exit_depths"]))

    def test_streamed_text_equals_non_streamed_text(self):
        kw = dict(prompt="The quick brown fox", max_tokens=24, extra_body={"ignore_eos": True}, **GREEDY)
        full = self.completion(**kw)
        chunks = self.stream_completion(stream_options={"include_usage": True}, **kw)
        token_chunks = [c for c in chunks if c.choices]
        self.assertEqual("".join(c.choices[0].text for c in token_chunks), full.choices[0].text)
        # One chunk per token; only the last carries finish_reason; then the usage chunk.
        self.assertEqual(len(token_chunks), full.usage.completion_tokens)
        self.assertEqual([c.choices[0].finish_reason for c in token_chunks][-1], "length")
        self.assertTrue(all(c.choices[0].finish_reason is None for c in token_chunks[:-1]))
        self.assertTrue(all(c.usage is None for c in token_chunks))
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, full.usage.completion_tokens)
        self.assertEqual(chunks[-1].usage.prompt_tokens, full.usage.prompt_tokens)
        streamed_ids = [t for c in token_chunks for t in c.choices[0].model_extra["token_ids"]]
        self.assertEqual(streamed_ids, full.choices[0].model_extra["token_ids"])
        self.assertEqual(len({c.id for c in chunks}), 1)

    def test_stream_without_include_usage_has_no_usage_chunk(self):
        chunks = self.stream_completion(prompt="abc", max_tokens=3, **GREEDY)
        self.assertTrue(all(c.choices for c in chunks))
        self.assertTrue(all(getattr(c, "usage", None) is None for c in chunks))

    def test_token_id_prompt_and_prompt_lists(self):
        ids = self.completion(prompt=[3 + ord(ch) for ch in "Hi"], max_tokens=4, **GREEDY)
        text = self.completion(prompt="Hi", max_tokens=4, **GREEDY)
        self.assertEqual(ids.choices[0].text, text.choices[0].text)
        batch = self.completion(prompt=["Hi", "Hello", "Hey"], max_tokens=4, **GREEDY)
        self.assertEqual([c.index for c in batch.choices], [0, 1, 2])
        self.assertEqual(batch.choices[0].text, text.choices[0].text)
        self.assertEqual(batch.usage.prompt_tokens, 2 + 5 + 3)
        streamed = self.stream_completion(prompt=["Hi", "Hello"], max_tokens=4, **GREEDY)
        by_index = {0: "", 1: ""}
        for c in streamed:
            by_index[c.choices[0].index] += c.choices[0].text
        self.assertEqual(by_index[0], batch.choices[0].text)
        self.assertEqual(by_index[1], batch.choices[1].text)

    def test_seed_makes_sampling_reproducible(self):
        kw = dict(prompt="seeded", max_tokens=16, temperature=0.9, seed=1234, extra_body={"ignore_eos": True})
        a, b = self.completion(**kw), self.completion(**kw)
        self.assertEqual(a.choices[0].model_extra["token_ids"], b.choices[0].model_extra["token_ids"])

    def test_stop_string_spanning_tokens_is_cut_and_hidden(self):
        kw = dict(prompt="Once upon a time", max_tokens=40, temperature=0.9, seed=7, extra_body={"ignore_eos": True})
        full = self.completion(**kw).choices[0].text
        # A two-character stop string spans two tokens (one byte each) in the middle of the text.
        start = next(i for i in range(5, len(full) - 2) if full[i:i + 2].isprintable() and full[i] != full[i + 1])
        stop = full[start:start + 2]
        expected = full[:full.index(stop)]
        r = self.completion(stop=[stop, "\x00never"], **kw)
        self.assertEqual(r.choices[0].text, expected)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertNotIn(stop, r.choices[0].text)
        chunks = self.stream_completion(stop=stop, **kw)
        self.assertEqual("".join(c.choices[0].text for c in chunks), expected)
        self.assertEqual(chunks[-1].choices[0].finish_reason, "stop")

    def test_logprobs(self):
        r = self.completion(prompt="log", max_tokens=5, logprobs=3, **GREEDY)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), r.usage.completion_tokens)
        self.assertEqual(len(lp.token_logprobs), r.usage.completion_tokens)
        self.assertTrue(all(x <= 0 for x in lp.token_logprobs))
        self.assertTrue(all(len(t) >= 1 for t in lp.top_logprobs))
        # Greedy: the sampled token is the most likely one.
        for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
            self.assertAlmostEqual(chosen, max(top.values()), places=5)
        streamed = self.stream_completion(prompt="log", max_tokens=5, logprobs=3, **GREEDY)
        self.assertEqual([c.choices[0].logprobs.token_logprobs[0] for c in streamed], lp.token_logprobs)

    def test_depth_extensions_are_honoured(self):
        r = self.completion(prompt="depth", max_tokens=8, extra_body={"max_loops": 2, "min_loops": 1,
                                                                       "ignore_eos": True}, **GREEDY)
        depths = r.choices[0].model_extra["exit_depths"]
        self.assertEqual(depths[0], 4)  # the prompt's pass runs the full depth
        self.assertTrue(all(d <= 2 for d in depths[1:]), depths)
        r = self.completion(prompt="depth", max_tokens=16, extra_body={"exit_threshold": 0.3, "min_loops": 1,
                                                                        "ignore_eos": True}, **GREEDY)
        depths = r.choices[0].model_extra["exit_depths"]
        self.assertEqual(depths[0], 4)
        self.assertTrue(all(1 <= d <= 4 for d in depths))
        self.assertLess(sum(depths) / len(depths), 4)

    def test_n_choices_each_with_its_own_seed_stream(self):
        r = self.completion(prompt="x", n=2, max_tokens=12, temperature=1.0, seed=5, extra_body={"ignore_eos": True})
        self.assertEqual([c.index for c in r.choices], [0, 1])
        self.assertNotEqual(r.choices[0].model_extra["token_ids"], r.choices[1].model_extra["token_ids"])
        with self.assertRaises(openai.BadRequestError) as cm:
            self.completion(prompt="x", n=0)
        self.assertEqual(cm.exception.body["param"], "n")

    def test_unknown_field_is_named(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            self.completion(prompt="x", extra_body={"frobnicate": 1})
        self.assertIn("frobnicate", cm.exception.body["message"])

    # --- chat ---

    def test_chat_streamed_equals_non_streamed(self):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
        full = self.chat(messages=messages, max_tokens=12, **GREEDY)
        self.assertEqual(full.object, "chat.completion")
        self.assertTrue(full.id.startswith("chatcmpl-"))
        self.assertEqual(full.choices[0].message.role, "assistant")
        chunks = list(self.chat(messages=messages, max_tokens=12, stream=True,
                                stream_options={"include_usage": True}, **GREEDY))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        token_chunks = [c for c in chunks[1:] if c.choices]
        text = "".join(c.choices[0].delta.content or "" for c in token_chunks)
        self.assertEqual(text, full.choices[0].message.content)
        self.assertEqual(token_chunks[-1].choices[0].finish_reason, full.choices[0].finish_reason)
        self.assertEqual(len(token_chunks), full.usage.completion_tokens)
        self.assertEqual(chunks[-1].usage.total_tokens, full.usage.total_tokens)

    def test_chat_stops_at_end_of_turn_and_hides_it(self):
        # The demo model emits <|im_end|> (id 2, not its EOS id 0) now and then; find seeds where it does.
        stopped = 0
        for seed in range(30):
            r = self.chat(messages=[{"role": "user", "content": "Say something"}], max_tokens=40, temperature=1.0,
                          seed=seed)
            ids = r.choices[0].model_extra["token_ids"]
            if r.choices[0].finish_reason == "stop" and ids[-1] == 2:
                stopped += 1
                self.assertNotIn("<|im_end|>", r.choices[0].message.content)
                self.assertNotIn(2, ids[:-1])
                self.assertEqual(r.usage.completion_tokens, len(ids))
        self.assertGreater(stopped, 0, "no seed produced <|im_end|> within 40 tokens")

    def test_chat_logprobs(self):
        r = self.chat(messages=[{"role": "user", "content": "x"}], max_tokens=4, logprobs=True, top_logprobs=2,
                      **GREEDY)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), r.usage.completion_tokens)
        for entry in content:
            self.assertEqual(len(entry.top_logprobs), 2)
            self.assertEqual(bytes(entry.bytes).decode(errors="replace"), entry.token)

    def test_chat_max_completion_tokens(self):
        r = self.chat(messages=[{"role": "user", "content": "x"}], max_completion_tokens=3,
                      extra_body={"ignore_eos": True, "stop_token_ids": []}, **GREEDY)
        self.assertLessEqual(r.usage.completion_tokens, 3)


if __name__ == "__main__":
    unittest.main()
