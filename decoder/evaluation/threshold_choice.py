"""The decoding threshold a shipped model is served with, chosen from its `parafill eval --json` report.

A block step commits every masked position whose confidence passes the threshold. A lower threshold commits
more tokens per forward, and at some point starts committing wrong ones. The rule: among the block-decoder
thresholds the report measured, take the one with the most tokens per forward that is *non-inferior* to the
strictest measured threshold on every task kind: with 95% confidence it loses less than a margin, in exact
match and in edit similarity each (edit similarity's margin shrinks for a weak model: `margin`), and its share
of stuttering completions ("in in in") rises less than a margin. Thresholds are
tested from the strictest down, and the first that fails ends the search (fixed-sequence testing: the chance of
serving a threshold that is really worse stays 1 in 40).

The difference is paired, task by task (the rows of one kind ran on the same tasks): most of the spread in
scores is between tasks, which two thresholds share, so the paired interval is several times narrower than
one built from the two rows' own standard errors. A report without per-task scores falls back to the unpaired
standard error, which in practice keeps the strictest threshold: a cautious answer for an old report.

`parafill report thresholds REPORT` prints every test this rule made (`threshold_tests`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from decoder.evaluation.reports import Z_95, paired_difference
from decoder.generation import decoder_label

# The loss a faster threshold may cost at most, with 95% confidence. Two points of exact match is the issue's
# own yardstick for block decoding against AR; edit similarity gets the same two hundredths. Stutter (completions
# repeating a word back to back, `decoder/evaluation/metrics.stutter`) may rise by at most two points of tasks.
# The model shipped on 2026-12-01 stutters on block tasks 1.3% of the time at t=0.9, 2.3% at t=0.3, 3.7% at t=0.2
# and 12% at t=0.1 (rest of line: 0.7% to 3.0%), while its edit similarity stays flat.
MARGINS = {"exact_match": 0.02, "edit_similarity": 0.02, "stutter": 0.02}
# Metrics where a higher value is the worse one (a rate of failures, not a score).
LOWER_IS_BETTER = {"stutter"}
# The report key of each metric's mean.
ROW_KEYS = {"exact_match": "exact_match", "edit_similarity": "edit_similarity", "stutter": "stutter_rate"}
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


@dataclass(frozen=True)
class MetricTest:
    """One threshold against the strictest on one task kind and metric: the loss it may cost at 95% confidence,
    and the margin that loss must stay under."""

    metric: str
    mean_loss: float  # ref - row (row - ref where lower is better)
    worst_loss: float
    margin: float

    @property
    def holds(self) -> bool:
        return self.worst_loss <= self.margin


@dataclass(frozen=True)
class ThresholdTest:
    threshold: float
    tokens_per_forward: dict[str, float]  # per task kind
    tests: dict[str, list[MetricTest]]  # per task kind; metrics a report did not measure are left out

    @property
    def holds(self) -> bool:
        return all(t.holds for tests in self.tests.values() for t in tests)

    @property
    def speed(self) -> float:
        return sum(self.tokens_per_forward.values()) / len(self.tokens_per_forward)


def block_rows(report: dict, block_size: int) -> dict[str, dict[float, dict]]:
    """kind -> threshold -> report row, for the block decoder at `block_size` (kinds without one left out).
    Rows with prompt-lookup agreement are left out: the choice is made on the plain decoder, and agreement
    (served on top when lookupTokens > 0) only adds commits where the argmax spells the context's draft."""

    def plain(row: dict) -> bool:
        return row["mode"] == "block" and row["block_size"] == block_size and not row.get("lookup_tokens")

    by_kind = {
        kind: {float(r["threshold"]): r for r in rows if plain(r)} for kind, rows in report.get("kinds", {}).items()
    }
    return {kind: rows for kind, rows in by_kind.items() if rows}


def loss_sign(metric: str) -> int:
    """+1 where a drop is the loss (a score), -1 where a rise is (a rate of failures)."""
    return -1 if metric in LOWER_IS_BETTER else 1


def worst_case_loss(row: dict, ref: dict, metric: str) -> float:
    """How much `row` may lose against `ref` in `metric`, at 95% confidence: the far end of the interval of
    the loss (task by task when both rows carry per-task scores)."""
    sign = loss_sign(metric)
    old, new = ref.get("task_scores", {}).get(metric), row.get("task_scores", {}).get(metric)
    if old is not None and new is not None and len(old) == len(new) and len(old) > 1:
        low, high = paired_difference(old, new).interval  # of row - ref
        return -low if sign > 0 else high
    ses = (ref.get(f"{ROW_KEYS[metric]}_se"), row.get(f"{ROW_KEYS[metric]}_se"))
    if None in ses:
        return math.inf  # no spread measured (a single task): nothing is known about the loss
    return sign * (ref[ROW_KEYS[metric]] - row[ROW_KEYS[metric]]) + Z_95 * math.hypot(*ses)


