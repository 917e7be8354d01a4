"""The explain stream never shows text that the final answer takes back: replayed as the AR decoder streams
(each token through the stop rule first, then to the stream), the deltas add up to the final text."""

from __future__ import annotations

import pytest

from decoder.prompts import stop_before_closing_quotes
from lsp_server.explain import TextStream


class TableTokenizer:
    """Token i is the string vocabulary[i]: multi-character tokens, as BPE makes them."""

    def __init__(self, vocabulary: list[str]) -> None:
        self.vocabulary = vocabulary

    def decode(self, ids: list[int]) -> str:
        return "".join(self.vocabulary[i] for i in ids)


def replay(pieces: list[str]) -> tuple[list[str], str]:
    """Stream `pieces` one token at a time through the explain quote rule, as decoder/ar_decoder.py does;
    the deltas shown and the final text."""
    tokenizer = TableTokenizer(pieces)
    stop_at = stop_before_closing_quotes(tokenizer)
    deltas: list[str] = []
    stream = TextStream(tokenizer.decode, deltas.append)
    out: list[int] = []
    for token in range(len(pieces)):
        out.append(token)
        if (keep := stop_at(out)) is not None:
            del out[keep:]  # cut off: never streamed
            break
        stream.push([token])
    final = tokenizer.decode(out)
    stream.finish(final)
    return deltas, final


@pytest.mark.parametrize(
    ("pieces", "final"),
    [
        # The closing quotes start in a token that also holds the sentence's full stop: both are dropped.
        (["Return", " the", " sum", '."', '""', "\n"], "Return the sum"),
        (["Return", " the", " sum", ".", '"', '"', '"'], "Return the sum."),
        (["Parse", " it", "'", "''"], "Parse it"),
        # Quotes that do not close anything are shown once the next token says so.
        (["Don", "'", "t", " stop"], "Don't stop"),
        (["Say", ' "', "hi", '"', " twice"], 'Say "hi" twice'),
        (["Ends", " with", " a", ' "'], 'Ends with a "'),
    ],
)
def test_streamed_text_adds_up_to_the_final_answer(pieces, final):
    deltas, answer = replay(pieces)
    assert answer == final
    assert "".join(deltas) == final


def test_text_without_quotes_streams_token_by_token():
    deltas, final = replay(["Add", " two", " numbers", "."])
    assert deltas == ["Add", " two", " numbers", "."] and final == "Add two numbers."


def test_a_held_quote_is_released_by_the_next_token():
    shown: list[str] = []
    tokenizer = TableTokenizer(["It", "'", "s", " fine"])
    stream = TextStream(tokenizer.decode, shown.append)
    stream.push([0])
    stream.push([1])
    assert shown == ["It"]  # the apostrophe could start closing quotes
    stream.push([2])
    assert shown == ["It", "'s"]
