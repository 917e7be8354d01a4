"""A stop request taken from a signal, so that training stops between steps with a whole checkpoint."""

from __future__ import annotations

import signal
import threading
from typing import Any


class StopRequest:
    """SIGTERM / SIGINT while training: remember it, so the loop stops after the current step and saves a
    checkpoint (a session that ends kills its background run; without this it lost up to the checkpoint
    interval). Only the main thread can take signals; elsewhere this does nothing."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _note(self, signum: int, frame: object) -> None:
        self.signal = signal.Signals(signum).name
