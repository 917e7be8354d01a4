"""The training curve: validation bits per byte against tokens seen, over every run behind a model.

A model continued across sessions has a history spread over runs; its training.json keeps the evaluation
points of all of them (`history_total`, tokens counted from the first run), and this draws them.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

CURVE_FILE = "training_curve.png"
_SERIES = (("val_ar_bpb", "AR: next token"), ("val_masked_bpb", "block diffusion: masked tokens"))


def curve_points(training: dict[str, Any]) -> list[dict[str, Any]]:
    """Evaluation points over all runs ({tokens, run, val_*}), oldest first."""
    if training.get("history_total"):
        return list(training["history_total"])
    return [p | {"run": 1} for p in training.get("history", [])]


def plot_training_curve(points: list[dict[str, Any]], path: Path) -> Path | None:
    """Write the curve as a PNG; None when there are fewer than two points to draw."""
    if len(points) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    millions = [p["tokens"] / 1e6 for p in points]
    for key, label in _SERIES:
        ax.plot(millions, [p.get(key) for p in points], marker=".", label=label)
    for before, after in itertools.pairwise(points):
        if after.get("run") != before.get("run"):  # a new run, continued from the weights shipped before
            ax.axvline((before["tokens"] + after["tokens"]) / 2e6, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("tokens seen (millions, all runs)")
    ax.set_ylabel("validation bits per byte")
    runs = len({p.get("run") for p in points})
    ax.set_title(f"Validation loss over training ({runs} run{'s' if runs > 1 else ''}; dotted: a new run)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
