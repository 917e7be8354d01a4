"""Completion quality and decoding-order metrics."""

from __future__ import annotations

import math
import re

from rapidfuzz.distance import Levenshtein


def exact_match(prediction: str, target: str) -> bool:
    """Equal after whitespace normalisation (stripped, split on whitespace)."""
    return prediction.split() == target.split()


def edit_similarity(prediction: str, target: str) -> float:
    """1 - Levenshtein(prediction, target) / max(len): 1.0 is identical, 0.0 shares nothing."""
    return Levenshtein.normalized_similarity(prediction.strip(), target.strip())


# A word followed, on the same line, by itself: "in in", "line line". Python's grammar has almost no place for
# that (`not not x` is the rare exception), so it is the mark of parallel decoding's own failure: two positions
# committed in one step, each sure of the same token, neither seeing the other's choice.
_STUTTER = re.compile(r"\b(\w+)(?=[ \t]+\1\b)")


def stutters(text: str) -> int:
    """How many words in `text` are followed on their line by the same word ("in in in": 2)."""
    return sum(1 for _ in _STUTTER.finditer(text))


def stutter(prediction: str, target: str) -> bool:
    """The prediction repeats a word back to back more often than the target does: degenerate output that exact
    match and edit similarity score like any other miss, but that a user sees at once."""
    return stutters(prediction) > stutters(target)


def block_traces(commit_steps: list[int], block_size: int) -> list[list[int]]:
    return [commit_steps[i : i + block_size] for i in range(0, len(commit_steps), block_size)]


def leftmost_commit_fraction(commit_steps: list[int], block_size: int) -> float:
    """AR-ness: of all steps that committed tokens, the fraction that committed exactly one token, the
    leftmost one still masked. 1.0 = the 'parallel' decoder is left-to-right AR in disguise."""
    ar_like = total = 0
    for block in block_traces(commit_steps, block_size):
        done: set[int] = set()
        for step in sorted(set(block)):
            committed = [i for i, s in enumerate(block) if s == step]
            leftmost = min(i for i in range(len(block)) if i not in done)
            total += 1
            ar_like += committed == [leftmost]
            done.update(committed)
    return ar_like / total if total else float("nan")


def kendall_tau(xs: list[float], ys: list[float]) -> float:
    """Kendall tau-b between two sequences (ties allowed); nan when either is constant."""
    concordant = discordant = ties_x = ties_y = 0
    n = len(xs)
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx * dy > 0:
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return (concordant - discordant) / denom if denom else float("nan")


def position_order_tau(commit_steps: list[int], block_size: int) -> float:
    """Mean over blocks of Kendall tau between position and commit step (1.0 = strictly left to right)."""
    taus = [kendall_tau(list(range(len(b))), b) for b in block_traces(commit_steps, block_size) if len(b) > 1]
    taus = [t for t in taus if not math.isnan(t)]
    return sum(taus) / len(taus) if taus else float("nan")


KEEP_SHARES = (1.0, 0.75, 0.5, 0.25, 0.1)


def gate_value(confidence: float, digits: int) -> float:
    """`confidence` rounded *down*: a gate holds back what is below it, so a value rounded up would hold back
    the very completion that set it."""
    scale = 10**digits
    return math.floor(confidence * scale) / scale


def confidence_coverage(
    confidences: list[float | None], em: list[bool], es: list[float], shares: tuple[float, ...] = KEEP_SHARES
) -> list[dict]:
    """Quality of the completions a confidence gate would still show: for each share kept (the most confident
    first), the gate that keeps it and the exact match and edit similarity of what it keeps. A task without a
    confidence (nothing generated) counts as the least confident."""
    order = sorted(range(len(es)), key=lambda i: -(confidences[i] or 0.0))
    out: list[dict] = []
    for share in shares if order else ():
        n = max(1, round(share * len(order)))
        kept = order[:n]
        out.append(
            {
                "keep": share,
                "tasks": n,
                "min_confidence": gate_value(confidences[kept[-1]] or 0.0, 4),
                "exact_match": round(sum(em[i] for i in kept) / n, 4),
                "edit_similarity": round(sum(es[i] for i in kept) / n, 4),
            }
        )
    return out
