"""Exit when the editor that started the server is gone (LSP: `initialize`'s processId).

Over stdio a dead editor closes the pipe and the server ends anyway; over TCP, or when the editor dies
without closing its end (killed, crashed with the pipe inherited elsewhere), nothing else would stop it
holding a model in memory.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger("parafill.server")


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def watch_parent(pid: int, on_gone: Callable[[], None], interval_s: float = 2.0) -> threading.Thread | None:
    """Call `on_gone` (from a daemon thread) once process `pid` no longer exists. POSIX only: on Windows
    os.kill with signal 0 would terminate the process instead of asking about it."""
    if os.name != "posix" or pid == os.getpid():
        return None

    def poll() -> None:
        while process_alive(pid):
            time.sleep(interval_s)
        log.warning("the client process %d is gone: exiting", pid)
        on_gone()

    thread = threading.Thread(target=poll, name="parafill-parent-watch", daemon=True)
    thread.start()
    return thread
