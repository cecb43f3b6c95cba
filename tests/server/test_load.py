"""A bounded load test on loopback: 64 concurrent streaming clients, a few hundred requests, about
10 % cancelled midway by the client. bench/server/rlt_server_load checks every completed request
against the same request run offline (token ids, exit depths, finish reason, usage, one chunk per
token, [DONE]) and that the server's KV usage returns to zero; it exits 0 only then.
"""
import json
import os
import subprocess
import tempfile
import unittest

from serve_util import CacheDir, Server


class Load(unittest.TestCase):
    def test_64_streaming_clients_with_cancellations(self):
        tool = os.environ.get("RLT_LOAD_BIN")
        if not tool or not os.path.exists(tool):
            self.skipTest("RLT_LOAD_BIN is not set (bench/server is built only with RLT_BUILD_BENCH=ON)")
        cache = CacheDir()
        server = Server("--kv-cache-gib", "0.25", cache_dir=cache.path)
        try:
            with tempfile.NamedTemporaryFile(suffix=".json") as report:
                out = subprocess.run(
                    [tool, "--port", str(server.port), "--clients", "64", "--requests", "256", "--min-tokens", "4",
                     "--max-tokens", "24", "--max-prompt", "24", "--cancel-fraction", "0.1", "--threads", "1",
                     "--json", report.name],
                    capture_output=True, text=True, timeout=600, env=dict(os.environ, RLT_CACHE_DIR=cache.path))
                print(out.stdout)
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr + server.logs()[-3000:])
                summary = json.load(open(report.name))
            self.assertEqual(summary["requests"], 256)
            self.assertEqual(summary["failed"], 0)
            self.assertGreater(summary["cancelled"], 0)
            self.assertEqual(summary["completed"] + summary["cancelled"], 256)
            self.assertTrue(summary["kv_back_to_zero"])
            self.assertEqual(summary["problems"], [])
            m = server.metrics()
            self.assertEqual(m["rlt_kv_cache_used_blocks"], 0)
            self.assertEqual(m["rlt_requests_in_flight"], 0)
        finally:
            self.assertEqual(server.stop(), 0)
            cache.cleanup()


if __name__ == "__main__":
    unittest.main()
