"""Open documents: full and incremental sync, size/binary refusal, and position <-> offset conversion.

A `Document` is immutable: every change makes a new one, so a worker thread that holds a snapshot never
sees the text move under it. Documents over the size limit, or that look binary, are kept as stubs with
a `refused` reason: requests on them answer nothing, and the text is not kept.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from lsp_server.positions import UTF16, PositionError, column_to_index, index_to_column

log = logging.getLogger("parafill.documents")

_EOL = re.compile(r"\r\n|\r|\n")  # LSP's line ends


@dataclass(frozen=True)
class Document:
    uri: str
    text: str
    version: int | None = None
    language_id: str = ""
    refused: str | None = None  # why the document is not served (its text is then empty)

    @cached_property
    def line_starts(self) -> list[int]:
        return [0, *(m.end() for m in _EOL.finditer(self.text))]

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    def line_end(self, line: int) -> int:
        """Offset of the end of `line`'s text (before its line end)."""
        starts = self.line_starts
        if line + 1 < len(starts):
            end = starts[line + 1]
            return end - 2 if self.text.startswith("\r\n", end - 2) else end - 1
        return len(self.text)

    def line_text(self, line: int) -> str:
        return self.text[self.line_starts[line] : self.line_end(line)]

    def line_of(self, offset: int) -> int:
        return bisect_right(self.line_starts, offset) - 1

    def offset_at(self, line: int, character: int, encoding: str = UTF16, strict: bool = True) -> int:
        """Offset of an LSP position. Strict: a line outside the document or a column inside a character is
        a PositionError. Lenient (for edits from the client): clamp to the nearest valid place."""
        if line < 0 or line >= self.line_count:
            if strict:
                raise PositionError(f"line {line} is outside the document ({self.line_count} lines)")
            return 0 if line < 0 else len(self.text)
        index = column_to_index(self.line_text(line), character, encoding, strict=strict)
        return self.line_starts[line] + index

    def position_at(self, offset: int, encoding: str = UTF16) -> tuple[int, int]:
        line = self.line_of(offset)
        start = self.line_starts[line]
        return line, index_to_column(self.text[start : self.line_end(line)], offset - start, encoding)


def refusal_reason(text: str, max_bytes: int) -> str | None:
    """Why a document should not be served, or None. Size counts UTF-8 bytes."""
    if len(text) > max_bytes or (len(text) * 4 > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes):
        return f"larger than the {max_bytes // 1024} KB limit (maxDocumentKb)"
    if "\x00" in text:
        return "looks binary (contains NUL characters)"
    return None


@dataclass
class DocumentStore:
    max_bytes: int = 1 << 20
    _docs: dict[str, Document] = field(default_factory=dict)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def __len__(self) -> int:
        return len(self._docs)

    def open(self, uri: str, text: str, version: int | None = None, language_id: str = "") -> Document:
        return self._put(Document(uri, text, version, language_id))

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def change(self, uri: str, version: int | None, changes: Iterable[Any], encoding: str = UTF16) -> Document | None:
        """Apply `didChange` content changes (each with a `range`, or whole-document with none)."""
        doc = self._docs.get(uri)
        if doc is None:
            log.warning("didChange for %s, which is not open: ignored", uri)
            return None
        text = doc.text
        for change in changes:
            rng = getattr(change, "range", None)
            if rng is None:
                text, doc = change.text, replace(doc, refused=None)
                continue
            if doc.refused:
                continue  # the text was not kept: only a whole-document change can bring it back
            doc = replace(doc, text=text)
            start = doc.offset_at(rng.start.line, rng.start.character, encoding, strict=False)
            end = doc.offset_at(rng.end.line, rng.end.character, encoding, strict=False)
            if end < start:
                start, end = end, start
            text = text[:start] + change.text + text[end:]
        if doc.refused:
            self._docs[uri] = doc = replace(doc, version=version)
            return doc
        return self._put(replace(doc, text=text, version=version))

    def _put(self, doc: Document) -> Document:
        reason = refusal_reason(doc.text, self.max_bytes)
        if reason is not None:
            old = self._docs.get(doc.uri)
            if old is None or old.refused != reason:
                log.warning("not serving %s: %s", doc.uri, reason)
            doc = replace(doc, text="", refused=reason)
        self._docs[doc.uri] = doc
        return doc


__all__ = ["Document", "DocumentStore", "PositionError", "refusal_reason"]
