"""`textDocument/inlineCompletion`: LSP params -> InlineRequest -> worker thread -> InlineCompletionItem.

Passive request, so bad input answers an empty list with a log line rather than an error popup.
A newer request on the same document supersedes this one (it answers an empty list); `$/cancelRequest`
answers -32800. Either way the model work stops at its next forward pass.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING

from lsprotocol import types

from lsp_server.documents import Document
from lsp_server.inline import InlineAnswer, InlineRequest, SelectedItem
from lsp_server.positions import PositionError

if TYPE_CHECKING:
    from lsp_server.server import ParafillServer

log = logging.getLogger("parafill.inline")


async def answer_inline(ls: ParafillServer, params: types.InlineCompletionParams) -> list[types.InlineCompletionItem]:
    uri = params.text_document.uri
    doc = ls.documents.get(uri)
    if doc is None:
        log.warning("inlineCompletion for %s, which is not open: empty answer", uri)
        return []
    if doc.refused:
        log.debug("inlineCompletion for %s skipped: %s", uri, doc.refused)
        return []
    encoding = ls.position_encoding
    pos = params.position
    try:
        cursor = doc.offset_at(pos.line, pos.character, encoding)
    except PositionError as exc:
        log.warning("inlineCompletion at %s:%d:%d: %s: empty answer", uri, pos.line, pos.character, exc)
        return []
    request = InlineRequest(uri, doc, cursor, _selected_item(doc, params.context, cursor, encoding))
    msg_id = ls.protocol.msg_id
    token = ls.scheduler.inline_token(uri, msg_id)
    try:
        if (debounce := ls.service.settings.debounce_ms) > 0:
            await asyncio.sleep(debounce / 1000)
        answer = await ls.scheduler.run(partial(ls.service.complete, request, token), token, inline=True)
    except asyncio.CancelledError:
        ls.service.note("cancelled")
        raise  # pygls answers -32800
    except Exception:  # ghost text is never asked for: an error popup would be worse than no suggestion
        log.exception("inlineCompletion at %s:%d:%d failed: empty answer", uri, pos.line, pos.character)
        ls.service.note("inline_failed")
        return []
    finally:
        ls.scheduler.release(msg_id, token, uri)
    if token.reason == "cancelled":
        ls.service.note("cancelled")
        raise asyncio.CancelledError  # the cancel reached the token before the task: still -32800
    if token.reason == "superseded":
        ls.service.note("superseded")
        return []
    if answer is None or answer.text is None:
        return []
    return [to_item(doc, answer, encoding)]


def to_item(doc: Document, answer: InlineAnswer, encoding: str) -> types.InlineCompletionItem:
    start_line, start_char = doc.position_at(answer.start, encoding)
    end_line, end_char = doc.position_at(answer.end, encoding)
    assert start_line == end_line, "an inline item's range stays on the cursor line"
    return types.InlineCompletionItem(
        insert_text=answer.text or "",
        range=types.Range(types.Position(start_line, start_char), types.Position(end_line, end_char)),
    )


def _selected_item(
    doc: Document, context: types.InlineCompletionContext | None, cursor: int, encoding: str
) -> SelectedItem | None:
    info = context.selected_completion_info if context is not None else None
    if info is None:
        return None
    try:
        start = doc.offset_at(info.range.start.line, info.range.start.character, encoding)
        end = doc.offset_at(info.range.end.line, info.range.end.character, encoding)
    except PositionError as exc:
        log.warning("selectedCompletionInfo range is invalid (%s): ignored", exc)
        return None
    line = doc.line_of(cursor)
    if not (start <= cursor and start <= end and doc.line_of(start) == line == doc.line_of(end)):
        log.warning("selectedCompletionInfo range is not on the cursor line around the cursor: ignored")
        return None
    return SelectedItem(start, end, info.text)
