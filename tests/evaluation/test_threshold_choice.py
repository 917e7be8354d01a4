"""The served threshold: the fastest measured one whose quality holds, on every task kind."""

from __future__ import annotations

import pytest

from decoder.evaluation.threshold_choice import choose_threshold
from decoder.families import CAUSAL


def row(threshold: float, es: float, em: float, tpf: float, mode: str = "block", block: int = 8) -> dict:
    return {
        "mode": mode,
        "threshold": threshold,
        "block_size": block,
        "edit_similarity": es,
        "edit_similarity_se": 0.01,
        "exact_match": em,
        "exact_match_se": 0.02,
        "tokens_per_forward": tpf,
    }


def report(line: list[dict], block: list[dict]) -> dict:
    ar = row(0.9, 0.5, 0.5, 1.0, mode="ar")  # AR rows never compete
    explain = [row(0.9, 0.3, 0.0, 1.0, mode="ar")]  # a kind without block rows is not judged
    return {"kinds": {"line": [ar, *line], "block": [ar, *block], "explain": explain}}


def test_takes_the_fastest_threshold_within_one_standard_error_on_every_kind() -> None:
    rep = report(
        [row(0.9, 0.40, 0.30, 1.0), row(0.5, 0.395, 0.29, 1.2), row(0.3, 0.392, 0.29, 1.5)],
        [row(0.9, 0.20, 0.05, 1.0), row(0.5, 0.195, 0.05, 1.3), row(0.3, 0.185, 0.05, 1.7)],  # 0.3: ES -0.015
    )
    choice = choose_threshold(rep, 8)
    assert choice is not None and choice.threshold == 0.5 and choice.reference == 0.9
    assert choice.tokens_per_forward == {"line": 1.2, "block": 1.3}
    assert "block, line tasks" in choice.reason and "measured: 0.3, 0.5, 0.9" in choice.reason


def test_exact_match_counts_too_and_the_strictest_is_the_fallback() -> None:
    rep = report(
        [row(0.9, 0.40, 0.30, 1.0), row(0.5, 0.40, 0.25, 1.2)],  # EM -0.05, two standard errors
        [row(0.9, 0.20, 0.05, 1.0), row(0.5, 0.21, 0.05, 1.3)],
    )
    choice = choose_threshold(rep, 8)
    assert choice is not None and choice.threshold == 0.9


def test_rows_with_lookup_agreement_do_not_take_part() -> None:
    lookup = {**row(0.5, 0.10, 0.0, 3.0), "lookup_tokens": 8}  # would fail the quality bar if it were judged
    rep = report([row(0.9, 0.40, 0.30, 1.0), row(0.5, 0.40, 0.30, 1.2), lookup], [row(0.9, 0.2, 0.05, 1.0)])
    rep["kinds"]["block"] += [row(0.5, 0.2, 0.05, 1.3), {**lookup}]
    choice = choose_threshold(rep, 8)
    assert choice is not None and choice.threshold == 0.5 and choice.tokens_per_forward == {"line": 1.2, "block": 1.3}


def test_no_choice_without_block_rows_at_the_block_size_on_shared_thresholds() -> None:
    assert choose_threshold(report([], []), 8) is None
    assert choose_threshold(report([row(0.9, 0.4, 0.3, 1.0, block=16)], [row(0.9, 0.2, 0.0, 1.0, block=16)]), 8) is None
    assert choose_threshold(report([row(0.9, 0.4, 0.3, 1.0)], [row(0.5, 0.2, 0.0, 1.0)]), 8) is None


@pytest.mark.parametrize(
    ("value", "expected"), [(0.4, 0.4), (1, 1.0), (0.0, 0.9), (1.5, 0.9), (True, 0.9), ("0.4", 0.9), (None, 0.9)]
)
def test_a_checkpoint_names_its_threshold_in_config_and_nonsense_is_ignored(value: object, expected: float) -> None:
    extra = {} if value is None else {"block_threshold": value}
    assert CAUSAL.threshold_for(extra) == expected
