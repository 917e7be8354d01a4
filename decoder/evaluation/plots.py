"""Quality vs tokens-per-forward for every decode configuration (one PNG): exact match and edit similarity."""

from __future__ import annotations

from pathlib import Path

_METRICS = (("exact_match", 100, "exact match (%)"), ("edit_similarity", 1, "edit similarity"))


def plot_quality_vs_parallelism(report: dict, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(report["kinds"].items())
    fig, axes = plt.subplots(len(_METRICS), len(kinds), figsize=(6 * len(kinds), 8), squeeze=False)
    for column, (kind, rows) in enumerate(kinds):
        for line, (key, scale, label) in enumerate(_METRICS):
            ax = axes[line][column]
            for row in rows:
                marker = "s" if row["mode"] == "ar" else "o"
                point = (row["tokens_per_forward"], row[key] * scale)
                ax.scatter(*point, marker=marker, s=60)
                ax.annotate(row["config"], point, textcoords="offset points", xytext=(5, 5), fontsize=8)
            ax.set_xlabel("generated tokens per forward pass")
            ax.set_ylabel(label)
            ax.set_title(f"{kind} tasks ({rows[0]['tasks']})")
            ax.grid(alpha=0.3)
    fig.suptitle(f"parafill eval: {report['model']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
