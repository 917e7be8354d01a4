"""Tokens per forward pass and completion quality vs the commit threshold (through decoder/evaluation).

The same held-out line and block tasks as `parafill eval`, decoded by AR and by block diffusion at each
threshold. A lower threshold commits more tokens per pass (fewer passes) and, past some point, worse ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from decoder.engine import Engine
from decoder.evaluation.runner import DecodeConfig, run_configs
from decoder.evaluation.tasks import build_tasks, stdlib_heldout_files

MAX_NEW_TOKENS = {"line": 48, "block": 128}


def quality_vs_threshold(
    engine: Engine,
    thresholds: list[float],
    block_size: int = 8,
    kinds: tuple[str, ...] = ("line", "block"),
    limit: int = 40,
    seed: int = 0,
    on_row: Callable[[str, dict], None] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    files = stdlib_heldout_files()
    configs = [DecodeConfig("ar", block_size=block_size)]
    configs += [DecodeConfig("block", t, block_size) for t in thresholds]
    out: dict[str, Any] = {
        "block_size": block_size,
        "thresholds": thresholds,
        "tasks_per_kind": limit,
        "heldout_files": len(files),
        "tokens_per_forward": "generated tokens / decoding passes (the prefill, same for all, excluded)",
        "kinds": {},
    }
    for kind in kinds:
        tasks = build_tasks(files, kind, limit, seed)[:limit]
        # Task by task through every configuration, the prompt prefilled once (run_configs): warm latencies.
        rows = run_configs(engine, tasks, configs, MAX_NEW_TOKENS, True, progress=progress)
        for row in rows:
            row.pop("samples", None)
            if on_row is not None:
                on_row(kind, row)
        out["kinds"][kind] = rows
    return out
