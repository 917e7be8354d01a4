"""Drive `parafill serve` as a real subprocess over a real stdio pipe with pygls's own LanguageClient."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol.json_rpc import JsonRPCRequestMessage

from lsp_server.protocol import plain

REPO = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "lsp_server.cli", "serve"]
SAMPLE = REPO / "examples" / "inventory.py"


def tiny_options(model_dir: Path, **extra: Any) -> dict[str, Any]:
    """initializationOptions for the tiny random model: short spans keep the tests fast. Its greedy text falls
    into a loop within tens of tokens, so loop stopping is off: the explain tests need explanations that run."""
    options = {"model": str(model_dir), "maxTokensLine": 16, "maxTokensBlock": 32, "timeBudgetMs": 20000}
    return options | {"explainStopOnLoop": False} | extra


class Session:
    """One server process, one client. Collects what the server sends besides responses."""

    def __init__(self) -> None:
        self.client = LanguageClient("parafill-tests", "0")
        self.progress: list[tuple[Any, dict]] = []
        self.log_messages: list[str] = []
        self.shown: list[str] = []
        self.stderr: list[str] = []
        self._ids = itertools.count(1)
        self._stderr_task: asyncio.Task | None = None
        self.result: types.InitializeResult | None = None
        self._install_handlers()

    def _install_handlers(self) -> None:
        @self.client.feature(types.PROGRESS)
        def on_progress(params: Any) -> None:
            value = params.value
            if not isinstance(value, dict):
                value = self.client.protocol._converter.unstructure(value)
            self.progress.append((params.token, value))

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def on_log(params: types.LogMessageParams) -> None:
            self.log_messages.append(params.message)

        @self.client.feature(types.WINDOW_SHOW_MESSAGE)
        def on_show(params: types.ShowMessageParams) -> None:
            self.shown.append(params.message)

        @self.client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_create(params: types.WorkDoneProgressCreateParams) -> None:
            return None

    async def start(
        self,
        options: dict[str, Any] | None,
        encodings: list[str] | None = None,
        work_done_progress: bool = True,
        initialize: bool = True,
        server: list[str] = SERVER,
        process_id: int | None = None,
    ) -> Session:
        await self.client.start_io(*server, cwd=str(REPO))
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        if initialize:
            caps = types.ClientCapabilities(
                general=types.GeneralClientCapabilities(position_encodings=encodings) if encodings else None,
                window=types.WindowClientCapabilities(work_done_progress=work_done_progress),
            )
            params = types.InitializeParams(capabilities=caps, initialization_options=options, process_id=process_id)
            self.result = await asyncio.wait_for(self.client.initialize_async(params), 60)
            self.client.initialized(types.InitializedParams())
        return self

    async def _drain_stderr(self) -> None:
        stream = self.client._server.stderr  # never let the pipe fill: a blocked server looks like a hang
        while line := await stream.readline():
            self.stderr.append(line.decode("utf-8", "replace").rstrip())

    async def stop(self) -> int | None:
        proc = self.client._server
        try:
            if proc.returncode is None:
                await asyncio.wait_for(self.client.shutdown_async(None), 20)
                self.client.exit(None)
                await asyncio.wait_for(proc.wait(), 20)
        except Exception:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await asyncio.wait_for(self.client.stop(), 20)
        if self._stderr_task is not None:
            await asyncio.wait_for(self._stderr_task, 20)
        return proc.returncode

    # -- requests -------------------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids) + 100_000  # clear of the client's own uuids

    def open(self, uri: str, text: str, version: int = 1) -> None:
        item = types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))

    def insert(self, uri: str, version: int, line: int, character: int, text: str) -> None:
        pos = types.Position(line, character)
        change = types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=text)
        doc = types.VersionedTextDocumentIdentifier(uri=uri, version=version)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(doc, [change]))

    def inline_params(
        self, uri: str, line: int, character: int, selected: types.SelectedCompletionInfo | None = None
    ) -> types.InlineCompletionParams:
        return types.InlineCompletionParams(
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic, selected_completion_info=selected
            ),
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, character),
        )

    def send(self, method: str, params: Any, msg_id: int | None = None) -> asyncio.Future:
        return self.client.protocol.send_request_async(method, params, msg_id=msg_id or self.next_id())

    def send_untyped(self, method: str, params: Any) -> asyncio.Future:
        """Send params as given (a dict, possibly invalid), bypassing the client's typed serialisation."""
        msg_id = self.next_id()
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.client.protocol._request_futures[msg_id] = future
        self.client.protocol._send_data(JsonRPCRequestMessage(id=msg_id, method=method, jsonrpc="2.0", params=params))
        return asyncio.wrap_future(future)

    async def request(self, method: str, params: Any, timeout: float = 60) -> Any:
        return plain(await asyncio.wait_for(self.send(method, params), timeout))

    async def inline(self, uri: str, line: int, character: int, **kw: Any) -> list[types.InlineCompletionItem]:
        result = await self.request(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, self.inline_params(uri, line, character, **kw)
        )
        return list(result.items if isinstance(result, types.InlineCompletionList) else result or [])

    def cancel(self, msg_id: int) -> None:
        self.client.cancel_request(types.CancelParams(id=msg_id))

    async def stats(self) -> dict[str, Any]:
        return await self.request("parafill/stats", {}, timeout=30)

    async def quiet_stats(self, settle_s: float = 5.0) -> tuple[dict[str, Any], dict[str, Any]]:
        """Stats once no model work runs, then again half a second later: nothing may happen in between.
        Waits for running work first: a request's answer (-32800 included) can go out while its run is still
        inside a forward pass, and the run stops at the next check."""
        deadline = time.monotonic() + settle_s
        first = await self.stats()
        while first["active"] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            first = await self.stats()
        await asyncio.sleep(0.5)
        return first, await self.stats()


def doc_uri(name: str) -> str:
    return f"file:///virtual/{name}"


def position_of(text: str, offset: int) -> tuple[int, int]:
    """(line, UTF-16 column) of a string offset."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return line, len(text[start:offset].encode("utf-16-le")) // 2


def end_of_line_with(text: str, needle: str) -> int:
    """Offset of the end of the first line that contains `needle`."""
    return text.index("\n", text.index(needle))
