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


def plain(value: Any) -> Any:
    """pygls hands untyped params (custom methods, LSPAny) over as namedtuples: turn them back into JSON."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


class _UnreadableRequest:
    """A request with an id whose body could not be structured: answered with an error, never dropped."""

    def __init__(self, msg_id: Any, method: str, error: JsonRpcException) -> None:
        self.id = msg_id if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool) else None
        self.method, self.error = method, error


class ParafillProtocol(LanguageServerProtocol):
    _server: ParafillServer

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.initialize_seen = False

    # -- every request gets an answer -----------------------------------------------------------------

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                return _UnreadableRequest(data["id"], str(data["method"]), exc)
            raise

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _UnreadableRequest):
            log.warning("request %s %r has invalid params: answered -32602", message.id, message.method)
            self._reply_error(message.id, JsonRpcInvalidParams(f"invalid params for {message.method}"))
            return
        if isinstance(message, dict) or not hasattr(message, "jsonrpc"):
            msg_id = message.get("id") if isinstance(message, dict) else None
            log.warning("not a JSON-RPC 2.0 message (%s): ignored", type(message).__name__)
            if isinstance(msg_id, (int, str)):
                self._reply_error(msg_id, JsonRpcInvalidRequest("not a JSON-RPC 2.0 message"))
            return
        method = getattr(message, "method", None)
        is_request = method is not None and hasattr(message, "id")
        if method == types.INITIALIZE and is_request:
            if self.initialize_seen:
                self._reply_error(message.id, JsonRpcInvalidRequest("initialize was already received"))
                return
            self.initialize_seen = True
        elif not self.initialize_seen and method not in (None, types.EXIT):
            log.warning("%s before initialize: %s", method, "answered -32002" if is_request else "dropped")
            if is_request:
                self._reply_error(message.id, JsonRpcServerNotInitialized("the server is not initialized yet"))
            return
        if self._shutdown and is_request:
            log.warning("%s after shutdown: answered -32600", method)
            self._reply_error(message.id, JsonRpcInvalidRequest("the server is shutting down"))
            return
        super().handle_message(message)

    def _reply_error(self, msg_id: Any, error: JsonRpcException) -> None:
        self._send_response(msg_id, error=error.to_response_error())

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        self._server.scheduler.cancel_request(msg_id)  # stops the thread's work at its next pass
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
        return (yield from super().lsp_workspace__execute_command(params))
