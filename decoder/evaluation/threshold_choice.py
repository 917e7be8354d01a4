"""The decoding threshold a shipped model is served with, chosen from its `parafill eval --json` report.

A block step commits every masked position whose confidence passes the threshold. A lower threshold commits
more tokens per forward, and at some point starts committing wrong ones. The rule: among the block-decoder
thresholds the report measured, take the one with the most tokens per forward whose quality on every task
kind stays within one standard error of the strictest measured threshold (edit similarity and exact match
each). The standard error is the strictest row's own: a paired difference on the same tasks is no noisier.
"""

from __future__ import annotations

from dataclasses import dataclass

from decoder.generation import decoder_label


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


def _holds(row: dict, ref: dict) -> bool:
    for metric in ("edit_similarity", "exact_match"):
        if row[metric] < ref[metric] - (ref.get(f"{metric}_se") or 0.0):
            return False
    return True


def choose_threshold(report: dict, block_size: int) -> ThresholdChoice | None:
    """None when the report has no block-decoder rows at `block_size` measured on the same thresholds."""
    by_kind = _block_rows(report, block_size)
    if not by_kind:
        return None
    common = sorted(set.intersection(*(set(rows) for rows in by_kind.values())))
    if not common:
        return None
    reference = common[-1]
    holding = [t for t in common if all(_holds(rows[t], rows[reference]) for rows in by_kind.values())]

    def speed(t: float) -> float:
        return sum(rows[t]["tokens_per_forward"] for rows in by_kind.values()) / len(by_kind)

    best = max(holding, key=lambda t: (speed(t), t))
    kinds = ", ".join(sorted(by_kind))
    reason = (
        f"the measured threshold with the most tokens per forward whose edit similarity and exact match on {kinds} "
        f"tasks stay within one standard error of t={reference:g}'s (measured: {', '.join(f'{t:g}' for t in common)})"
    )
    speeds = {kind: rows[best]["tokens_per_forward"] for kind, rows in by_kind.items()}
    return ThresholdChoice(best, reference, speeds, reason, block_size)
