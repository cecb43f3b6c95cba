"""Every documented error status of `rlt serve`, with OpenAI-style bodies, through the openai client
and raw HTTP: 400, 401, 404, 405 (+ Allow), 413, 415, 429 (+ Retry-After), 503 while loading (+ Retry-After), 504.
"""
import json
import time
import unittest

import openai

from serve_util import MODEL, CacheDir, Server, open_stream

KEY = "sekret-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def assert_error_body(test, body, status_code=None):
    test.assertIn("error", body)
    for field in ("message", "type", "param", "code"):
        test.assertIn(field, body["error"])
    test.assertTrue(body["error"]["message"])
    if status_code:
        test.assertEqual(body["error"]["code"], status_code)


class Errors(unittest.TestCase):
    """One server with an API key, a small body limit, one request slot and a short timeout.
    Engine steps are slowed (5 ms) so long requests stay in flight long enough to observe."""

    @classmethod
    def setUpClass(cls):
        cls.cache = CacheDir()
        cls.server = Server("--api-key", KEY, "--max-body-bytes", "4096", "--max-requests", "1",
                            "--request-timeout", "1", "--debug-step-delay", "0.005", cache_dir=cls.cache.path)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key=KEY, max_retries=0, timeout=30)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"

    def post(self, body, headers=AUTH, path="/v1/completions"):
        return self.server.post(path, body, headers)

    def test_400_invalid_fields_name_the_field(self):
        cases = [
            ({"model": MODEL, "prompt": 5}, "prompt"),
            ({"model": MODEL, "prompt": "x", "temperature": "0"}, "temperature"),
            ({"model": MODEL, "prompt": "x", "max_tokens": 0}, "max_tokens"),
            ({"model": MODEL, "prompt": "x", "n": 0}, "n"),
            ({"model": MODEL, "prompt": "x", "n": 2, "best_of": 1}, "best_of"),
            ({"model": MODEL, "prompt": "x", "stream": 1}, "stream"),
            ({"model": MODEL, "prompt": "x", "seed": -1}, "seed"),
            ({"model": MODEL, "prompt": "x", "whatever": True}, "whatever"),
            ({"model": MODEL, "prompt": "x", "stream_options": {}}, "stream_options"),
            ({"model": MODEL, "prompt": "x", "max_tokens": 100000}, "max_tokens"),
            ({"model": MODEL, "prompt": "x", "max_loops": 99}, "max_loops"),
            ({"model": MODEL, "prompt": ""}, "prompt"),
            # Ranges checked with the model (SamplingParams) name their field too.
            ({"model": MODEL, "prompt": "x", "temperature": -1}, "temperature"),
            ({"model": MODEL, "prompt": "x", "top_p": 0}, "top_p"),
            ({"model": MODEL, "prompt": "x", "min_p": 2}, "min_p"),
            ({"model": MODEL, "prompt": "x", "presence_penalty": 3}, "presence_penalty"),
            ({"model": MODEL, "prompt": "x", "frequency_penalty": -3}, "frequency_penalty"),
            ({"model": MODEL, "prompt": "x", "repetition_penalty": 0}, "repetition_penalty"),
            ({"model": MODEL, "prompt": "x", "top_k": -2}, "top_k"),
            ({"model": MODEL, "prompt": "x", "exit_threshold": 2}, "exit_threshold"),
            ({"model": MODEL, "prompt": "x", "exit_criterion": "entropy"}, "exit_criterion"),
            # Huginn's criteria on an Ouro model: refused by the engine with the reason.
            ({"model": MODEL, "prompt": "x", "exit_criterion": "kl"}, None),
            ({"model": MODEL, "prompt": "x", "stop_token_ids": [10 ** 7]}, "stop_token_ids"),
        ]
        for body, param in cases:
            with self.subTest(body=body):
                status, _, err = self.post(body)
                self.assertEqual(status, 400, err)
                assert_error_body(self, err)
                self.assertEqual(err["error"]["type"], "invalid_request_error")
                if param:
                    self.assertEqual(err["error"]["param"], param)
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model=MODEL, messages=[])

    def test_401_without_or_with_a_wrong_key(self):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            status, _, err = self.post({"model": MODEL, "prompt": "x"}, headers=headers)
            self.assertEqual(status, 401)
            assert_error_body(self, err, "invalid_api_key")
        status, _, _ = self.server.request("GET", "/v1/models")
        self.assertEqual(status, 401)
        bad = openai.OpenAI(base_url=self.server.base + "/v1", api_key="nope", max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.models.list()
        # Health and metrics stay open for probes.
        self.assertEqual(self.server.request("GET", "/health")[0], 200)
        self.assertEqual(self.server.request("GET", "/metrics")[0], 200)
        self.assertEqual([m.id for m in self.client.models.list().data], [MODEL])

    def test_403_foreign_host_or_cross_site_origin(self):
        # DNS rebinding: a page on attacker.example resolving to 127.0.0.1 sends its own Host.
        for path in ("/v1/models", "/health", "/"):
            status, _, data = self.server.request("GET", path, headers={**AUTH, "Host": "attacker.example:80"})
            self.assertEqual(status, 403, path)
            assert_error_body(self, json.loads(data), "forbidden")
        status, _, err = self.post({"model": MODEL, "prompt": "x"},
                                   headers={**AUTH, "Origin": "http://attacker.example"})
        self.assertEqual(status, 403)
        assert_error_body(self, err, "forbidden")
        # Loopback names and the page's own origin are fine.
        host = f"127.0.0.1:{self.server.port}"
        for headers in ({"Host": f"localhost:{self.server.port}"}, {"Host": host, "Origin": f"http://{host}"}):
            status, _, body = self.post({"model": MODEL, "prompt": "x", "max_tokens": 1}, headers={**AUTH, **headers})
            self.assertEqual(status, 200, body)

    def test_404_unknown_model_and_route(self):
        with self.assertRaises(openai.NotFoundError) as cm:
            self.client.completions.create(model="gpt-4", prompt="x")
        self.assertEqual(cm.exception.body["code"], "model_not_found")
        status, _, err = self.server.post("/v1/nothing", {"model": MODEL}, AUTH)
        self.assertEqual(status, 404)
        assert_error_body(self, err)

    def test_model_retrieval_by_id(self):
        model = self.client.models.retrieve(MODEL)
        self.assertEqual(model.id, MODEL)
        self.assertEqual(model.object, "model")
        self.assertEqual(model.model_dump(), self.client.models.list().data[0].model_dump())
        with self.assertRaises(openai.NotFoundError) as cm:
            self.client.models.retrieve("gpt-4")
        self.assertEqual(cm.exception.body["code"], "model_not_found")
        self.assertEqual(cm.exception.body["param"], "model")
        status, _, _ = self.server.request("GET", f"/v1/models/{MODEL}")
        self.assertEqual(status, 401, "retrieval needs the key as the list does")

    def test_405_wrong_method_names_the_allowed_one(self):
        cases = [("GET", "/v1/completions", "POST"), ("PUT", "/v1/chat/completions", "POST"),
                 ("POST", "/v1/models", "GET"), ("DELETE", "/health", "GET"),
                 ("POST", f"/v1/models/{MODEL}", "GET"), ("POST", "/metrics", "GET")]
        for method, path, allowed in cases:
            with self.subTest(method=method, path=path):
                status, headers, data = self.server.request(method, path, headers=AUTH)
                self.assertEqual(status, 405, data)
                self.assertEqual(headers.get("allow"), allowed)
                assert_error_body(self, json.loads(data), "method_not_allowed")
        # An unknown path stays 404; HEAD on a GET route is not a wrong method.
        self.assertEqual(self.server.request("GET", "/v1/nothing", headers=AUTH)[0], 404)
        self.assertEqual(self.server.request("HEAD", "/health")[0], 200)

    def test_413_body_too_large(self):
        body = {"model": MODEL, "prompt": "x" * 5000}
        status, _, err = self.post(body)
        self.assertEqual(status, 413)
        assert_error_body(self, err, "request_too_large")
        with self.assertRaises(openai.APIStatusError) as cm:
            self.client.completions.create(model=MODEL, prompt="y" * 5000)
        self.assertEqual(cm.exception.status_code, 413)

    def test_415_wrong_content_type(self):
        for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = dict(AUTH)
            if ctype:
                headers["Content-Type"] = ctype
            status, _, data = self.server.request("POST", "/v1/completions", json.dumps({"model": MODEL, "prompt": "x"}),
                                                  headers)
            self.assertEqual(status, 415, ctype)
            assert_error_body(self, json.loads(data), "unsupported_media_type")
        status, _, _ = self.server.request("POST", "/v1/completions", json.dumps({"model": MODEL, "prompt": "x",
                                                                                  "max_tokens": 1}),
                                           {**AUTH, "Content-Type": "application/json; charset=utf-8"})
        self.assertEqual(status, 200)

    def test_429_when_full_then_recovers(self):
        # The one slot is taken by a long stream; a second request is refused with Retry-After.
        self.server.wait_idle()
        conn, resp = open_stream(self.server, "/v1/completions",
                                 {"model": MODEL, "prompt": "x", "max_tokens": 2000, "ignore_eos": True,
                                  "stream": True}, AUTH)
        self.assertEqual(resp.status, 200)
        resp.readline()
        status, headers, err = self.post({"model": MODEL, "prompt": "y", "max_tokens": 1})
        self.assertEqual(status, 429)
        self.assertEqual(headers.get("retry-after"), "1")
        assert_error_body(self, err, "overloaded")
        with self.assertRaises(openai.RateLimitError):
            self.client.completions.create(model=MODEL, prompt="z", max_tokens=1)
        conn.close()  # the disconnect cancels the stream and frees the slot
        self.server.wait_idle()
        r = self.client.completions.create(model=MODEL, prompt="z", max_tokens=1)
        self.assertEqual(r.usage.completion_tokens, 1)

    def test_504_when_the_request_timeout_passes(self):
        self.server.wait_idle()
        t0 = time.monotonic()
        status, _, err = self.post({"model": MODEL, "prompt": "x", "max_tokens": 3000, "ignore_eos": True})
        self.assertEqual(status, 504)
        assert_error_body(self, err, "timeout")
        self.assertLess(time.monotonic() - t0, 10)
        m = self.server.wait_idle()  # the timed-out request was cancelled, its KV freed
        self.assertGreaterEqual(m['rlt_requests_finished_total{endpoint="completions",reason="timeout"}'], 1)
        with self.assertRaises(openai.APIStatusError) as cm:
            self.client.completions.create(model=MODEL, prompt="x", max_tokens=3000, extra_body={"ignore_eos": True})
        self.assertEqual(cm.exception.status_code, 504)
        self.server.wait_idle()


class NotReady(unittest.TestCase):
    """A server whose model takes 3 s to load answers 503 + Retry-After until it is ready."""

    def test_503_while_loading_then_ready(self):
        cache = CacheDir()
        server = Server("--debug-load-delay", "3", cache_dir=cache.path, wait_ready=False)
        try:
            status, headers, data = server.request("GET", "/health")
            self.assertEqual(status, 503)
            self.assertEqual(json.loads(data)["status"], "unavailable")
            status, headers, err = server.post("/v1/completions", {"model": MODEL, "prompt": "x"})
            self.assertEqual(status, 503)
            self.assertEqual(headers.get("retry-after"), "1")
            assert_error_body(self, err, "not_ready")
            self.assertEqual(server.request("GET", "/v1/models")[0], 503)
            server.wait_ready(60)
            status, _, body = server.post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 2})
            self.assertEqual(status, 200, body)
        finally:
            self.assertEqual(server.stop(), 0)
            cache.cleanup()


if __name__ == "__main__":
    unittest.main()
