"""Stop a decoder caught in a loop: the same run of tokens over and over (a small model's failure mode).

An explanation that has started repeating "a list of a list of ..." will not recover under greedy decoding:
every further token is wasted time. Stopping when the last tokens are one short period repeated keeps what
was already streamed and ends the request.
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
