"""Commit rules side by side on the held-out tasks of `parafill eval`: the fixed threshold (what ships) against
two alternatives, each paired task by task with the threshold rule.

- `threshold t`: every masked position whose confidence reaches t (decoder/block_decoder.py, kernels/).
- `leading t`: only the leading run of masked positions that reach t: the first one under t stops the commits.
- `factor f`: Fast-dLLM's rule: a block's n most confident masked positions, n the largest with
  (n + 1) * (1 - c_n) < f, c_n the n-th highest confidence.

Every rule keeps the shipped fallback (the most confident of the leftmost masked positions when nothing passes).
An alternative replaces the reference kernel's commit selection (`parafill_kernels.reference.select_commits`) for its
rows; the Triton kernel knows only the threshold rule, so this forces the reference path.

    .venv/bin/python benchmarks/bench_commit_rules.py [--model models/default] [--kinds line,block]
        [--limit 300] [--threshold 0.15] [--leading 0.1] [--factors 2.4,2.7] [--json rules.json]
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor

import parafill_kernels.reference as reference
from decoder.defaults import default_model_dir
from decoder.evaluation.cli import MAX_NEW_TOKENS
from decoder.evaluation.parallel import RowJob
from decoder.evaluation.reports import paired_difference
from decoder.evaluation.runner import DecodeConfig
from decoder.evaluation.tasks import build_tasks, stdlib_heldout_files
from decoder.families import CAUSAL
from lsp_server.model_loading import open_engine

CommitRule = Callable[[Tensor, Tensor, Tensor, float, int], Tensor]
THRESHOLD_RULE: CommitRule = reference.select_commits


def with_fallback(chosen: Tensor, confidence: Tensor, masked: Tensor, fallback: Tensor, block_size: int) -> Tensor:
    """`chosen`, plus the shipped fallback's pick in every block where nothing was chosen and work is left."""
    blocks = chosen.shape[0] // block_size
    empty = ~chosen.view(blocks, block_size).any(dim=1)
    still_masked = masked & empty.repeat_interleave(block_size)
    return chosen | THRESHOLD_RULE(confidence, still_masked, fallback, 2.0, block_size)  # 2.0: no threshold commits


def leading_rule(confidence: Tensor, masked: Tensor, fallback: Tensor, threshold: float, block_size: int) -> Tensor:
    blocks = confidence.shape[0] // block_size
    passing = (masked & (confidence >= threshold)).view(blocks, block_size)
    failing = (masked & (confidence < threshold)).view(blocks, block_size)
    chosen = passing & (failing.int().cumsum(dim=1) == 0)
    return with_fallback(chosen.view(-1), confidence, masked, fallback, block_size)


def factor_rule(factor: float) -> CommitRule:
    def rule(confidence: Tensor, masked: Tensor, fallback: Tensor, threshold: float, block_size: int) -> Tensor:
        blocks = confidence.shape[0] // block_size
        scored = torch.where(masked, confidence.float(), torch.full_like(confidence.float(), -1.0))
        ranked, order = scored.view(blocks, block_size).sort(dim=1, descending=True)
        n = torch.arange(1, block_size + 1, device=confidence.device)
        passes = ((n + 1) * (1 - ranked) < factor) & (ranked >= 0)  # once false, false for every larger n
        count = passes.int().cumprod(dim=1).sum(dim=1)
        chosen = torch.zeros_like(passes).scatter_(1, order, n[None, :] <= count[:, None])
        return with_fallback(chosen.view(-1) & masked, confidence, masked, fallback, block_size)

    return rule


@contextmanager
def commit_rule(rule: CommitRule) -> Iterator[None]:
    reference.select_commits = rule
    try:
        yield
    finally:
        reference.select_commits = THRESHOLD_RULE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(default_model_dir()))
    parser.add_argument("--kinds", default="line,block")
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--block-size", type=int, default=8)
    parser.add_argument("--threshold", type=float, default=0.15, help="the threshold rule everything is paired with")
    parser.add_argument("--leading", default="0.1", help="thresholds for the leading-run rule (comma-separated)")
    parser.add_argument("--factors", default="2.4,2.7", help="f values for the factor rule (comma-separated)")
    parser.add_argument("--json", help="write every row here")
    args = parser.parse_args()
    os.environ["PARAFILL_DENOISE"] = "reference"  # the rules replace the reference kernel's selection
    engine = open_engine(args.model, dtype="fp32")
    rules: list[tuple[str, float, CommitRule]] = [(f"threshold {args.threshold}", args.threshold, THRESHOLD_RULE)]
    rules += [(f"leading {t}", float(t), leading_rule) for t in args.leading.split(",") if t]
    rules += [(f"factor {f}", args.threshold, factor_rule(float(f))) for f in args.factors.split(",") if f]
    files = stdlib_heldout_files()
    results: dict[str, dict[str, dict]] = {}
    for kind in [k for k in args.kinds.split(",") if k]:
        tasks = [t for t in build_tasks(files, kind, args.limit, 0) if t.kind == kind][: args.limit]
        results[kind] = {}
        for name, threshold, rule in rules:
            config = DecodeConfig("block", threshold, args.block_size)
            job = RowJob(kind, tasks, (config,), MAX_NEW_TOKENS, True, CAUSAL.fallback_window)
            with commit_rule(rule):
                results[kind][name] = job.run(engine)[0]
        base = results[kind][rules[0][0]]
        print(f"\n{kind} ({len(tasks)} tasks), paired with {rules[0][0]}:")
        print(f"{'rule':<16} {'tok/fwd':>8} {'ES':>7} {'EM':>6}  {'ES - base [95%]':<26} EM - base [95%]")
        for name, row in results[kind].items():
            es = paired_difference(base["task_scores"]["edit_similarity"], row["task_scores"]["edit_similarity"])
            em = paired_difference(base["task_scores"]["exact_match"], row["task_scores"]["exact_match"])
            print(
                f"{name:<16} {row['tokens_per_forward']:>8.2f} {row['edit_similarity']:>7.3f} "
                f"{row['exact_match']:>6.1%}  {es.span():<26} {em.span(100, 1, ' pt')}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
