"""Open documents: full and incremental sync, size/binary refusal, and position <-> offset conversion.

A `Document` is immutable: every change makes a new one, so a worker thread that holds a snapshot never
sees the text move under it. Documents over the size limit, or that look binary, carry a `refused` reason:
requests on them answer nothing. Their text is still kept and followed through edits (an undo of a huge
paste, or deleting a NUL, serves the document again), unless it grows past `DocumentStore.keep_chars`:
then it is dropped, and only a whole-document change can bring it back.

The text is the client's, lone UTF-16 surrogates included (positions must match the client's); text for
the model goes through `for_model`, because tokenizers refuse strings that are not valid Unicode.
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
_SURROGATE = re.compile("[\ud800-\udfff]")
KEEP_FACTOR = 4  # a refused document's text is kept up to this many times the size limit (in characters)


def for_model(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, for a tokenizer or a remote server (both refuse
    strings that are not valid Unicode). One code point for one: document offsets into it stay valid."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def join_surrogates(text: str) -> str:
    """`text` with each adjacent high + low surrogate pair joined into one code point, as the client has it
    (two edits can type the halves one at a time). Lone halves stay as they are."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


@dataclass(frozen=True)
class Document:
    uri: str
    text: str
    version: int | None = None
    language_id: str = ""
    refused: str | None = None  # why the document is not served
    dropped: bool = False  # refused and too large to keep: the text is empty, edits to it cannot be applied

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

    def model_text(self, start: int, end: int) -> str:
        """The text between two offsets as the model may see it (see `for_model`)."""
        return for_model(self.text[start:end])


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

    @property
    def keep_chars(self) -> int:
        """Up to how many characters a refused document's text is kept (beyond that it is dropped)."""
        return KEEP_FACTOR * self.max_bytes

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def __len__(self) -> int:
        return len(self._docs)

    def open(self, uri: str, text: str, version: int | None = None, language_id: str = "") -> Document:
        return self._put(Document(uri, join_surrogates(text), version, language_id))

    def set_limit(self, max_bytes: int) -> None:
        """A new size limit applies to the open documents too (their text is kept, dropped ones aside)."""
        if max_bytes == self.max_bytes:
            return
        self.max_bytes = max_bytes
        for doc in list(self._docs.values()):
            if not doc.dropped:
                self._put(doc)

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def change(self, uri: str, version: int | None, changes: Iterable[Any], encoding: str = UTF16) -> Document | None:
        """Apply `didChange` content changes (each with a `range`, or whole-document with none)."""
        doc = self._docs.get(uri)
        if doc is None:
            log.warning("didChange for %s, which is not open: ignored", uri)
            return None
        text, dropped, lines = doc.text, doc.dropped, None
        for change in changes:
            rng = getattr(change, "range", None)
            if rng is None:
                text, dropped, lines = join_surrogates(change.text), False, None
            elif not dropped:  # dropped text cannot be edited: only a whole-document change brings it back
                if lines is None:  # the open document's line table is usually built already: reuse it
                    lines = LineEditor(text, doc.line_starts if text is doc.text else None)
                lines.apply(rng, change.text, encoding)
        if dropped:
            self._docs[uri] = doc = replace(doc, version=version)
            return doc
        text = text if lines is None else lines.text()
        return self._put(replace(doc, text=text, version=version, refused=None, dropped=False))

    def _put(self, doc: Document) -> Document:
        reason = refusal_reason(doc.text, self.max_bytes)
        if reason is not None and len(doc.text) > self.keep_chars:
            reason += "; its text is not kept, so only a whole-document change can bring it back"
            doc = replace(doc, text="", dropped=True)
        old = self._docs.get(doc.uri)
        if reason is not None and (old is None or old.refused != reason):
            log.warning("not serving %s: %s", doc.uri, reason)
        elif reason is None and old is not None and old.refused:
            log.info("serving %s again", doc.uri)
        self._docs[doc.uri] = doc = replace(doc, refused=reason)
        return doc


class LineEditor:
    """A text as a list of its lines (each with its line end), so that a batch of edits costs one list splice
    per edit instead of a new copy of the whole text and a new line table (seconds for hundreds of edits on a
    1 MB document). `"".join(lines)` is the text; the last line has no line end (it may be empty)."""

    def __init__(self, text: str, line_starts: list[int] | None = None) -> None:
        if line_starts is None:
            self.lines = split_lines(text)
        else:
            self.lines = [text[a:b] for a, b in zip(line_starts, [*line_starts[1:], len(text)], strict=True)]

    def text(self) -> str:
        return "".join(self.lines)

    def apply(self, rng: Any, new_text: str, encoding: str = UTF16) -> None:
        """Replace an LSP range (lenient: clamped like `Document.offset_at(strict=False)`) with `new_text`."""
        (l0, c0), (l1, c1) = sorted((self._locate(rng.start, encoding), self._locate(rng.end, encoding)))
        # Re-split from the line before: its "\r" and a "\n" at the start of the new text are one line end.
        # The region always ends with line l1's own line end (or the end of the text), so the lines after it
        # are unchanged. The halves of a surrogate pair may meet at either edge of the new text.
        lines, lo = self.lines, max(0, l0 - 1)
        region = "".join(lines[lo:l0]) + lines[l0][:c0] + new_text + lines[l1][c1:]
        pieces = split_lines(join_surrogates(region))
        if l1 + 1 < len(lines):
            pieces.pop()  # the empty piece after the region's final line end: line l1 + 1 starts there
        lines[lo : l1 + 1] = pieces

    def _locate(self, pos: Any, encoding: str) -> tuple[int, int]:
        """(line, index in the line) of a position; past the last line means the end of the text."""
        if pos.line >= len(self.lines):
            return len(self.lines) - 1, len(self.lines[-1])
        body = _without_eol(self.lines[pos.line])
        return pos.line, column_to_index(body, pos.character, encoding, strict=False)


def split_lines(text: str) -> list[str]:
    """`text` cut after each line end (kept); the last piece has none."""
    pieces, start = [], 0
    for m in _EOL.finditer(text):
        pieces.append(text[start : m.end()])
        start = m.end()
    pieces.append(text[start:])
    return pieces


def _without_eol(line: str) -> str:
    if line.endswith("\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith(("\r", "\n")) else line


__all__ = ["Document", "DocumentStore", "PositionError", "for_model", "join_surrogates", "refusal_reason"]
