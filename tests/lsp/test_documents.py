"""Positions in UTF-16/8/32, strict and lenient; documents: incremental sync, refusal of binary/huge text."""

from __future__ import annotations

import pytest
from lsprotocol import types

from lsp_server.documents import DocumentStore
from lsp_server.positions import UTF8, UTF16, UTF32, PositionError, column_to_index, index_to_column

LINE = 'x = "😀é" + y'  # the emoji is 2 UTF-16 units and 4 UTF-8 bytes; é is 1 and 2


@pytest.mark.parametrize(
    ("encoding", "column", "index"),
    [(UTF16, 5, 5), (UTF16, 7, 6), (UTF16, 8, 7), (UTF8, 9, 6), (UTF8, 11, 7), (UTF32, 6, 6), (UTF16, 99, len(LINE))],
)
def test_column_to_index_and_back(encoding, column, index):
    assert column_to_index(LINE, column, encoding) == index
    if column < 99:
        assert index_to_column(LINE, index, encoding) == column


@pytest.mark.parametrize(("encoding", "column"), [(UTF16, 6), (UTF8, 6), (UTF8, 7), (UTF8, 10)])
def test_a_column_inside_a_character_is_refused_when_strict(encoding, column):
    with pytest.raises(PositionError):
        column_to_index(LINE, column, encoding)
    assert column_to_index(LINE, column, encoding, strict=False) in (5, 6)  # the character's start


def _change(start: tuple[int, int], end: tuple[int, int], text: str) -> types.TextDocumentContentChangePartial:
    rng = types.Range(types.Position(*start), types.Position(*end))
    return types.TextDocumentContentChangePartial(range=rng, text=text)


def test_incremental_and_full_changes_with_crlf_and_emoji():
    store = DocumentStore()
    store.open("u", "a = 1\r\n😀 = 2\nc")
    doc = store.change("u", 2, [_change((1, 2), (1, 2), "x"), _change((0, 0), (0, 1), "bb")], UTF16)
    assert doc.text == "bb = 1\r\n😀x = 2\nc" and doc.version == 2
    assert doc.line_count == 3 and doc.line_text(0) == "bb = 1" and doc.line_text(1) == "😀x = 2"
    assert doc.position_at(doc.text.index("x"), UTF16) == (1, 2)
    assert doc.offset_at(2, 1) == len(doc.text)
    with pytest.raises(PositionError):
        doc.offset_at(3, 0)
    doc = store.change("u", 3, [types.TextDocumentContentChangeWholeDocument(text="new")])
    assert doc.text == "new"


def test_edits_past_the_end_are_clamped_not_fatal():
    store = DocumentStore()
    store.open("u", "ab\ncd")
    assert store.change("u", 2, [_change((0, 9), (7, 0), "!")]).text == "ab!"


def test_binary_and_oversized_documents_are_refused_and_can_come_back():
    store = DocumentStore(max_bytes=1000)
    assert store.open("bin", "abc\x00def").refused.startswith("looks binary")
    big = store.open("big", "x" * 1001)
    assert "limit" in big.refused and big.text == "x" * 1001  # kept: an edit can bring it under the limit
    assert store.change("big", 2, [_change((0, 0), (0, 0), "y")]).refused
    assert store.change("big", 3, [_change((0, 0), (0, 2), "")]).refused is None
    assert store.change("big", 4, [types.TextDocumentContentChangeWholeDocument(text="ok")]).refused is None
    assert store.open("multibyte", "é" * 600).refused  # 1200 UTF-8 bytes
    store.set_limit(2000)  # a new limit applies to the documents already open
    assert store.get("multibyte").refused is None and store.get("bin").refused.startswith("looks binary")
    store.set_limit(1000)
    assert "limit" in store.get("multibyte").refused and store.get("multibyte").text == "é" * 600
    assert store.change("missing", 1, []) is None
