"""Stream text to the client as `$/progress` work-done reports (begin / report... / end).

The worker thread calls `push` with each new piece of text; the pieces are handed to the event loop and
sent from there (the protocol writer is not thread-safe). Pieces that arrive while a send is pending are
joined into one report, so a fast decoder cannot flood the pipe. Each report's `message` is the text
added since the previous report; the final response carries the whole text.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger("parafill.progress")


class ProgressStream:
    def __init__(self, ls: LanguageServer, token: types.ProgressToken | None, loop: asyncio.AbstractEventLoop) -> None:
        self.ls, self.token, self.loop = ls, token, loop
        self.reports = 0
        self._pending: list[str] = []
        self._scheduled = False
        self._lock = threading.Lock()
        self._ended = False

    @classmethod
    async def open(cls, ls: LanguageServer, token: types.ProgressToken | None, title: str) -> ProgressStream:
        """Begin progress on the client's token; with none, create one if the client supports that."""
        if token is None and _client_supports_progress(ls):
            token = f"parafill-{uuid.uuid4()}"
            try:
                await asyncio.wait_for(ls.work_done_progress.create_async(token), timeout=5)
            except Exception as exc:  # the client refused or did not answer: stream nothing
                log.info("window/workDoneProgress/create failed (%s): no progress reports", exc)
                token = None
        stream = cls(ls, token, asyncio.get_running_loop())
        if token is not None:
            ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, cancellable=True))
        return stream

    def on_client_cancel(self, callback: Callable[[], None]) -> None:
        """`window/workDoneProgress/cancel` on our token calls `callback`."""
        future = self.ls.work_done_progress.tokens.get(self.token) if self.token is not None else None
        if future is not None:
            future.add_done_callback(lambda _: callback())

    def push(self, text: str) -> None:
        """Thread-safe: queue `text` for the next report."""
        if self.token is None or not text:
            return
        with self._lock:
            self._pending.append(text)
            if self._scheduled:
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        with self._lock:
            text, self._pending, self._scheduled = "".join(self._pending), [], False
        if text and not self._ended and self.token is not None:
            self.ls.work_done_progress.report(self.token, types.WorkDoneProgressReport(message=text))
            self.reports += 1

    def end(self, message: str) -> None:
        """On the event loop: send what is pending, then end."""
        if self.token is None or self._ended:
            return
        self._flush()
        self._ended = True
        self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
        self.ls.work_done_progress.tokens.pop(self.token, None)


def _client_supports_progress(ls: LanguageServer) -> bool:
    try:
        window = ls.client_capabilities.window
    except AttributeError:
        return False
    return bool(window and window.work_done_progress)
