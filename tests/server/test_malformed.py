"""Malformed input: broken JSON, wrong types, huge numbers, invalid UTF-8, deep nesting, oversize
bodies, broken HTTP and half-closed connections. Each gets a clean error (or a closed connection
for broken HTTP); the server stays up and later requests succeed.
"""
import json
import socket
import time
import unittest

from serve_util import MODEL, CacheDir, Server

OK_BODY = {"model": MODEL, "prompt": "ok", "max_tokens": 2, "temperature": 0}

# Bodies that are not valid JSON (or not UTF-8): 400 "not valid JSON".
BROKEN_JSON = [
    b"", b"{", b"}", b"{\"model\": }", b"{\"model\": \"m\",}", b"{'model': 'm'}", b"{\"model\": \"m\"} trailing",
    b"{\"model\": NaN}", b"{\"model\": Infinity}", b"{\"a\": 1e400}", b"{\"a\": -1e999}", b"/* c */ {}",
    b"{\"prompt\": \"\xff\xfe\"}", b"{\"prompt\": \"\xc3\"}", b"{\"prompt\": \"\xed\xa0\x80\"}",
    b"{\"prompt\": \"\\ud800\"}", b"{\"prompt\": \"\\uZZZZ\"}", b"\xef\xbb\xbf{}", b"{\"prompt\": \"a\x00b\"}",
    b"[" * 100000 + b"]" * 100000, b"{\"a\":" * 5000 + b"1" + b"}" * 5000, b"\x00\x01\x02",
]

# Valid JSON with the wrong shape, types or values: 400 naming the problem.
WRONG = [
    [], [1, 2], "string", 42, None, True,
    {"prompt": "x"},
    {"model": None, "prompt": "x"},
    {"model": ["m"], "prompt": "x"},
    {"model": MODEL, "prompt": {"text": "x"}},
    {"model": MODEL, "prompt": [[]]},
    {"model": MODEL, "prompt": [None]},
    {"model": MODEL, "prompt": [2 ** 40]},
    {"model": MODEL, "prompt": [-1]},
    {"model": MODEL, "prompt": ["x"] * 1000},
    {"model": MODEL, "prompt": "x", "max_tokens": 2 ** 63},
    {"model": MODEL, "prompt": "x", "max_tokens": 2 ** 64 + 5},
    {"model": MODEL, "prompt": "x", "max_tokens": -5},
    {"model": MODEL, "prompt": "x", "max_tokens": 1e30},
    {"model": MODEL, "prompt": "x", "max_tokens": "16"},
    {"model": MODEL, "prompt": "x", "temperature": -0.5},
    {"model": MODEL, "prompt": "x", "top_p": 2},
    {"model": MODEL, "prompt": "x", "top_k": -2},
    {"model": MODEL, "prompt": "x", "min_p": 5},
    {"model": MODEL, "prompt": "x", "seed": 2 ** 70},
    {"model": MODEL, "prompt": "x", "seed": 1.5},
    {"model": MODEL, "prompt": "x", "stop": {"a": 1}},
    {"model": MODEL, "prompt": "x", "stop": ["a"] * 100},
    {"model": MODEL, "prompt": "x", "logprobs": -1},
    {"model": MODEL, "prompt": "x", "priority": 2 ** 40},
    {"model": MODEL, "prompt": "x", "exit_threshold": 7},
    {"model": MODEL, "prompt": "x", "min_loops": 0},
    {"model": MODEL, "prompt": "x", "repetition_penalty": 0},
    {"model": MODEL, "prompt": "x", "stream": "yes"},
    {"model": MODEL, "prompt": "x", "stream": True, "stream_options": []},
    {"model": MODEL, "prompt": "x", "ignore_eos": 1},
    {"model": MODEL, "prompt": "x", "stop_token_ids": [1e9]},
    {"model": MODEL, "prompt": "x", "user": 5},
    {"model": MODEL, "prompt": "x", "suffix": "s"},
    {"model": MODEL, "prompt": "x", "\u0000": 1},
    {"model": MODEL, "prompt": "x", "": 1},
]

WRONG_CHAT = [
    {"model": MODEL, "messages": "hi"},
    {"model": MODEL, "messages": [None]},
    {"model": MODEL, "messages": [{"role": "user"}]},
    {"model": MODEL, "messages": [{"role": 1, "content": "x"}]},
    {"model": MODEL, "messages": [{"role": "user", "content": {"x": 1}}]},
    {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "top_logprobs": 50, "logprobs": True},
    {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": []},
    {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]},
    {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}},
    {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}},
    {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "structured_outputs": {"regex": "a", "choice": ["b"]}},
]


