"""A real HTTP server on this machine that receives webhooks: it keeps every request it
gets (headers, body) and answers what the test tells it (a status, a redirect, a delay)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """The server and what it got; `answer` decides each answer: (status, headers)."""

    server: ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)
    answer: Callable[[Received], tuple[int, dict[str, str]]] = lambda request: (204, {})
    delay: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """Wait until `count` requests have come; them all."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        raise AssertionError(f"{len(self.received)} requests came, not {count}")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_receiver() -> Receiver:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = Received(self.path, dict(self.headers.items()), self.rfile.read(length))
            with receiver.lock:
                receiver.received.append(request)
            if receiver.delay:
                time.sleep(receiver.delay)
            status, headers = receiver.answer(request)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = Receiver(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver
