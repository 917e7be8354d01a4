"""Logging for the server: stderr always, and our own records mirrored to the client as window/logMessage.

stdout is the protocol stream, so nothing here ever writes to it. pygls logs every message it sends at
INFO (whole bodies, a 10 MB document included) and a traceback for every error a handler returns on
purpose; both are trimmed here so that the log says what happened in one line.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from lsprotocol import types
from pygls.exceptions import JsonRpcException

FORMAT = "parafill %(levelname)s %(name)s: %(message)s"

_LSP_LEVEL = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


# pygls's tracebacks for a message it cannot read: ParafillProtocol / ParafillServer.report_server_error
# log one line for each of those instead.
_REPORTED_ELSEWHERE = ("Unable to deserialize message", "Unable to handle message")


class _ExpectedErrorsWithoutTraceback(logging.Filter):
    """pygls logs a traceback for each JSON-RPC error a handler raises on purpose: keep one line, with the
    error's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("pygls") and str(record.msg).startswith(_REPORTED_ELSEWHERE):
            return False
        if record.exc_info and isinstance(record.exc_info[1], JsonRpcException):
            record.msg = f"{record.getMessage()}: {record.exc_info[1]}"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


class ClientLogHandler(logging.Handler):
    """Forward `parafill.*` records to the client through `send` (which must be thread-safe)."""

    def __init__(self, send: Callable[[types.LogMessageParams], None], level: int = logging.INFO) -> None:
        super().__init__(level)
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = _LSP_LEVEL.get(record.levelno, types.MessageType.Log)
            self._send(types.LogMessageParams(type=kind, message=f"parafill: {record.getMessage()}"))
        except Exception:  # logging must never take the server down
            self.handleError(record)


def setup_logging(level: str | int = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(_ExpectedErrorsWithoutTraceback())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level if isinstance(level, int) else level.upper())
    logging.getLogger("pygls").setLevel(logging.WARNING)  # its INFO lines carry whole message bodies
    logging.getLogger("pygls.server").setLevel(logging.INFO)  # but say where a TCP server listens


def attach_client_handler(send: Callable[[types.LogMessageParams], None]) -> ClientLogHandler:
    handler = ClientLogHandler(send)
    logging.getLogger("parafill").addHandler(handler)
    return handler
