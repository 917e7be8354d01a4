"""pygls's LSP protocol, hardened so that every request gets an answer and state stays in one place.

What pygls 2 does not do on its own, and this subclass adds:
- a request before `initialize` answers -32002 (ServerNotInitialized); one after `shutdown` answers
  -32600 (pygls drops it silently, leaving the client waiting);
- a request whose params do not fit the method's schema answers -32602 (pygls logs and drops it);
- `$/cancelRequest` also sets the request's cancel token, so model work in a thread stops too;
- open documents live in our DocumentStore (size limits, immutable snapshots), not in pygls's workspace;
- `workspace/executeCommand parafill.explain` reaches its handler with the full params (work-done token).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

if TYPE_CHECKING:
    from lsp_server.server import ParafillServer

log = logging.getLogger("parafill.protocol")

EXPLAIN_COMMAND = "parafill.explain"
_RESPONSE_KEYS = {"result", "error"}


def plain(value: Any) -> Any:
    """pygls hands untyped params (custom methods, LSPAny) over as namedtuples: turn them back into JSON."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)


class _Unreadable:
    """A message whose body could not be structured. A request (with an id) is answered with an error,
    never dropped; a notification is dropped with a log line."""

    def __init__(self, msg_id: Any, method: str, error: Exception) -> None:
        self.id = msg_id if _valid_id(msg_id) else None
        self.is_request = msg_id is not None
        self.method, self.error = method, error


class ParafillProtocol(LanguageServerProtocol):
    _server: ParafillServer

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.initialize_seen = False

    # -- every request gets an answer -----------------------------------------------------------------

    def structure_message(self, data: dict[str, Any]) -> Any:
        # pygls structures every dict of a message, innermost first (it is json's object_hook), and takes any
        # dict with a "jsonrpc" key for a message: a params value such as {"jsonrpc": "2.0"} made the whole
        # request unreadable and it was never answered. Only what can be a message is one.
        if isinstance(data, dict) and "method" not in data and not ("id" in data and _RESPONSE_KEYS & data.keys()):
            return data
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "method" in data:
                return _Unreadable(data.get("id"), str(data["method"]), exc.__cause__ or exc)
            raise

    def handle_message(self, message: Any) -> None:
        unreadable = isinstance(message, _Unreadable)
        if not unreadable and (isinstance(message, dict) or not hasattr(message, "jsonrpc")):
            msg_id = message.get("id") if isinstance(message, dict) else None
            log.warning("not a JSON-RPC 2.0 message (%s): ignored", type(message).__name__)
            if isinstance(msg_id, (int, str)):
                self._reply_error(msg_id, JsonRpcInvalidRequest("not a JSON-RPC 2.0 message"))
            return
        method = getattr(message, "method", None)
        is_request = message.is_request if unreadable else method is not None and hasattr(message, "id")
        if is_request and not unreadable and not _valid_id(message.id):
            # pygls would fail on it in a callback (a dict id is unhashable) and answer nothing
            log.warning("request %r with an invalid id %r: answered -32600", method, message.id)
            self._reply_error(None, JsonRpcInvalidRequest("a request id must be a string or an integer"))
            return
        if not self._admit(message, method, is_request, readable=not unreadable):
            return
        if unreadable:
            reason = _first_line(message.error)
            if is_request:
                log.warning("request %s %r has invalid params (%s): answered -32602", message.id, method, reason)
                self._reply_error(message.id, JsonRpcInvalidParams(f"invalid params for {method}: {reason}"))
            else:
                log.warning("notification %r has invalid params (%s): ignored", method, reason)
            return
        super().handle_message(message)

    def _admit(self, message: Any, method: str | None, is_request: bool, readable: bool) -> bool:
        """The lifecycle gate: nothing but initialize before it, no requests after shutdown. An initialize
        with invalid params (answered -32602) does not count: the client may send a corrected one."""
        if method == types.INITIALIZE and is_request:
            if self.initialize_seen:
                self._reply_error(message.id, JsonRpcInvalidRequest("initialize was already received"))
                return False
            self.initialize_seen = readable
        elif not self.initialize_seen and method not in (None, types.EXIT):
            log.warning("%s before initialize: %s", method, "answered -32002" if is_request else "dropped")
            if is_request:
                self._reply_error(message.id, JsonRpcServerNotInitialized("the server is not initialized yet"))
            return False
        if self._shutdown and is_request:
            log.warning("%s after shutdown: answered -32600", method)
            self._reply_error(message.id, JsonRpcInvalidRequest("the server is shutting down"))
            return False
        return True

    def _reply_error(self, msg_id: Any, error: JsonRpcException) -> None:
        self._send_response(msg_id, error=error.to_response_error())

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        found = self._server.scheduler.cancel_request(msg_id)  # stops the thread's work at its next pass
        log.debug("$/cancelRequest %s: %s", msg_id, "work told to stop" if found else "no work running for it yet")
        super()._handle_cancel_notification(msg_id)

    # -- documents live in our DocumentStore ----------------------------------------------------------

    def _user_handler(self, method: str, params: Any):
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CLOSE, params)

    # -- executeCommand parafill.explain needs the whole params ---------------------------------------

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams):
        if params.command == EXPLAIN_COMMAND:
            return (yield self._server.explain_command, (params,), None)
        if params.command not in self.fm.commands:
            log.warning("workspace/executeCommand %r: no such command", params.command)
        return (yield from super().lsp_workspace__execute_command(params))


def _first_line(error: Exception) -> str:
    """cattrs explains a failed structure as an exception group; its leaves say what was wrong."""
    leaves: list[str] = []

    def walk(exc: BaseException) -> None:
        children = getattr(exc, "exceptions", None)
        if children:
            for child in children:
                walk(child)
        else:
            leaves.append(f"{type(exc).__name__}: {exc}")

    walk(error)
    return "; ".join(leaves[:3]) or type(error).__name__
