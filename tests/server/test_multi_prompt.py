"""Several prompts in one /v1/completions request (what lm-eval's `local-completions` sends with
batch_size > 1): every choice must equal the same prompt sent alone — text, finish reason, token
ids and usage — streaming and not, and a stream must end with [DONE].

The matrix: {1, 2, 4 prompts} x {stop string, stop token, no stop} x {stream, not} x {choices that
end together, at different steps, one by length}. The demo model has random weights (its greedy
output repeats one byte), so the choices sample at temperature 1 with a fixed seed — a seeded
request gives the same tokens in any batch — and the stop strings and tokens are picked from each
prompt's own output, so that each scenario is what its name says; the test asserts the scenario
held before comparing. With no stop at all
every choice ends by length at the shared max_tokens: only "together" exists there.

Also: a request the engine aborts on its own (here: a checkpoint whose final norm is NaN, so no
logits row can be sampled) answers 500 with the engine's reason, logs it at error level, and
/metrics counts the choices as errors, not as client cancellations.
"""
import itertools
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

import openai

from serve_util import MODEL, CacheDir, Server, open_stream, rlt_bin, sse_events

MAX_TOKENS = 20
# top_k keeps the outputs of different prompts on a few shared bytes, so stops common to all exist.
SAMPLING = {"temperature": 1.0, "seed": 7, "top_k": 4}
POOL = ["The capital of France is", "Once upon a time", "Hello there", "abc", "The quick brown fox",
        "1 2 3 4", "Lorem ipsum dolor", "x", "What is 2+2?", "zzz"]
PROMPT_COUNTS = (1, 2, 4)
KINDS = ("string", "token", "none")
ENDINGS = ("together", "different", "length")


class MultiPrompt(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cache = CacheDir()
        cls.server = Server(cache_dir=cls.cache.path)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="unused", max_retries=0, timeout=60)
        # Each pool prompt's greedy output alone, without stops: where stops can be placed.
        cls.refs = {}
        for p in POOL:
            r = cls.client.completions.create(model=MODEL, prompt=p, max_tokens=MAX_TOKENS,
                                              temperature=SAMPLING["temperature"], seed=SAMPLING["seed"],
                                              extra_body={"ignore_eos": True, "top_k": SAMPLING["top_k"]})
            cls.refs[p] = (r.choices[0].text, r.choices[0].model_extra["token_ids"])

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"

    # --- the scenarios ---

    def units(self, prompt, kind):
        """What a stop of this kind can match, one entry per output token: its character (printable
        ASCII only: one byte is one token of the demo tokenizer) or its id."""
        _, ids = self.refs[prompt]
        if kind == "string":
            return [chr(t - 3) if 32 < t - 3 < 127 else None for t in ids]
        return list(ids)

    def candidates(self, n, kind, ending):
        """(prompts, stop units) that should make `ending` true for n choices. A request's stops
        apply to all its choices (as lm-eval's `until` list does), so a choice stops at the first
        of them in its own output."""
        if kind == "none":
            if ending == "together":
                yield POOL[:n], []
            return
        if ending == "together":
            # One prompt repeated: its choices stop at the same step by construction.
            for p in POOL:
                for unit in self.units(p, kind)[2:]:
                    if unit is not None:
                        yield [p] * n, [unit]
            return
        if n == 1 and ending == "different":
            return  # one choice cannot end at a step different from itself
        stoppers = n if ending == "different" else n - 1  # choices that must meet a stop
        for prompts in itertools.permutations(POOL, n):
            units = [self.units(p, kind) for p in prompts]
            options = [list(dict.fromkeys(x for x in u if x is not None))[:4] for u in units[:stoppers]]
            if ending == "length" and n == 1:
                options = [[x for p in POOL for x in self.units(p, kind) if x is not None][:8]]
            for stops in itertools.product(*options):
                stops = list(dict.fromkeys(stops))
                where = [min((i for i, x in enumerate(u) if x in stops), default=None) for u in units]
                if ending == "different" and None not in where and len(set(where)) == n:
                    yield list(prompts), stops
                if ending == "length" and where[-1] is None and None not in where[:-1]:
                    yield list(prompts), stops

    @staticmethod
    def holds(ending, expected):
        """Whether the single-prompt results show the scenario."""
        steps = [len(e[2]) for e in expected]
        reasons = [e[1] for e in expected]
        if ending == "together":
            return len(set(steps)) == 1
        if ending == "different":
            return len(set(steps)) == len(expected) and set(reasons) == {"stop"}
        return reasons[-1] == "length" and all(r == "stop" for r in reasons[:-1])

    def params(self, kind, stops):
        body = {"max_tokens": MAX_TOKENS, **SAMPLING, "ignore_eos": True}
        if kind == "string":
            body["stop"] = stops
        elif kind == "token":
            body["stop_token_ids"] = stops
        return body

    # --- one request, streamed or not, as plain choices ---

    def complete(self, prompt, body):
        extra = {k: v for k, v in body.items() if k not in ("max_tokens", "temperature", "seed", "stop")}
        stop = body.get("stop") or None
        r = self.client.completions.create(model=MODEL, prompt=prompt, max_tokens=body["max_tokens"],
                                           temperature=body["temperature"], seed=body["seed"], stop=stop,
                                           extra_body=extra)
        choices = sorted(r.choices, key=lambda c: c.index)
        return ([(c.text, c.finish_reason, c.model_extra["token_ids"]) for c in choices],
                (r.usage.prompt_tokens, r.usage.completion_tokens))

    def stream(self, prompt, body):
        conn, resp = open_stream(self.server, "/v1/completions",
                                 {"model": MODEL, "prompt": prompt, "stream": True,
                                  "stream_options": {"include_usage": True}, **body}, timeout=60)
        try:
            self.assertEqual(resp.status, 200)
            events = list(sse_events(iter(resp.readline, b"")))
        finally:
            conn.close()
        self.assertEqual(events[-1], "[DONE]", "the stream must end with [DONE]")
        n = len(prompt) if isinstance(prompt, list) else 1
        texts, reasons, ids = [""] * n, [None] * n, [[] for _ in range(n)]
        usage = None
        for e in events[:-1]:
            if e.get("usage"):
                usage = (e["usage"]["prompt_tokens"], e["usage"]["completion_tokens"])
            for c in e["choices"]:
                i = c["index"]
                self.assertIsNone(reasons[i], f"choice {i} got a chunk after its finish_reason")
                texts[i] += c["text"]
                ids[i] += c.get("token_ids", [])
                reasons[i] = c["finish_reason"]
        self.assertIsNotNone(usage, "include_usage asked for a usage chunk")
        return list(zip(texts, reasons, ids)), usage

    # --- the matrix ---

    def test_each_choice_equals_its_prompt_sent_alone(self):
        cells = 0
        for n, kind, ending in itertools.product(PROMPT_COUNTS, KINDS, ENDINGS):
            picked = None
            for prompts, stops in itertools.islice(self.candidates(n, kind, ending), 20):
                body = self.params(kind, stops)
                alone = [self.complete(p, body) for p in prompts]
                expected = [a[0][0] for a in alone]
                if self.holds(ending, expected):
                    picked = prompts, stops
                    break
            if picked is None:
                self.assertTrue(n == 1 and ending == "different" or kind == "none" and ending != "together",
                                f"no stop found for {n} prompts, {kind}, {ending}")
                continue
            expected_usage = (sum(a[1][0] for a in alone), sum(a[1][1] for a in alone))
            for streamed in (False, True):
                with self.subTest(prompts=n, kind=kind, ending=ending, stream=streamed, stops=stops):
                    got, usage = (self.stream if streamed else self.complete)(prompts if n > 1 else prompts[0], body)
                    self.assertEqual(got, expected)
                    self.assertEqual(usage, expected_usage)
                    cells += 1
        # 1 prompt: 2 kinds x {together, length} + none; 2 and 4 prompts: 2 kinds x 3 + none; x 2.
        self.assertEqual(cells, 2 * (5 + 7 + 7), "every possible cell of the matrix ran")
        self.server.wait_idle()


