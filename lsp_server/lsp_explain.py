"""Explain over LSP: `parafill/explain` and `workspace/executeCommand parafill.explain`, same meaning.

The code in the range goes to the service in a worker thread; the text streams back as `$/progress`
reports on the work-done token, and the response carries the whole text. Explain is asked for
explicitly, so bad input answers an error (-32602, or -32803 when the model cannot serve it).
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from lsp_server.engine_holder import ModelUnavailable
from lsp_server.explain import ExplainError
from lsp_server.positions import PositionError
from lsp_server.progress import ProgressStream
from lsp_server.protocol import plain
from lsp_server.scheduler import CancelToken

if TYPE_CHECKING:
    from lsp_server.server import ParafillServer

log = logging.getLogger("parafill.explain")


class RequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid but the server could not serve it."""

    CODE = -32803


def parse_explain_params(params: Any) -> tuple[str, types.Range, types.ProgressToken | None]:
    """`{textDocument: {uri}, range, workDoneToken?}` (parafill/explain) -> (uri, range, token)."""
    try:
        uri = params["textDocument"]["uri"]
        rng = _range(params["range"])
        token = params.get("workDoneToken")
    except KeyError as exc:
        raise _invalid(f"parafill/explain expects {{textDocument: {{uri}}, range}}: {exc} is missing") from exc
    except (TypeError, ValueError) as exc:
        raise _invalid(f"parafill/explain expects {{textDocument: {{uri}}, range}}: {exc}") from exc
    if not isinstance(uri, str) or not isinstance(token, (str, int, type(None))):
        raise _invalid("parafill/explain: uri must be a string, workDoneToken a string or integer")
    return uri, rng, token


def _invalid(message: str) -> JsonRpcInvalidParams:
    log.warning("%s: answered -32602", message)
    return JsonRpcInvalidParams(message)


def parse_command_arguments(params: types.ExecuteCommandParams) -> tuple[str, types.Range]:
    """`parafill.explain` arguments: [uri, range] or [{uri | textDocument, range}]."""
    args = plain(list(params.arguments or []))
    try:
        if len(args) == 1 and isinstance(args[0], dict):
            arg = args[0]
            uri = arg.get("uri") or arg["textDocument"]["uri"]
            if not isinstance(uri, str):
                raise TypeError("uri must be a string")
            return uri, _range(arg["range"])
        if len(args) == 2 and isinstance(args[0], str):
            return args[0], _range(args[1])
    except (KeyError, TypeError, ValueError) as exc:
        raise _invalid(f"parafill.explain arguments: {type(exc).__name__}: {exc}") from exc
    raise _invalid("parafill.explain expects the arguments [uri, range]")


def _range(raw: Any) -> types.Range:
    if isinstance(raw, types.Range):
        return raw
    start, end = raw["start"], raw["end"]
    values = [start["line"], start["character"], end["line"], end["character"]]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError("range positions must be non-negative integers")
    return types.Range(types.Position(values[0], values[1]), types.Position(values[2], values[3]))


def code_in_range(ls: ParafillServer, uri: str, rng: types.Range) -> str:
    doc = ls.documents.get(uri)
    if doc is None:
        raise JsonRpcInvalidParams(f"document {uri} is not open")
    if doc.refused:
        raise JsonRpcInvalidParams(f"document {uri} is not served: {doc.refused}")
    encoding = ls.position_encoding
    try:
        start = doc.offset_at(rng.start.line, rng.start.character, encoding)
        end = doc.offset_at(rng.end.line, rng.end.character, encoding)
    except PositionError as exc:
        raise JsonRpcInvalidParams(f"invalid range: {exc}") from exc
    if end < start:
        raise JsonRpcInvalidParams("invalid range: end before start")
    if start == end:  # an empty range means its line
        line = doc.line_of(start)
        start, end = doc.line_starts[line], doc.line_end(line)
    code = doc.model_text(start, end)  # lone surrogates (kept in the document) would make the tokenizer raise
    if not code.strip():
        raise JsonRpcInvalidParams("the range holds no code to explain")
    return code


async def answer_explain(
    ls: ParafillServer, uri: str, rng: types.Range, work_done_token: types.ProgressToken | None
) -> dict[str, Any]:
    try:
        code = code_in_range(ls, uri, rng)
    except JsonRpcException as exc:
        log.warning("explain: %s", exc.message)
        raise
    msg_id = ls.protocol.msg_id
    token = ls.scheduler.token(msg_id)
    try:  # from the token's start: a cancel while progress opens (up to seconds) must release it too
        progress = await ProgressStream.open(ls, work_done_token, title="parafill: explain")
        return await _explain_with_progress(ls, code, token, progress)
    finally:
        ls.scheduler.release(msg_id, token)


async def _explain_with_progress(
    ls: ParafillServer, code: str, token: CancelToken, progress: ProgressStream
) -> dict[str, Any]:
    """Run the explanation; every way out ends the client's progress (or its notification spins forever)."""
    progress.on_client_cancel(lambda: token.cancel("cancelled"))
    work = partial(ls.service.explain, code, ls.scheduler.yielding_to_inline(token), progress.push)
    try:
        answer = await ls.scheduler.run(work, token)
    except asyncio.CancelledError:
        progress.end("cancelled")
        ls.service.note("cancelled")
        raise  # pygls answers -32800
    except (ModelUnavailable, ExplainError) as exc:
        progress.end("failed")
        log.warning("explain failed: %s", exc)
        raise RequestFailed(f"parafill cannot explain: {exc}") from exc
    except Exception:
        progress.end("failed")  # an unexpected error (out of memory, a bug): pygls answers -32603
        raise
    if answer is None or token.reason is not None:
        progress.end("cancelled")
        ls.service.note("cancelled")
        raise asyncio.CancelledError
    progress.end("done")
    return answer.to_json() | {"progress_reports": progress.reports}
