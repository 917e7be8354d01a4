"""A small OpenAI-compatible server on 127.0.0.1 for tests: streams SSE slowly, records what it was sent
and whether the client closed the stream before the end."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    """One request as the server saw it."""

    path: str
    body: dict[str, Any]
    authorization: str | None
    sent: int = 0  # text chunks written
    client_closed: bool = False  # a write failed: the client closed the connection
    finished: bool = False  # the whole answer and [DONE] were written
    done: threading.Event = field(default_factory=threading.Event)


class FakeOpenAI:
    """Answers POST {base}/completions and {base}/chat/completions with `pieces`, one SSE event per piece,
    `delay_s` apart. `status` other than 200 answers an error; `stall_s` waits before any byte."""

    def __init__(self, pieces: list[str] | None = None, delay_s: float = 0.01) -> None:
        self.pieces = pieces if pieces is not None else [f"w{i} " for i in range(200)]
        self.delay_s = delay_s
        self.status = 200
        self.stall_s = 0.0
        self.stream_json = False  # answer one JSON object even when asked to stream
        self.seen: list[Seen] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                fake._answer(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def last(self, timeout: float = 10.0) -> Seen:
        """The latest request, once the server is done with it (finished or saw the client leave)."""
        deadline = time.monotonic() + timeout
        while not self.seen and time.monotonic() < deadline:
            time.sleep(0.01)
        seen = self.seen[-1]
        seen.done.wait(max(0.0, deadline - time.monotonic()))
        return seen

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length", 0))
        body = json.loads(h.rfile.read(length) or b"{}")
        seen = Seen(h.path, body, h.headers.get("Authorization"))
        self.seen.append(seen)
        try:
            self._respond(h, seen)
        except (BrokenPipeError, ConnectionResetError):
            seen.client_closed = True
        finally:
            seen.done.set()

    def _respond(self, h: BaseHTTPRequestHandler, seen: Seen) -> None:
        time.sleep(self.stall_s)
        if not h.path.endswith(("/completions", "/chat/completions")):
            return self._send_json(h, 404, {"error": {"message": f"no route {h.path}"}})
        if self.status != 200:
            return self._send_json(h, self.status, {"error": {"message": "model overloaded"}})
        chat = h.path.endswith("/chat/completions")
        if self.stream_json or not seen.body.get("stream"):
            text = "".join(self.pieces)
            choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            return self._send_json(h, 200, {"choices": [choice | {"index": 0, "finish_reason": "stop"}]})
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.end_headers()
        max_tokens = int(seen.body.get("max_tokens") or len(self.pieces))
        pieces = self.pieces[:max_tokens]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            finish = None if not last else "length" if len(pieces) < len(self.pieces) else "stop"
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            event = {"id": "cmpl-1", "object": "chunk", "choices": [choice | {"finish_reason": finish}]}
            h.wfile.write(b": keep-alive comment\n\n" if i == 0 else b"")
            h.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            h.wfile.flush()
            seen.sent += 1
            time.sleep(self.delay_s)
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()
        seen.finished = True

    @staticmethod
    def _send_json(h: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
