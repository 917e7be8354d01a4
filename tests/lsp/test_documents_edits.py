"""Document edits: surrogate halves, refusal that lifts again, and batches of edits checked against a naive model."""

from __future__ import annotations

import random
import re

import pytest
from lsprotocol import types

from lsp_server.context import ContextBudget, build_window
from lsp_server.documents import DocumentStore, for_model
from lsp_server.positions import UTF8, UTF16, UTF32, column_to_index
from tests.tiny_models import train_tiny_tokenizer

HIGH, LOW = "\ud83d", "\ude00"  # the two halves of 😀 (U+1F600)


def _edit(
    line: int, start: int, end: int, text: str, end_line: int | None = None
) -> types.TextDocumentContentChangePartial:
    rng = types.Range(types.Position(line, start), types.Position(line if end_line is None else end_line, end))
    return types.TextDocumentContentChangePartial(range=rng, text=text)


def _whole(text: str) -> types.TextDocumentContentChangeWholeDocument:
    return types.TextDocumentContentChangeWholeDocument(text=text)


# --- lone surrogates reach the model as U+FFFD, the stored text stays the client's ---


def test_a_lone_surrogate_is_kept_in_the_document_but_not_shown_to_the_tokenizer():
    tokenizer = train_tiny_tokenizer()
    text = f"s = '{HIGH}'\nt = 1\nu = '{LOW}x'\n"
    doc = DocumentStore().open("u", text)
    assert doc.text == text and doc.position_at(text.index("t")) == (1, 0)  # positions match the client's
    with pytest.raises(TypeError):  # why: HF tokenizers refuse a str that is not valid Unicode
        tokenizer.encode(text)

    cursor = text.index("t = 1") + 4
    window = build_window(doc.text, doc.line_starts, cursor, cursor, ContextBudget())
    prefix, suffix = window.prefix(doc.text), window.suffix(doc.text)
    assert prefix == "s = '\ufffd'\nt = " and suffix == "1\nu = '\ufffdx'\n"
    assert tokenizer.encode(prefix).ids and tokenizer.encode(suffix).ids
    assert doc.model_text(0, len(text)) == for_model(text) == text.replace(HIGH, "\ufffd").replace(LOW, "\ufffd")


def test_text_without_surrogates_is_handed_over_as_is():
    text = "x = '😀é'\n"
    assert for_model(text) is text


# --- surrogate halves typed by separate edits become one character ---

# (encoding, column of the low half's insert, column after the joined emoji) on "ab" with the high half at 1
HALVES = [(UTF16, 2, 3), (UTF8, 4, 5), (UTF32, 2, 2)]


@pytest.mark.parametrize(("encoding", "low_at", "after"), HALVES)
def test_surrogate_halves_inserted_one_by_one_join_into_one_character(encoding, low_at, after):
    store = DocumentStore()
    store.open("u", "ab")
    store.change("u", 2, [_edit(0, 1, 1, HIGH)], encoding)
    store.change("u", 3, [_edit(0, low_at, low_at, LOW)], encoding)
    doc = store.change("u", 4, [_edit(0, after, after, "X")], encoding)
    assert doc.text == "a😀Xb" and doc.position_at(3, encoding) == (0, after + 1)


@pytest.mark.parametrize(("encoding", "low_at", "after"), HALVES)
def test_surrogate_halves_in_one_batch_join_before_the_next_edit(encoding, low_at, after):
    store = DocumentStore()
    store.open("u", "ab")
    edits = [_edit(0, 1, 1, HIGH), _edit(0, low_at, low_at, LOW), _edit(0, after, after, "X")]
    assert store.change("u", 2, edits, encoding).text == "a😀Xb"


def test_the_low_half_first_then_the_high_half_before_it():
    store = DocumentStore()
    store.open("u", "ab")
    doc = store.change("u", 2, [_edit(0, 1, 1, LOW), _edit(0, 1, 1, HIGH), _edit(0, 3, 3, "X")])
    assert doc.text == "a😀Xb"
    assert store.open("v", "a" + HIGH + LOW).text == "a😀"  # an opened text is joined too


# --- a refusal lifts when the text is fine again ---


def test_an_oversized_paste_that_is_undone_is_served_again():
    store = DocumentStore(max_bytes=1024)
    text = "".join(f"v{i:03} = {i:010}\n" for i in range(60))[:908]
    assert len(text.encode()) == 908 and store.open("u", text).refused is None
    paste = "p" * 200 + "\n"
    doc = store.change("u", 2, [_edit(3, 0, 0, paste)])
    assert "1 KB limit" in doc.refused
    doc = store.change("u", 3, [_edit(3, 0, 0, "", end_line=4)])  # undo
    assert doc.refused is None and doc.text == text


