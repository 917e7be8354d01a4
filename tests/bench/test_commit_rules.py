"""The alternative commit rules of benchmarks/bench_commit_rules.py do what their names say."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import torch

import parafill_kernels.reference as reference

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_commit_rules", REPO / "benchmarks" / "bench_commit_rules.py")
rules = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(rules)  # type: ignore[union-attr]


def _mask(*bits: int) -> torch.Tensor:
    return torch.tensor(bits, dtype=torch.bool)


def test_leading_rule_stops_at_the_first_masked_position_under_the_threshold() -> None:
    confidence = torch.tensor([0.99, 0.6, 0.2, 0.9, 0.8, 0.7, 0.9, 0.6])
    masked = _mask(0, 1, 1, 1, 1, 1, 1, 1)  # position 0 is already committed: it neither counts nor stops
    chosen = rules.leading_rule(confidence, masked, masked, 0.5, 4)
    assert chosen.tolist() == [False, True, False, False, True, True, True, True]  # block 2: nothing fails
    plain = reference.select_commits(confidence, masked, masked, 0.5, 4)
    assert plain[3] and not chosen[3]  # the threshold rule commits past the gap


def test_factor_rule_commits_the_top_n_with_n_plus_one_times_doubt_under_f() -> None:
    # Ranked 0.95, 0.8, 0.7, 0.3: (n + 1)(1 - c_n) = 0.1, 0.6, 1.2, 3.5; with f = 1 the top two pass.
    confidence = torch.tensor([0.3, 0.8, 0.95, 0.7])
    masked = _mask(1, 1, 1, 1)
    assert rules.factor_rule(1.0)(confidence, masked, masked, 0.9, 4).tolist() == [False, True, True, False]
    assert rules.factor_rule(1.5)(confidence, masked, masked, 0.9, 4).tolist() == [False, True, True, True]


def test_alternative_rules_keep_the_fallback_when_nothing_passes() -> None:
    confidence = torch.tensor([0.05, 0.3, 0.2, 0.1])
    masked, leftmost_two = _mask(1, 1, 1, 1), _mask(1, 1, 0, 0)
    expected = reference.select_commits(confidence, masked, leftmost_two, 0.9, 4)
    assert expected.tolist() == [False, True, False, False]
    assert torch.equal(rules.leading_rule(confidence, masked, leftmost_two, 0.9, 4), expected)
    assert torch.equal(rules.factor_rule(0.5)(confidence, masked, leftmost_two, 0.9, 4), expected)


def test_commit_rule_is_restored_after_use() -> None:
    with rules.commit_rule(rules.leading_rule):
        assert reference.select_commits is rules.leading_rule
    assert reference.select_commits is rules.THRESHOLD_RULE


def test_the_benchmark_runs_end_to_end(tiny_model_dir: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "benchmarks/bench_commit_rules.py", "--model", str(tiny_model_dir)),
            *("--kinds", "line", "--limit", "3", "--factors", "2.5"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = done.stdout
    assert "threshold 0.15" in printed and "leading 0.1" in printed and "factor 2.5" in printed
    assert "+0.000 [+0.000, +0.000]" in printed  # the base row paired with itself
