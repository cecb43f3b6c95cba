"""`rlt serve --model FILE.gguf` with the real SmolLM2 GGUF (fetched by scripts/setup.sh; skipped
without it), driven by the official openai client: the served name is the file's name without
.gguf, chat completions use the template from the GGUF metadata and stop at its end-of-turn
token (unless ignore_eos), and a greedy answer to a factual question is right; /tokenize and
/detokenize (vLLM's) count what the generation endpoints count and round-trip text.
"""
import json
import unittest

import openai

from serve_util import SmolLM2ServerCase

NAME = SmolLM2ServerCase.NAME


class ServeGguf(SmolLM2ServerCase):
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


    def post(self, path, body):
        """(status, parsed JSON body, headers)."""
        status, headers, data = self.server.post(path, body, timeout=60)
        return status, data, headers

    def test_tokenize_counts_what_generation_counts(self):
        text = "The capital of France is"
        status, body, _ = self.post("/tokenize", {"model": NAME, "prompt": text, "return_token_strs": True})
        self.assertEqual(status, 200, body)
        r = self.client.completions.create(model=NAME, prompt=text, max_tokens=1, temperature=0)
        self.assertEqual(body["count"], r.usage.prompt_tokens)
        self.assertEqual(len(body["tokens"]), body["count"])
        self.assertEqual(len(body["token_strs"]), body["count"])
        self.assertGreater(body["max_model_len"], 0)
        status, d, _ = self.post("/detokenize", {"model": NAME, "tokens": body["tokens"]})
        self.assertEqual(status, 200, d)
        self.assertEqual(d["prompt"], text)
        messages = [{"role": "user", "content": "What is the capital of France?"}]
        chat = self.post("/tokenize", {"messages": messages})[1]
        c = self.client.chat.completions.create(model=NAME, messages=messages, max_tokens=1, temperature=0)
        self.assertEqual(chat["count"], c.usage.prompt_tokens)
        rendered = self.post("/detokenize", {"tokens": chat["tokens"]})[1]["prompt"]
        self.assertIn("<|im_start|>user\nWhat is the capital of France?<|im_end|>", rendered)
        without = self.post("/tokenize", {"messages": messages, "add_generation_prompt": False})[1]
        self.assertLess(without["count"], chat["count"])

    def test_tokenizer_info_is_what_lm_eval_reads(self):
        status, _, body = self.server.request("GET", "/tokenizer_info")
        self.assertEqual(status, 200)
        info = json.loads(body)
        self.assertEqual(info["eos_token"], "<|im_end|>")
        self.assertEqual(self.post("/tokenize", {"prompt": info["eos_token"], "add_special_tokens": False})[1]["tokens"],
                         [2], "lm-eval's eot id: the eos text tokenized")
        self.assertIn("<|im_start|>", info["chat_template"])
        self.assertEqual(info["model_max_length"], 8192)

    def test_tokenize_errors(self):
        def error(path, body, want, param):
            status, data, _ = self.post(path, body)
            self.assertEqual(status, want, data)
            self.assertEqual(data["error"]["param"], param, data)

        error("/tokenize", {"prompt": "a", "messages": [{"role": "user", "content": "b"}]}, 400, "messages")
        error("/tokenize", {}, 400, "prompt")
        error("/tokenize", {"prompt": "a", "model": "other"}, 404, "model")
        error("/tokenize", {"prompt": "a", "unknown": 1}, 400, "unknown")
        error("/detokenize", {"tokens": [1, 10 ** 9]}, 400, "tokens")
        error("/detokenize", {"tokens": "1 2"}, 400, "tokens")
        status, headers, _ = self.server.request("GET", "/tokenize")
        self.assertEqual(status, 405)
        self.assertEqual(headers["allow"], "POST")

    def test_logit_bias(self):
        prompt = "The capital of France is"
        plain = self.client.completions.create(model=NAME, prompt=prompt, max_tokens=1, temperature=0,
                                               logprobs=1)
        first = plain.choices[0].logprobs.tokens[0]
        first_id = self.post("/tokenize", {"prompt": first, "add_special_tokens": False})[1]["tokens"][0]
        banned = self.client.completions.create(model=NAME, prompt=prompt, max_tokens=1, temperature=0,
                                                logit_bias={str(first_id): -100})
        self.assertNotEqual(banned.choices[0].text, plain.choices[0].text)
        forced = self.client.completions.create(model=NAME, prompt=prompt, max_tokens=3, temperature=0.8, seed=7,
                                                logit_bias={"42": 100})
        self.assertEqual(forced.choices[0].text, self.post("/detokenize", {"tokens": [42, 42, 42]})[1]["prompt"])
        for bias, fragment in (({"42": 101}, "[-100, 100]"), ({"99999999": 1}, "outside the vocabulary"),
                               ({"x": 1}, "token ids")):
            with self.assertRaises(openai.BadRequestError) as e:
                self.client.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "hi"}],
                                                    max_tokens=1, logit_bias=bias)
            self.assertEqual(e.exception.body["param"], "logit_bias")
            self.assertIn(fragment, e.exception.body["message"])

    def test_echo_and_prompt_logprobs_score_the_prompt_as_generation_scored_it(self):
        prompt = "The capital of France is"
        ids = self.post("/tokenize", {"prompt": prompt})[1]["tokens"]
        gen = self.client.completions.create(model=NAME, prompt=prompt, max_tokens=8, temperature=0, logprobs=2)
        gen_ids = gen.choices[0].token_ids
        scored = self.client.completions.create(model=NAME, prompt=ids + gen_ids, max_tokens=1, temperature=0,
                                                logprobs=2, echo=True, extra_body={"prompt_logprobs": 3})
        c = scored.choices[0]
        lp = c.logprobs
        n = len(ids) + len(gen_ids)
        self.assertEqual(len(lp.tokens), n + 1, "every prompt token, then the generated one")
        self.assertIsNone(lp.token_logprobs[0])
        self.assertIsNone(lp.top_logprobs[0])
        self.assertTrue(all(x is not None for x in lp.token_logprobs[1:]))
        self.assertEqual(c.text, self.post("/detokenize", {"tokens": ids + gen_ids + c.token_ids})[1]["prompt"])
        self.assertEqual(lp.text_offset[0], 0)
        self.assertEqual(lp.text_offset, sorted(lp.text_offset))
        # The prompt's tail is what greedy decoding generated: scored in one prefill pass it gets
        # the logprobs decoding gave it (the same kernels, row by row; the prefill and decode
        # attention kernels may round differently: 1e-4 absolute bounds that) and is the argmax
        # (lm-eval's is_greedy).
        for k, token in enumerate(gen.choices[0].logprobs.tokens):
            at = len(ids) + k
            self.assertEqual(lp.tokens[at], token)
            self.assertAlmostEqual(lp.token_logprobs[at], gen.choices[0].logprobs.token_logprobs[k], delta=1e-4)
            top = lp.top_logprobs[at]
            self.assertEqual(max(top, key=top.get), token)
            self.assertEqual(len(top), 2, "the token and its alternative (it is the most likely one)")
        # vLLM's prompt_logprobs: None, then per token a map from id to logprob, rank and text.
        plp = c.prompt_logprobs
        self.assertEqual(len(plp), n)
        self.assertIsNone(plp[0])
        for i, entry in enumerate(plp[1:], start=1):
            token = str((ids + gen_ids)[i])
            self.assertIn(token, entry)
            self.assertAlmostEqual(entry[token]["logprob"], lp.token_logprobs[i], places=6)
            self.assertEqual(entry[token]["decoded_token"], lp.tokens[i])
            ranks = sorted(v["rank"] for v in entry.values())
            self.assertEqual(ranks[:3], [1, 2, 3][:len(ranks[:3])])
            self.assertLessEqual(len(entry), 4)
        for i in range(len(ids), n):
            self.assertEqual(plp[i][str((ids + gen_ids)[i])]["rank"], 1, "greedy tokens rank first")
        # The same scoring in a batch of prompts (lm-eval's batch_size > 1), and streamed.
        batch = self.client.completions.create(model=NAME, prompt=[ids, ids + gen_ids, ids[:2], ids + gen_ids[:3]],
                                               max_tokens=1, temperature=0, logprobs=2, echo=True)
        self.assertEqual(batch.choices[1].logprobs.token_logprobs, lp.token_logprobs, "batch-invariant")
        self.assertEqual(batch.choices[1].text, c.text)
        self.assertEqual(len(batch.choices[2].logprobs.tokens), 3)
        chunks = list(self.client.completions.create(model=NAME, prompt=ids + gen_ids, max_tokens=1, temperature=0,
                                                     logprobs=2, echo=True, stream=True))
        self.assertEqual("".join(ch.choices[0].text for ch in chunks if ch.choices), c.text)
        streamed = [x for ch in chunks if ch.choices and ch.choices[0].logprobs
                    for x in ch.choices[0].logprobs.token_logprobs]
        self.assertEqual(streamed, lp.token_logprobs)
        # max_tokens 0 with echo (OpenAI's legacy scoring): the prompt and its logprobs, nothing else.
        only = self.client.completions.create(model=NAME, prompt=ids + gen_ids, max_tokens=0, temperature=0,
                                              logprobs=2, echo=True)
        self.assertEqual(only.choices[0].logprobs.token_logprobs, lp.token_logprobs[:n])
        self.assertEqual(only.choices[0].text, self.post("/detokenize", {"tokens": ids + gen_ids})[1]["prompt"])
        self.assertEqual(only.choices[0].finish_reason, "length")
        self.assertEqual(only.usage.completion_tokens, 0)
        only_chunks = list(self.client.completions.create(model=NAME, prompt=ids + gen_ids, max_tokens=0,
                                                          logprobs=2, echo=True, stream=True))
        self.assertEqual("".join(ch.choices[0].text for ch in only_chunks if ch.choices), only.choices[0].text)
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model=NAME, prompt=prompt, max_tokens=0)
        self.assertEqual(e.exception.body["param"], "max_tokens")
        # echo without logprobs only prepends the prompt; a text prompt comes back as sent.
        plain = self.client.completions.create(model=NAME, prompt=prompt, max_tokens=2, temperature=0, echo=True)
        self.assertTrue(plain.choices[0].text.startswith(prompt))
        self.assertIsNone(plain.choices[0].logprobs)
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(model=NAME, prompt=prompt, max_tokens=1, extra_body={"prompt_logprobs": 21})
        self.assertEqual(e.exception.body["param"], "prompt_logprobs")

    def test_n_and_best_of(self):
        prompt = "Once upon a time"
        kw = dict(model=NAME, prompt=prompt, max_tokens=8, temperature=1.0, seed=11)
        r = self.client.completions.create(n=3, **kw)
        self.assertEqual([c.index for c in r.choices], [0, 1, 2])
        self.assertGreater(len({c.text for c in r.choices}), 1, "each choice its own seed stream")
        self.assertEqual([c.text for c in self.client.completions.create(n=3, **kw).choices],
                         [c.text for c in r.choices], "a seed reproduces every choice")
        one = self.client.completions.create(**kw)
        self.assertEqual(r.choices[0].text, one.choices[0].text, "choice 0 takes the seed itself")
        self.assertEqual(r.usage.prompt_tokens, one.usage.prompt_tokens, "the prompt counted once")
        self.assertEqual(r.usage.completion_tokens, sum(len(c.token_ids) for c in r.choices))
        two = self.client.completions.create(model=NAME, prompt=[prompt, "The sky"], max_tokens=4, temperature=1.0,
                                             seed=11, n=2)
        self.assertEqual([c.index for c in two.choices], [0, 1, 2, 3])
        self.assertEqual(two.choices[0].text[:1], r.choices[0].text[:1])
        # best_of: four generated (the same four as n=4 with this seed), the two with the highest
        # cumulative logprob returned, best first.
        four = self.client.completions.create(n=4, logprobs=0, **kw)
        ranked = sorted(four.choices, key=lambda c: -sum(c.logprobs.token_logprobs))
        best = self.client.completions.create(n=2, best_of=4, **kw)
        self.assertEqual([c.text for c in best.choices], [c.text for c in ranked[:2]])
        self.assertIsNone(best.choices[0].logprobs, "logprobs only when asked for")
        self.assertEqual(best.usage.completion_tokens, four.usage.completion_tokens, "every generated token counts")
        streamed = {}
        for chunk in self.client.completions.create(n=3, stream=True, **kw):
            for c in chunk.choices:
                streamed[c.index] = streamed.get(c.index, "") + c.text
        self.assertEqual([streamed[i] for i in range(3)], [c.text for c in r.choices])
        chat = self.client.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "Hi"}],
                                                   max_tokens=4, temperature=1.0, seed=3, n=2)
        self.assertEqual([c.index for c in chat.choices], [0, 1])
        for fields, param in (({"n": 0}, "n"), ({"n": 129}, "n"), ({"n": 3, "best_of": 2}, "best_of"),
                              ({"best_of": 2, "stream": True}, "best_of")):
            status, body, _ = self.post("/v1/completions", {"model": NAME, "prompt": prompt, **fields})
            self.assertEqual(status, 400, body)
            self.assertEqual(body["error"]["param"], param, body)


if __name__ == "__main__":
    unittest.main()
