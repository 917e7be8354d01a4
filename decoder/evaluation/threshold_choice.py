"""The decoding threshold a shipped model is served with, chosen from its `parafill eval --json` report.

A block step commits every masked position whose confidence passes the threshold. A lower threshold commits
more tokens per forward, and at some point starts committing wrong ones. The rule: among the block-decoder
thresholds the report measured, take the one with the most tokens per forward that is *non-inferior* to the
strictest measured threshold on every task kind: with 95% confidence it loses less than a margin, in exact
match and in edit similarity each (edit similarity's margin shrinks for a weak model: `margin`). Thresholds are
tested from the strictest down, and the first that fails ends the search (fixed-sequence testing: the chance of
serving a threshold that is really worse stays 1 in 40).

The difference is paired, task by task (the rows of one kind ran on the same tasks): most of the spread in
scores is between tasks, which two thresholds share, so the paired interval is several times narrower than
one built from the two rows' own standard errors. A report without per-task scores falls back to the unpaired
standard error, which in practice keeps the strictest threshold: a cautious answer for an old report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from decoder.evaluation.reports import Z_95, paired_difference
from decoder.generation import decoder_label

# The loss a faster threshold may cost at most, with 95% confidence. Two points of exact match is the issue's
# own yardstick for block decoding against AR; edit similarity gets the same two hundredths.
MARGINS = {"exact_match": 0.02, "edit_similarity": 0.02}
# Edit similarity may also lose at most this share of the strictest threshold's own score: for a weak model two
# hundredths are a ninth of all it has. The model shipped on 2026-12-01 scores 0.181 on rest of line; at t=0.1
# (worst case 0.015, inside 0.02) the demo's line comes apart ("for line in line in in in in"), at t=0.2 (0.006)
# it does not. A model scoring 0.4 or more keeps the 0.02.
RELATIVE_MARGINS = {"edit_similarity": 0.05}


@dataclass(frozen=True)
class ThresholdChoice:
    threshold: float
    reference: float  # the strictest measured threshold, the quality it is held to
    tokens_per_forward: dict[str, float]  # per task kind, at the chosen threshold
    reason: str
    block_size: int

    @property
    def config(self) -> str:
        """The report's label of the served configuration (the plain block decoder at the chosen threshold)."""
        return decoder_label("block", self.block_size, self.threshold)


def _block_rows(report: dict, block_size: int) -> dict[str, dict[float, dict]]:
    """kind -> threshold -> report row, for the block decoder at `block_size` (kinds without one left out).
    Rows with prompt-lookup agreement are left out: the choice is made on the plain decoder, and agreement
    (served on top when lookupTokens > 0) only adds commits where the argmax spells the context's draft."""

    def plain(row: dict) -> bool:
        return row["mode"] == "block" and row["block_size"] == block_size and not row.get("lookup_tokens")

    by_kind = {
        kind: {float(r["threshold"]): r for r in rows if plain(r)} for kind, rows in report.get("kinds", {}).items()
    }
    return {kind: rows for kind, rows in by_kind.items() if rows}


def worst_case_loss(row: dict, ref: dict, metric: str) -> float:
    """How much `row` may lose against `ref` in `metric`, at 95% confidence: the far end of the interval of
    ref - row (task by task when both rows carry per-task scores)."""
    old, new = ref.get("task_scores", {}).get(metric), row.get("task_scores", {}).get(metric)
    if old is not None and new is not None and len(old) == len(new) and len(old) > 1:
        diff = paired_difference(old, new)
        return -diff.interval[0]
    ses = (ref.get(f"{metric}_se"), row.get(f"{metric}_se"))
    if None in ses:
        return math.inf  # no spread measured (a single task): nothing is known about the loss
    return ref[metric] - row[metric] + Z_95 * math.hypot(*ses)


def margin(metric: str, ref: dict) -> float:
    """The loss in `metric` a faster threshold may cost against `ref`, the strictest threshold's row."""
    share = RELATIVE_MARGINS.get(metric)
    return MARGINS[metric] if share is None else min(MARGINS[metric], share * ref[metric])


def _holds(row: dict, ref: dict) -> bool:
    return all(worst_case_loss(row, ref, metric) <= margin(metric, ref) for metric in MARGINS)


def choose_threshold(report: dict, block_size: int) -> ThresholdChoice | None:
    """None when the report has no block-decoder rows at `block_size` measured on the same thresholds."""
    by_kind = _block_rows(report, block_size)
    if not by_kind:
        return None
    common = sorted(set.intersection(*(set(rows) for rows in by_kind.values())))
    if not common:
        return None
    reference = common[-1]
    # Fixed-sequence testing: from the strictest threshold down, stop at the first that fails. Testing each on
    # its own and keeping the fastest that passes would let one pass by chance below a real failure (each test
    # alone errs 1 time in 40; the more thresholds, the likelier one such lucky pass).
    holding = [reference]
    for t in reversed(common[:-1]):
        if not all(_holds(rows[t], rows[reference]) for rows in by_kind.values()):
            break
        holding.append(t)

    def speed(t: float) -> float:
        return sum(rows[t]["tokens_per_forward"] for rows in by_kind.values()) / len(by_kind)

    best = max(holding, key=lambda t: (speed(t), t))
    kinds = ", ".join(sorted(by_kind))
    margins = " and ".join(
        f"{v:g} in {m.replace('_', ' ')}"
        + (f" (at most {RELATIVE_MARGINS[m]:.0%} of t={reference:g}'s own)" if m in RELATIVE_MARGINS else "")
        for m, v in MARGINS.items()
    )
    paired = all("task_scores" in row for rows in by_kind.values() for row in rows.values())
    how = "task by task" if paired else "from the rows' standard errors (the report has no per-task scores)"
    reason = (
        f"the measured threshold with the most tokens per forward whose loss against t={reference:g} on {kinds} "
        f"tasks is under {margins} at 95% confidence, {how}, testing from the strictest down and stopping at the "
        f"first that fails (measured: {', '.join(f'{t:g}' for t in common)})"
    )
    speeds = {kind: rows[best]["tokens_per_forward"] for kind, rows in by_kind.items()}
    return ThresholdChoice(best, reference, speeds, reason, block_size)
