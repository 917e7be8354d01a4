"""Two model folders' validation bits per byte on the same windows, for the model card.

A run's own validation numbers are measured on the split of the corpus built on its machine, which differs from
machine to machine (other site-packages): they do not compare with the card of the model it replaces. Scored side
by side on one corpus, the same windows and the same noise, they do (what `parafill train --eval-only` prints for
one model).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from decoder.training.config import TrainConfig
from decoder.training.trainer import Trainer

DEFAULT_WINDOWS = 256


@dataclass(frozen=True)
class SideBySide:
    corpus: str
    windows: int
    previous: dict[str, float]  # val_ar_bpb, val_masked_bpb, ... of the model being replaced
    new: dict[str, float]


def evaluate_folder(cfg: TrainConfig) -> tuple[dict[str, float], Trainer]:
    """Validation scores of the model folder `cfg.init_from` on `cfg.corpus`'s validation windows, and the trainer
    that scored them (its resolved config, its windows). Without `cfg.run_dir` the trainer logs to a scratch
    folder; nothing else is written."""
    with tempfile.TemporaryDirectory(prefix="parafill-eval-") as scratch:
        trainer = Trainer(replace(cfg, run_dir=cfg.run_dir or scratch), log=lambda _msg: None)
        return trainer.evaluate(), trainer


def validation_scores(
    model_dir: str | Path, corpus_dir: str | Path, windows: int = DEFAULT_WINDOWS
) -> tuple[dict[str, float], int]:
    """(scores, windows scored) of one model folder on a corpus's validation windows, the trainer's defaults."""
    cfg = TrainConfig(
        corpus=str(corpus_dir), run_dir="", init_from=str(model_dir), eval_windows=windows, progress=False
    )
    scores, trainer = evaluate_folder(cfg)
    return scores, len(trainer.val)


def side_by_side(
    previous_dir: str | Path,
    new_dir: str | Path,
    corpus_dir: str | Path,
    windows: int = DEFAULT_WINDOWS,
) -> SideBySide:
    previous, scored = validation_scores(previous_dir, corpus_dir, windows)
    new, _ = validation_scores(new_dir, corpus_dir, windows)
    return SideBySide(str(corpus_dir), scored, previous, new)


def side_by_side_section(rows: list[SideBySide]) -> str:
    """The card's markdown section: one row a corpus, the replaced model -> this one."""
    lines = [
        "## Validation side by side (`parafill train --eval-only`)",
        "Bits per byte on each corpus's validation windows, the model this one replaced -> this one (the same windows "
        "and noise; the Metrics above are the training machine's own split and do not compare across cards).",
        "",
        "| corpus | windows | AR | masked |",
        "|---|---|---|---|",
    ]
    for row in rows:
        ar = f"{row.previous['val_ar_bpb']:.4f} -> {row.new['val_ar_bpb']:.4f}"
        masked = f"{row.previous['val_masked_bpb']:.4f} -> {row.new['val_masked_bpb']:.4f}"
        lines.append(f"| `{row.corpus}` | {row.windows} | {ar} | {masked} |")
    return "\n".join(lines) + "\n"