def margin(metric: str, ref: dict) -> float:
    """The loss in `metric` a faster threshold may cost against `ref`, the strictest threshold's row."""
    share = RELATIVE_MARGINS.get(metric)
    return MARGINS[metric] if share is None else min(MARGINS[metric], share * ref[ROW_KEYS[metric]])


def measured(metric: str, row: dict) -> bool:
    """Reports written before a guard existed lack its metric (stutter before 2026-12-02): not tested there."""
    return row.get(ROW_KEYS[metric]) is not None


def metric_tests(row: dict, ref: dict) -> list[MetricTest]:
    return [
        MetricTest(
            metric,
            loss_sign(metric) * (ref[ROW_KEYS[metric]] - row[ROW_KEYS[metric]]),
            worst_case_loss(row, ref, metric),
            margin(metric, ref),
        )
        for metric in MARGINS
        if measured(metric, row) and measured(metric, ref)
    ]


def threshold_tests(report: dict, block_size: int) -> list[ThresholdTest]:
    """Every block threshold measured on every kind, strictest first, each tested against the strictest (which
    is tested against itself, and holds). Empty when the report has none at `block_size`."""
    by_kind = block_rows(report, block_size)
    if not by_kind:
        return []
    common = sorted(set.intersection(*(set(rows) for rows in by_kind.values())), reverse=True)
    if not common:
        return []
    reference = common[0]
    return [
        ThresholdTest(
            t,
            {kind: rows[t]["tokens_per_forward"] for kind, rows in by_kind.items()},
            {kind: metric_tests(rows[t], rows[reference]) for kind, rows in by_kind.items()},
        )
        for t in common
    ]


def holding_thresholds(tests: list[ThresholdTest]) -> list[ThresholdTest]:
    """Fixed-sequence testing: from the strictest threshold down, those before the first that fails. Testing
    each on its own and keeping the fastest that passes would let one pass by chance below a real failure (each
    test alone errs 1 time in 40; the more thresholds, the likelier one such lucky pass)."""
    holding: list[ThresholdTest] = []
    for test in tests:
        if holding and not test.holds:
            break
        holding.append(test)
    return holding


def choose_threshold(report: dict, block_size: int, at_least: float = 0.0) -> ThresholdChoice | None:
    """None when the report has no block-decoder rows at `block_size` measured on the same thresholds.
    at_least: choose nothing below it (the threshold another held-out set's report supports: `strictest_choice`);
    the strictest measured threshold stays the fallback."""
    tests = threshold_tests(report, block_size)
    if not tests:
        return None
    reference = tests[0].threshold
    allowed = [t for t in holding_thresholds(tests) if t.threshold >= at_least] or tests[:1]
    best = max(allowed, key=lambda t: (t.speed, t.threshold))
    by_kind = block_rows(report, block_size)
    kinds = ", ".join(sorted(by_kind))
    tested = {t.metric for test in tests for kind_tests in test.tests.values() for t in kind_tests}
    margins = " and ".join(
        f"{v:g} in {m.replace('_', ' ')}"
        + (f" (at most {RELATIVE_MARGINS[m]:.0%} of t={reference:g}'s own)" if m in RELATIVE_MARGINS else "")
        + (" (a rise)" if m in LOWER_IS_BETTER else "")
        for m, v in MARGINS.items()
        if m in tested or m not in LOWER_IS_BETTER
    )
    paired = all("task_scores" in row for rows in by_kind.values() for row in rows.values())
    how = "task by task" if paired else "from the rows' standard errors (the report has no per-task scores)"
    reason = (
        f"the measured threshold with the most tokens per forward whose loss against t={reference:g} on {kinds} "
        f"tasks is under {margins} at 95% confidence, {how}, testing from the strictest down and stopping at the "
        f"first that fails (measured: {', '.join(f'{t.threshold:g}' for t in reversed(tests))})"
    )
    if at_least > 0.0:
        reason += f"; and no lower than t={at_least:g}, the fastest threshold the other held-out set supports"
    return ThresholdChoice(best.threshold, reference, best.tokens_per_forward, reason, block_size)


def strictest_choice(reports: list[dict], block_size: int) -> ThresholdChoice | None:
    """The threshold served when several held-out sets were measured (the stdlib files first, then e.g.
    third-party code): the first report's choice, but no lower than any other report's, so that it holds on
    every set. The thresholds between a report's choice and its strictest held there too: the search passed
    them on its way down.
    None when the first report has no block rows to choose from."""
    floor = max(
        (choice.threshold for other in reports[1:] if (choice := choose_threshold(other, block_size))), default=0.0
    )
    first = choose_threshold(reports[0], block_size)
    if first is None or first.threshold >= floor:
        return first
    return choose_threshold(reports[0], block_size, at_least=floor)
