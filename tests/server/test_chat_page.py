"""The browser chat page served at /: a headless Chromium loads it, types a message, presses Send and
the streamed reply appears with an exit depth on every token.

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
separated by NUL bytes on fds 3 and 4), so no WebDriver or websocket library is needed. Skips with
a clear message when no Chromium is installed (scripts/setup.sh installs it).
"""
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
import unittest

from serve_util import MODEL, CacheDir, Server


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe."""

    def __init__(self, chromium, profile_dir):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # Chromium reads commands from fd 3 and writes replies to fd 4.
        high_r, high_w = os.dup(to_chrome_r), os.dup(from_chrome_w)

        def wire_fds():
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--remote-debugging-pipe", f"--user-data-dir={profile_dir}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=wire_fds, close_fds=False,
            env=dict(os.environ, HOME=profile_dir))
        for fd in (to_chrome_r, from_chrome_w, high_r, high_w):
            os.close(fd)
        self.next_id = 0
        self.buffer = b""

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            ready, _, _ = select.select([self.from_chrome], [], [], 0.2)
            if ready:
                chunk = os.read(self.from_chrome, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self.buffer += chunk
        raise TimeoutError(f"{method}: no reply within {timeout} s")

    def evaluate(self, session, expression):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        return r.get("result", {}).get("value")

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_chrome)
        os.close(self.from_chrome)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class ChatPage(unittest.TestCase):
    def test_page_is_served(self):
        cache = CacheDir()
        server = Server(cache_dir=cache.path)
        try:
            status, headers, body = server.request("GET", "/")
            self.assertEqual(status, 200)
            self.assertTrue(headers["content-type"].startswith("text/html"))
            self.assertIn(b"/v1/chat/completions", body)
            self.assertIn(b"exit_depths", body)
        finally:
            self.assertEqual(server.stop(), 0)
            cache.cleanup()

    def chat_through_the_page(self, *server_args):
        """Types a message into the page of a server started with `server_args`, presses Send and
        waits for the streamed reply: (the page's thinking text, its reply text, the same request's
        non-streamed message from the API)."""
        chromium = find_chromium()
        if not chromium:
            self.skipTest("no Chromium found (apt-get install chromium, or run scripts/setup.sh): "
                          "the browser test of the chat page is skipped")
        cache = CacheDir()
        server = Server(*server_args, cache_dir=cache.path)
        profile = tempfile.mkdtemp(prefix="rlt_chromium_")
        browser = DevTools(chromium, profile)
        try:
            target = browser.call("Target.createTarget", {"url": server.base + "/"})["targetId"]
            session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            wait_for(lambda: browser.evaluate(session, "document.getElementById('model').textContent.startsWith('"
                                                        + MODEL + "')"), 30, "the page to load the model name")
            # Type and press Send, as a person would.
            browser.evaluate(session, "document.getElementById('max_tokens').value = '12';"
                                      "document.getElementById('input').value = 'Hello, model!';"
                                      "document.getElementById('send').click(); true")
            state = wait_for(lambda: browser.evaluate(session, "['done', 'error'].includes(document.body.dataset.state)"
                                                               " && document.body.dataset.state"), 60, "the reply")
            meta = browser.evaluate(session, "document.querySelector('.assistant .meta').textContent")
            self.assertEqual(state, "done", meta)
            user = browser.evaluate(session, "document.querySelector('.msg.user').textContent")
            self.assertEqual(user, "Hello, model!")
            depths = browser.evaluate(session, "[...document.querySelectorAll('.assistant .tok')]"
                                               ".map(s => Number(s.dataset.depth))")
            self.assertGreater(len(depths), 0)
            self.assertTrue(all(1 <= d <= 4 for d in depths), depths)
            self.assertIn("tokens", meta)
            self.assertIn("mean exit depth", meta)
            thinking = browser.evaluate(session, "document.querySelector('.assistant .thinking').textContent")
            reply = browser.evaluate(session, "document.querySelector('.assistant .reply').textContent")
            status, _, body = server.post("/v1/chat/completions", {
                "model": MODEL, "messages": [{"role": "user", "content": "Hello, model!"}], "max_tokens": 12,
                "temperature": 0})
            self.assertEqual(status, 200)
            return thinking, reply, body["choices"][0]["message"]
        finally:
            browser.close()
            shutil.rmtree(profile, ignore_errors=True)
            self.assertEqual(server.stop(), 0)
            cache.cleanup()

    def test_headless_browser_sends_a_message_and_sees_the_streamed_reply(self):
        thinking, reply, message = self.chat_through_the_page()
        # The reply the page shows is what the server streamed.
        self.assertEqual(reply, message["content"])
        self.assertEqual(thinking, "")

    def test_a_reasoning_parser_shows_the_thinking_apart(self):
        # The demo's output never closes a <think> block: with deepseek_r1 it is all reasoning.
        thinking, reply, message = self.chat_through_the_page("--reasoning-parser", "deepseek_r1")
        self.assertEqual(thinking, message["reasoning_content"])
        self.assertGreater(len(thinking), 0)
        self.assertEqual(reply, "")
        self.assertIsNone(message["content"])


if __name__ == "__main__":
    unittest.main()
