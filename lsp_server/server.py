"""The language server: one thin handler per LSP message, each handing over to the module that does the work.

Model work never runs on the event loop: the service is called in worker threads (lsp_server/scheduler.py).
Handlers here only translate protocol types and keep the documents in sync.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import os
import sys
import threading
from typing import Any

from lsprotocol import types
from pygls.exceptions import FeatureNotificationError, FeatureRequestError, JsonRpcParseError
from pygls.io_ import run_async
from pygls.lsp.server import LanguageServer

from lsp_server import __version__
from lsp_server.documents import DocumentStore
from lsp_server.logs import attach_client_handler
from lsp_server.lsp_explain import answer_explain, parse_command_arguments, parse_explain_params
from lsp_server.lsp_inline import answer_inline
from lsp_server.parent_watch import watch_parent
from lsp_server.positions import UTF16
from lsp_server.protocol import EXPLAIN_COMMAND, ParafillProtocol, plain
from lsp_server.scheduler import Scheduler
from lsp_server.service import CompletionService
from lsp_server.settings import SECTION, Settings

log = logging.getLogger("parafill.server")

EXPLAIN_REQUEST = "parafill/explain"
STATS_REQUEST = "parafill/stats"
CLEAR_CACHE_REQUEST = "parafill/clearCache"


class ParafillServer(LanguageServer):
    def __init__(self, settings: Settings | None = None, workers: int = 4) -> None:
        super().__init__("parafill", __version__, protocol_cls=ParafillProtocol)
        self.documents = DocumentStore()
        self.scheduler = Scheduler(workers=workers)
        self.service = CompletionService(settings, on_load_error=self._model_failed)
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def position_encoding(self) -> str:
        try:
            encoding = self.workspace.position_encoding
        except RuntimeError:  # before initialize
            return UTF16
        return str(encoding.value if isinstance(encoding, enum.Enum) else encoding or UTF16)

    def from_any_thread(self, fn: Any, *args: Any) -> None:
        """Run `fn(*args)` on the event loop: the protocol writer is not thread-safe."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop is shutting down
            loop.call_soon_threadsafe(fn, *args)

    def apply_settings(self, raw: Any, load: bool) -> None:
        for warning in self.service.update_settings(plain(raw), load=load):
            log.warning("%s", warning)
        self.documents.set_limit(self.service.settings.max_document_kb * 1024)

    def _model_failed(self, message: str) -> None:
        text = f"parafill: {message}. Inline completions are off until the model setting changes."
        self.from_any_thread(
            self.window_show_message, types.ShowMessageParams(type=types.MessageType.Error, message=text)
        )

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Errors pygls could not pin on a request: one log line, and -32700 for a message that is not JSON.
        (A request's own error has been answered and logged already; pygls would also pop up a message.)"""
        if source is FeatureRequestError:
            return
        if isinstance(error, (json.JSONDecodeError, UnicodeDecodeError)):
            log.warning("malformed message (%s): answered -32700, still serving", error)
            self.protocol._send_response(None, error=JsonRpcParseError(f"parse error: {error}").to_response_error())
        elif source is FeatureNotificationError:
            log.warning("notification handler failed (%s: %s): still serving", type(error).__name__, error)
        else:
            log.warning("bad message (%s: %s): still serving", type(error).__name__, error)

    def start_tcp(self, host: str, port: int) -> None:
        """pygls's TCP server, serving one client. pygls points the protocol's writer at every new connection,
        so a second client would take over the first one's answers; it is closed at once instead. (One
        client per server, as over stdio: the documents, settings and model are that client's.)"""
        self._stop_event = stop_event = threading.Event()
        serving = False

        async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal serving
            if serving:
                log.warning("a second client connected over TCP: closed (this server serves one client)")
                writer.close()
                return
            serving = True
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            await run_async(
                stop_event=stop_event,
                reader=reader,
                protocol=self.protocol,
                logger=log,
                error_handler=self.report_server_error,
            )
            self.shutdown()

        async def serve() -> None:
            self._server = await asyncio.start_server(serve_connection, host, port)
            log.info("serving on %s:%s (TCP)", host, port)
            async with self._server:
                await self._server.serve_forever()

        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(serve())

    def exit_now(self) -> None:
        """`exit`: 0 after `shutdown`, else 1 (LSP). Leave at once rather than through interpreter teardown:
        pygls's stdin reader thread may be blocked in readline, a model still loading in a daemon thread
        aborts the process when torch is torn down, and over TCP pygls's own exit prints a traceback."""
        self.scheduler.shutdown()
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0 if self.protocol._shutdown else 1)

    async def explain_command(self, params: types.ExecuteCommandParams) -> dict[str, Any]:
        uri, rng = parse_command_arguments(params)
        return await answer_explain(self, uri, rng, params.work_done_token)


def create_server(settings: Settings | None = None) -> ParafillServer:
    server = ParafillServer(settings)

    @server.feature(types.INITIALIZE)
    def initialize(ls: ParafillServer, params: types.InitializeParams) -> None:
        ls.loop = asyncio.get_running_loop()
        attach_client_handler(lambda p: ls.from_any_thread(ls.window_log_message, p))
        ls.apply_settings(params.initialization_options, load=False)
        log.info("position encoding %s", ls.position_encoding)
        if params.process_id is not None:
            watch_parent(params.process_id, ls.exit_now)

    @server.feature(types.INITIALIZED)
    def initialized(ls: ParafillServer, params: types.InitializedParams) -> None:
        ls.service.start_loading()  # in a background thread; requests wait for it

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: ParafillServer, params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if not raw and _client_can_pull_configuration(ls):
            result = await ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
            raw = result[0] if result else None
        ls.apply_settings(raw, load=True)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ParafillServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.documents.open(doc.uri, doc.text, doc.version, doc.language_id)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ParafillServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = params.text_document
        ls.documents.change(doc.uri, doc.version, params.content_changes, ls.position_encoding)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ParafillServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.documents.close(params.text_document.uri)
        ls.service.forget_document(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: ParafillServer, params: types.InlineCompletionParams
    ) -> list[types.InlineCompletionItem]:
        return await answer_inline(ls, params)

    @server.feature(EXPLAIN_REQUEST)
    async def explain(ls: ParafillServer, params: Any) -> dict[str, Any]:
        uri, rng, token = parse_explain_params(plain(params))
        return await answer_explain(ls, uri, rng, token)

    @server.command(EXPLAIN_COMMAND)
    async def explain_command(ls: ParafillServer, *args: Any) -> None:
        """Advertises the command; ParafillProtocol routes it to ParafillServer.explain_command."""

    @server.feature(STATS_REQUEST)
    def stats(ls: ParafillServer, params: Any) -> dict[str, Any]:
        return ls.service.stats() | {"scheduler": ls.scheduler.stats(), "open_documents": len(ls.documents)}

    @server.feature(CLEAR_CACHE_REQUEST)
    def clear_cache(ls: ParafillServer, params: Any) -> dict[str, bool]:
        return {"cleared": ls.service.clear_cache()}

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: ParafillServer, params: Any) -> None:
        ls.scheduler.cancel_all("shutdown")

    @server.feature(types.EXIT)
    def exit_(ls: ParafillServer, params: Any) -> None:
        ls.exit_now()

    return server


def _client_can_pull_configuration(ls: ParafillServer) -> bool:
    workspace = ls.client_capabilities.workspace
    return bool(workspace and workspace.configuration)