def test_deleting_the_nul_serves_the_document_again():
    store = DocumentStore()
    assert store.open("u", "a = '\x00'").refused.startswith("looks binary")
    doc = store.change("u", 2, [_edit(0, 5, 6, "")])
    assert doc.refused is None and doc.text == "a = ''"


def test_text_far_over_the_limit_is_dropped_and_only_a_full_change_brings_it_back():
    store = DocumentStore(max_bytes=1024)
    store.open("u", "x = 1\n")
    doc = store.change("u", 2, [_edit(0, 0, 0, "y" * (4 * 1024 + 1))])
    assert doc.text == "" and "limit" in doc.refused and "whole-document change" in doc.refused
    doc = store.change("u", 3, [_edit(0, 0, 0, "", end_line=0)])  # an undo cannot be applied to dropped text
    assert doc.text == "" and "whole-document change" in doc.refused and doc.version == 3
    doc = store.change("u", 4, [_whole("x = 1\n"), _edit(0, 4, 5, "2")])
    assert doc.refused is None and doc.text == "x = 2\n"


def test_a_refused_document_keeps_its_text_under_the_cap():
    store = DocumentStore(max_bytes=1024)
    doc = store.open("u", "é" * 1000)  # 2000 UTF-8 bytes: refused, but well under the cap
    assert doc.refused and doc.text == "é" * 1000
    assert store.change("u", 2, [_edit(0, 400, 1000, "")]).refused is None


# --- a batch of edits against a naive model: apply one by one, recompute everything ---

_EOL = re.compile(r"\r\n|\r|\n")


def _naive_apply(text: str, edit: tuple[int, int, int, int, str] | str, encoding: str) -> str:
    """One edit (or a whole new text) on a plain string, converting positions on a freshly built line table."""
    if isinstance(edit, str):
        text = edit
    else:
        sl, sc, el, ec, new = edit
        starts = [0, *(m.end() for m in _EOL.finditer(text))]
        a, b = _naive_offset(text, starts, sl, sc, encoding), _naive_offset(text, starts, el, ec, encoding)
        a, b = min(a, b), max(a, b)
        text = text[:a] + new + text[b:]
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")  # pairs join


def _naive_offset(text: str, starts: list[int], line: int, character: int, encoding: str) -> int:
    if line < 0:
        return 0
    if line >= len(starts):
        return len(text)
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    body = re.sub(r"(\r\n|\r|\n)\Z", "", text[starts[line] : end])
    return starts[line] + column_to_index(body, character, encoding, strict=False)


PIECES = ["a", "bc", " ", "\r", "\n", "\r\n", "😀", "é", HIGH, LOW, "x\ry", "z\n\r"]


def _random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(n))


def _random_edit(rng: random.Random, text: str) -> tuple[int, int, int, int, str] | str:
    if rng.random() < 0.05:
        return _random_text(rng, rng.randint(0, 20))  # a whole-document change in the middle of the batch
    lines = len(_EOL.findall(text)) + 1
    sl, el = rng.randint(0, lines + 1), rng.randint(0, lines + 1)  # sometimes past the last line: clamped
    sc, ec = rng.randint(0, 12), rng.randint(0, 12)  # sometimes past the end of the line or inside a character
    return sl, sc, el, ec, _random_text(rng, rng.choice([0, 0, 1, 2, 5]))


def _as_change(edit: tuple[int, int, int, int, str] | str) -> types.TextDocumentContentChangeEvent:
    if isinstance(edit, str):
        return _whole(edit)
    sl, sc, el, ec, new = edit
    return _edit(sl, sc, ec, new, end_line=el)


@pytest.mark.parametrize("encoding", [UTF16, UTF8, UTF32])
def test_batches_of_edits_match_applying_them_one_by_one(encoding):
    """CRLF, lone CR, a "\r\n" made or split at an edit's edge, emoji and surrogate halves, clamped positions."""
    rng = random.Random(20240611)
    for _ in range(300):
        store = DocumentStore()
        expected = store.open("u", _random_text(rng, rng.randint(0, 30))).text
        edits = []
        for _ in range(rng.randint(1, 12)):
            edits.append(_random_edit(rng, expected))
            expected = _naive_apply(expected, edits[-1], encoding)
        doc = store.change("u", 2, [_as_change(e) for e in edits], encoding)
        assert doc.text == expected, edits
        assert doc.line_starts == [0, *(m.end() for m in _EOL.finditer(expected))]
