"""Model work off the event loop: worker threads, cancel tokens, superseding, and inline-first ordering.

The decoders poll an interrupt callable before every forward pass; a `CancelToken` is that callable.
`$/cancelRequest`, a newer inline request for the same document, and shutdown all just set a token, so
work stops at the next pass boundary. Inline completions get priority: they run on their own workers, so
they never queue behind explanations, and while one runs an explain pauses between its passes (bounded),
so a long explanation never makes the user wait for a suggestion.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
MsgId = int | str


class CancelToken:
    """Set once; the reason ("cancelled", "superseded", "shutdown") is what the decoder reports."""

    __slots__ = ("reason",)

    def __init__(self) -> None:
        self.reason: str | None = None

    def cancel(self, reason: str = "cancelled") -> None:
        if self.reason is None:
            self.reason = reason

    def __call__(self) -> str | None:
        return self.reason


class Scheduler:
    def __init__(self, workers: int = 4, explain_workers: int = 2, max_explain_pause_s: float = 5.0) -> None:
        # Our own pools: pygls reads stdin on its pool, which model work must never occupy. Inline work has a
        # pool of its own: with one shared pool, four running explanations held every worker and a
        # suggestion waited for one of them to finish (19 s).
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="parafill-inline")
        self.background = ThreadPoolExecutor(max_workers=explain_workers, thread_name_prefix="parafill-explain")
        self.max_explain_pause_s = max_explain_pause_s
        self._lock = threading.Lock()
        self._by_msg: dict[MsgId, CancelToken] = {}
        self._cancelled_early: OrderedDict[MsgId, None] = OrderedDict()  # cancels that beat their request
        self._latest_inline: dict[str, CancelToken] = {}
        self._inline = threading.Condition()
        self._inline_running = 0

    # -- tokens ---------------------------------------------------------------------------------------

    def token(self, msg_id: MsgId | None) -> CancelToken:
        token = CancelToken()
        with self._lock:
            if msg_id is not None:
                self._by_msg[msg_id] = token
                if msg_id in self._cancelled_early:
                    del self._cancelled_early[msg_id]
                    token.cancel("cancelled")
        return token

    def inline_token(self, uri: str, msg_id: MsgId | None) -> CancelToken:
        """A token for a new inline request; the previous inline request on `uri` is superseded."""
        token = self.token(msg_id)
        with self._lock:
            previous = self._latest_inline.get(uri)
            self._latest_inline[uri] = token
        if previous is not None:
            previous.cancel("superseded")
        return token

    def release(self, msg_id: MsgId | None, token: CancelToken, uri: str | None = None) -> None:
        with self._lock:
            if msg_id is not None and self._by_msg.get(msg_id) is token:
                del self._by_msg[msg_id]
            if uri is not None and self._latest_inline.get(uri) is token:
                del self._latest_inline[uri]

    def cancel_request(self, msg_id: MsgId) -> bool:
        """`$/cancelRequest`: stop the request's work at its next forward pass."""
        with self._lock:
            token = self._by_msg.get(msg_id)
            if token is None:
                self._cancelled_early[msg_id] = None
                while len(self._cancelled_early) > 256:
                    self._cancelled_early.popitem(last=False)
                return False
        token.cancel("cancelled")
        return True

    def cancel_all(self, reason: str = "shutdown") -> None:
        with self._lock:
            tokens = list(self._by_msg.values()) + list(self._latest_inline.values())
        for token in tokens:
            token.cancel(reason)

    # -- running --------------------------------------------------------------------------------------

    async def run(self, fn: Callable[[], T], token: CancelToken, inline: bool = False) -> T | None:
        """Run `fn` in a worker thread; None if the token was set before it started. If the awaiting task
        is cancelled (pygls does that on `$/cancelRequest`), the token is set so the thread stops too."""
        pool = self.executor if inline else self.background
        future = pool.submit(self._call, fn, token, inline)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            token.cancel("cancelled")
            raise

    def _call(self, fn: Callable[[], T], token: CancelToken, inline: bool) -> T | None:
        if token.reason is not None:
            return None
        if not inline:
            return fn()
        with self._inline:
            self._inline_running += 1
        try:
            return fn()
        finally:
            with self._inline:
                self._inline_running -= 1
                self._inline.notify_all()

    def yielding_to_inline(self, token: CancelToken) -> Callable[[], str | None]:
        """An interrupt for background work (explain): pause between passes while inline work runs."""

        def check() -> str | None:
            give_up = time.monotonic() + self.max_explain_pause_s
            with self._inline:
                while self._inline_running and token.reason is None and time.monotonic() < give_up:
                    self._inline.wait(0.02)
            return token.reason

        return check

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"tracked_requests": len(self._by_msg), "inline_running": self._inline_running}

    def shutdown(self) -> None:
        self.cancel_all("shutdown")
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.background.shutdown(wait=False, cancel_futures=True)
