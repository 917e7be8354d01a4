"""Stop a decoder caught in a loop: the same run of tokens over and over (a small model's failure mode).

An explanation that has started repeating "a list of a list of ..." will not recover under greedy decoding:
every further token is wasted time. Stopping when the last tokens are one short period repeated keeps what
was already streamed and ends the request. Ghost text has not been shown yet, so there the loop is cut off
as well (`line_loop_cut`), keeping its first copy.
"""

from __future__ import annotations

from collections.abc import Callable


def loop_length(ids: list[int], min_repeats: int = 3, min_tokens: int = 16, max_period: int = 32) -> int:
    """The period of the loop `ids` ends in (0: none). A loop is a run of `period` tokens repeated at least
    `min_repeats` times back to back, over at least `min_tokens` tokens: "= = = ..." needs 16 of them,
    "a list of" six copies, a 12-token sentence three."""
    for period in range(1, max_period + 1):
        span = max(period * min_repeats, min_tokens)
        if span > len(ids):
            break
        tail = ids[-span:]
        if tail[period:] == tail[:-period]:
            return period
    return 0


def stop_on_loop(min_repeats: int = 3, min_tokens: int = 16, max_period: int = 32) -> Callable[[list[int]], int | None]:
    """A GenerationControl.stop_at rule: stop as soon as the tokens end in a loop, keeping them all (they
    have been streamed already)."""

    def stop_at(ids: list[int]) -> int | None:
        return len(ids) if loop_length(ids, min_repeats, min_tokens, max_period) else None

    return stop_at


def line_loop_cut(text: str, min_repeats: int = 3, min_chars: int = 24, max_period: int = 40) -> int | None:
    """Where to cut `text` if its last line ends in a loop (None: it does not): a run of 2 to `max_period`
    characters with a letter or digit in it, repeated at least `min_repeats` times back to back over at least
    `min_chars` characters. The cut keeps the text before the loop and one copy of it:
    "Return the list of a list of a list of a" -> "Return the list of a". Runs of one character or of
    punctuation only ("# =====", "- - -") are left alone: code and comments have those on purpose."""
    line_start = text.rfind("\n") + 1
    line = text[line_start:]
    for period in range(2, max_period + 1):
        span = max(period * min_repeats, min_chars)
        if span > len(line):
            break
        tail = line[-span:]
        if tail[period:] != tail[:-period] or not any(c.isalnum() for c in tail[:period]):
            continue
        start = len(line) - span  # walk back to where the periodic run begins
        while start > 0 and line[start - 1] == line[start - 1 + period]:
            start -= 1
        return line_start + start + period
    return None
