"""Quality vs tokens-per-forward for every decode configuration (one PNG)."""

from __future__ import annotations

from pathlib import Path


def plot_quality_vs_parallelism(report: dict, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(report["kinds"]), figsize=(6 * len(report["kinds"]), 4.5), squeeze=False)
    for ax, (kind, rows) in zip(axes[0], report["kinds"].items(), strict=True):
        for row in rows:
            marker = "s" if row["mode"] == "ar" else "o"
            ax.scatter(row["tokens_per_forward"], row["exact_match"] * 100, marker=marker, s=60)
            ax.annotate(
                row["config"],
                (row["tokens_per_forward"], row["exact_match"] * 100),
                textcoords="offset points",
                xytext=(5, 5),
                fontsize=8,
            )
        ax.set_xlabel("generated tokens per forward pass")
        ax.set_ylabel("exact match (%)")
        ax.set_title(f"{kind} tasks ({rows[0]['tasks']})")
        ax.grid(alpha=0.3)
    fig.suptitle(f"parafill eval: {report['model']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