class Malformed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cache = CacheDir()
        cls.server = Server("--max-body-bytes", "2000000", cache_dir=cls.cache.path)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"

    def assert_still_serving(self):
        status, _, body = self.server.post("/v1/completions", OK_BODY)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["completion_tokens"], 2)

    def assert_400(self, status, data, what):
        self.assertEqual(status, 400, what)
        err = json.loads(data)["error"]
        self.assertEqual(err["type"], "invalid_request_error")
        self.assertTrue(err["message"])

    def test_broken_json(self):
        for raw in BROKEN_JSON:
            with self.subTest(body=raw[:40]):
                status, _, data = self.server.request("POST", "/v1/completions", raw,
                                                      {"Content-Type": "application/json"})
                self.assert_400(status, data, raw[:40])
        self.assert_still_serving()

    def test_wrong_types_and_huge_numbers(self):
        for body in WRONG:
            with self.subTest(body=str(body)[:80]):
                status, _, data = self.server.request("POST", "/v1/completions", json.dumps(body),
                                                      {"Content-Type": "application/json"})
                self.assert_400(status, data, body)
        for body in WRONG_CHAT:
            with self.subTest(body=str(body)[:80]):
                status, _, data = self.server.request("POST", "/v1/chat/completions", json.dumps(body),
                                                      {"Content-Type": "application/json"})
                self.assert_400(status, data, body)
        self.assert_still_serving()

    def test_non_ascii_and_escaped_text_is_fine(self):
        for prompt in ("naïve café 日本語 😀", "\\u00e9 \u00e9", "tab\tnew\nline", "a" * 1000):
            # 1,000 prompt tokens x 4 loops take ~25 s in the sanitizer build on an AVX2 CPU.
            status, _, body = self.server.post("/v1/completions", {**OK_BODY, "prompt": prompt}, timeout=180)
            self.assertEqual(status, 200, body)
            json.dumps(body, ensure_ascii=False).encode("utf-8")  # the response is valid UTF-8

    def test_oversize_bodies(self):
        big = json.dumps({"model": MODEL, "prompt": "x" * 2100000}).encode()
        status, _, data = self.server.request("POST", "/v1/completions", big, {"Content-Type": "application/json"})
        self.assertEqual(status, 413)
        self.assertEqual(json.loads(data)["error"]["code"], "request_too_large")
        # A declared length beyond the limit is refused from the headers alone.
        reply = self.server.raw(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                b"Content-Length: 99999999999\r\n\r\n{", read_timeout=10, shutdown_write=True)
        self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 4"), reply[:80])
        self.assert_still_serving()

    def test_broken_http(self):
        cases = [
            b"GARBAGE\r\n\r\n",
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n{}",
            b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: application/json\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
            b"POST /v1/completions HTTP/1.1\r\n" + b"X-Long: " + b"a" * 100000 + b"\r\n\r\n",
            b"GET /health HTTP/9.9\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello on the plain port
        ]
        for raw in cases:
            with self.subTest(raw=raw[:40]):
                reply = self.server.raw(raw, read_timeout=10, shutdown_write=True)
                if reply:
                    self.assertTrue(reply.startswith(b"HTTP/1.1 4"), reply[:80])
        self.assert_still_serving()

    def test_half_closed_and_abandoned_connections(self):
        # Headers promise a body that never comes, then the client half-closes or just leaves.
        partial = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 500\r\n\r\n{\"model\": \"")
        self.server.raw(partial, read_timeout=10, shutdown_write=True)
        for raw in (partial, b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"GET /hea"):
            s = socket.create_connection((self.server.host, self.server.port))
            s.sendall(raw)
            s.close()
        # A complete request whose client half-closes at once: treated as gone, cancelled.
        body = json.dumps({"model": MODEL, "prompt": "x", "max_tokens": 3000, "ignore_eos": True}).encode()
        self.server.raw(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body,
                        read_timeout=15, shutdown_write=True)
        self.server.wait_idle(timeout=15)
        self.assert_still_serving()
        status, _, _ = self.server.request("GET", "/health")
        self.assertEqual(status, 200)

    def test_many_bad_requests_in_a_row_on_one_connection(self):
        import http.client
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=10)
        for i in range(20):
            conn.request("POST", "/v1/completions", body=b"{bad" + str(i).encode(),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            self.assertEqual(r.status, 400)
            r.read()
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=10)
        conn.close()
        self.assert_still_serving()

    def test_server_is_healthy_after_everything(self):
        time.sleep(0.1)
        self.assertEqual(self.server.request("GET", "/health")[0], 200)
        m = self.server.metrics()
        self.assertEqual(m["rlt_ready"], 1)


if __name__ == "__main__":
    unittest.main()
