"""Model servers in tests: a free port on 127.0.0.1, waiting for a started server's /v1/models, and a small HTTP
server of the test's own (a handler class) run in a thread."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_models(url: str, proc: subprocess.Popen, log: Path, timeout_s: float, what: str) -> None:
    """Until GET {url}/models answers 200; RuntimeError with the log's end when the process exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}): {log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer {url}/models within {timeout_s:g} s: "
                               f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet handler with a JSON reply; subclasses answer GET and POST."""

    def log_message(self, *args) -> None:  # quiet
        pass

    def reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """The handler on 127.0.0.1 and a free port, in a thread; its /v1 URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