def patch_tensor_to_nan(folder, name):
    """Overwrites every element of one safetensors tensor with NaN, in place."""
    path = os.path.join(folder, "model.safetensors")
    with open(path, "r+b") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        info = header[name]
        begin, end = info["data_offsets"]
        nan = {"F32": struct.pack("<f", float("nan")), "BF16": b"\xc0\x7f", "F16": b"\x00\x7e"}[info["dtype"]]
        f.seek(8 + header_len + begin)
        f.write(nan * ((end - begin) // len(nan)))


class EngineAbort(unittest.TestCase):
    """A request the engine aborts on its own says why: in the response, the log and /metrics."""

    @classmethod
    def setUpClass(cls):
        cls.cache = CacheDir()
        # The demo model (tokenizer included), copied, with its final norm broken.
        subprocess.run([rlt_bin(), "info"], check=True, capture_output=True, env=dict(os.environ, RLT_CACHE_DIR=cls.cache.path))
        cls.model = os.path.join(tempfile.mkdtemp(prefix="rlt_nan_model_"), "nan-model")
        shutil.copytree(os.path.join(cls.cache.path, MODEL), cls.model)
        patch_tensor_to_nan(cls.model, "model.norm.weight")
        cls.server = Server("--model", cls.model, cache_dir=cls.cache.path)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        shutil.rmtree(os.path.dirname(cls.model), ignore_errors=True)
        assert code == 0, f"rlt serve exited with {code}"

    def test_engine_abort_is_a_500_with_its_reason_logged_and_counted(self):
        for stream in (False, True):
            with self.subTest(stream=stream):
                status, _, body = self.server.post("/v1/completions", {
                    "model": "nan-model", "prompt": ["Hello", "Hi there"], "max_tokens": 4, "stream": stream})
                self.assertEqual(status, 500, body)
                self.assertEqual(body["error"]["code"], "internal_error")
                self.assertRegex(body["error"]["message"], r"sampling failed: logits\[\d+\] is -?nan")
        self.server.wait_idle()
        logs = self.server.logs()
        self.assertRegex(logs, r"(?m)\[error\].*HTTP 500 \(internal_error\): the engine aborted choice \d")
        m = self.server.metrics()
        errors = m.get('rlt_requests_finished_total{endpoint="completions",reason="error"}', 0)
        cancelled = m.get('rlt_requests_finished_total{endpoint="completions",reason="cancelled"}', 0)
        self.assertEqual(errors, 4)  # two requests of two choices
        self.assertEqual(cancelled, 0)
        # The server keeps serving.
        status, _, _ = self.server.request("GET", "/health")
        self.assertEqual(status, 200)


if __name__ == "__main__":
    unittest.main()
