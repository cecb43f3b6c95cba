"""Robustness of `rlt serve`: disconnects cancel and free KV, a slow reader cannot stall others,
SIGINT/SIGTERM drain in-flight requests and exit 0, a bad model exits 1.

Engine steps are slowed with the hidden --debug-step-delay hook so that requests stay in flight
long enough to disconnect, signal or stall deterministically.
"""
import json
import signal
import socket
import subprocess
import time
import unittest

from serve_util import MODEL, CacheDir, Server, open_stream, rlt_bin, sse_events

LONG = {"model": MODEL, "prompt": "x", "max_tokens": 1500, "ignore_eos": True}


class Disconnects(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cache = CacheDir()
        cls.server = Server("--debug-step-delay", "0.004", "--write-timeout", "1", cache_dir=cls.cache.path)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"

    def cancelled(self):
        m = self.server.metrics()
        return sum(v for k, v in m.items() if k.startswith("rlt_requests_finished_total") and 'reason="cancelled"' in k)

    def wait_cancelled(self, count, timeout=5):
        """Outcomes are counted when the handler finishes, a moment after the engine freed the KV."""
        deadline = time.monotonic() + timeout
        while self.cancelled() < count and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.cancelled(), count)

    def setUp(self):
        self.server.wait_idle()

    def test_stream_disconnect_cancels_and_frees_kv(self):
        before = self.cancelled()
        conn, resp = open_stream(self.server, "/v1/completions", {**LONG, "stream": True})
        events = sse_events(iter(resp.readline, b""))
        for _ in range(3):
            next(events)
        self.assertGreater(self.server.metrics()["rlt_kv_cache_used_blocks"], 0)
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        t0 = time.monotonic()
        self.server.wait_idle(timeout=5)
        self.assertLess(time.monotonic() - t0, 3)
        self.wait_cancelled(before + 1)

    def test_non_streaming_disconnect_cancels_too(self):
        before = self.cancelled()
        body = json.dumps(LONG).encode()
        s = socket.create_connection((self.server.host, self.server.port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        self.server.wait_metric("rlt_requests_in_flight", lambda v: v > 0)
        time.sleep(0.2)
        s.close()
        self.server.wait_idle(timeout=5)
        self.wait_cancelled(before + 1)

    def test_chat_stream_disconnect_before_first_token(self):
        # Queued behind nothing, but the client leaves right after sending.
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1500,
                "ignore_eos": True, "stream": True}
        conn, resp = open_stream(self.server, "/v1/chat/completions", body)
        conn.close()
        self.server.wait_idle(timeout=5)



class SlowReaders(unittest.TestCase):
    """No step delay here: output must outrun a reader that stopped."""

    @classmethod
    def setUpClass(cls):
        cls.cache = CacheDir()
        cls.server = Server("--write-timeout", "1", cache_dir=cls.cache.path)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"

    def test_stalled_reader_is_dropped_without_stalling_others(self):
        # A client that never reads: its stream fills the (capped) socket buffers, the write
        # blocks for --write-timeout (1 s), then the server drops it and frees its KV.
        self.server.wait_idle()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((self.server.host, self.server.port))
        body = json.dumps({**LONG, "max_tokens": 2000, "stream": True, "logprobs": 20}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                  str(len(body)).encode() + b"\r\n\r\n" + body)
        latencies = []
        for _ in range(5):
            t0 = time.monotonic()
            status, _, r = self.server.post("/v1/completions", {"model": MODEL, "prompt": "y", "max_tokens": 4,
                                                                "ignore_eos": True})
            latencies.append(time.monotonic() - t0)
            self.assertEqual(status, 200, r)
        self.assertLess(max(latencies), 2.0, latencies)  # normally ~10 ms; generous for loaded CI machines
        self.server.wait_idle(timeout=30)  # dropped and cancelled while the client still holds the socket
        self.server.wait_metric('rlt_requests_finished_total{endpoint="completions",reason="cancelled"}',
                                lambda v: v >= 1)
        s.close()

    def test_paused_reader_still_gets_the_whole_stream(self):
        body = {"model": MODEL, "prompt": "pause", "max_tokens": 200, "ignore_eos": True, "temperature": 0}
        _, _, full = self.server.post("/v1/completions", body)
        conn, resp = open_stream(self.server, "/v1/completions", {**body, "stream": True})
        time.sleep(0.8)  # the whole stream waits in buffers meanwhile
        events = list(sse_events(iter(resp.readline, b"")))
        conn.close()
        self.assertEqual(events[-1], "[DONE]")
        ids = [t for e in events[:-1] for t in e["choices"][0]["token_ids"]]
        self.assertEqual(ids, full["choices"][0]["token_ids"])


class Shutdown(unittest.TestCase):
    def setUp(self):
        self.cache = CacheDir()

    def tearDown(self):
        self.cache.cleanup()

    def test_sigterm_drains_in_flight_streams_then_exits_0(self):
        server = Server("--debug-step-delay", "0.005", cache_dir=self.cache.path)
        conn, resp = open_stream(server, "/v1/completions", {**LONG, "max_tokens": 60, "stream": True})
        events = sse_events(iter(resp.readline, b""))
        first = next(events)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        # Draining: new work is refused, health says unavailable, the stream goes on.
        status, _, err = server.post("/v1/completions", {"model": MODEL, "prompt": "x"})
        self.assertEqual(status, 503)
        self.assertEqual(err["error"]["code"], "shutting_down")
        self.assertEqual(server.request("GET", "/health")[0], 503)
        rest = list(events)
        self.assertEqual(rest[-1], "[DONE]")
        chunks = [first] + rest[:-1]
        self.assertEqual(len(chunks), 60)
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
        conn.close()
        self.assertEqual(server.stop(timeout=20), 0)
        self.assertIn("shutting down", server.logs())

    def test_drain_timeout_cuts_streams_and_still_exits_0(self):
        server = Server("--debug-step-delay", "0.005", "--shutdown-timeout", "0.5", cache_dir=self.cache.path)
        conn, resp = open_stream(server, "/v1/completions", {**LONG, "max_tokens": 3000, "stream": True})
        events = sse_events(iter(resp.readline, b""))
        next(events)
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        rest = []
        try:
            for e in events:
                rest.append(e)
        except Exception:  # the transport is cut: no [DONE]
            pass
        self.assertNotIn("[DONE]", rest)
        self.assertEqual(server.stop(timeout=20), 0)
        self.assertLess(time.monotonic() - t0, 8)
        conn.close()

    def test_sigint_when_idle_exits_0_quickly(self):
        server = Server(cache_dir=self.cache.path)
        status, _, _ = server.post("/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": 2})
        self.assertEqual(status, 200)
        t0 = time.monotonic()
        self.assertEqual(server.stop(signal.SIGINT), 0)
        self.assertLess(time.monotonic() - t0, 3)

    def test_bad_model_exits_1_with_a_message(self):
        out = subprocess.run([rlt_bin(), "serve", "--port", "0", "--model", "/nonexistent/model"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertIn("/nonexistent/model", out.stderr)

    def test_port_in_use_exits_1(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            out = subprocess.run([rlt_bin(), "serve", "--port", str(port)], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertIn(str(port), out.stderr)


if __name__ == "__main__":
    unittest.main()
