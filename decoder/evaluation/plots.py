"""Quality vs tokens-per-forward for every decode configuration (one PNG): exact match, edit similarity and the
share of stuttering completions.

Each point carries an error bar of two standard errors (about a 95% interval): the axes autoscale to the
points, and without the bars a difference well inside the noise would look like a gap."""

from __future__ import annotations

from pathlib import Path

# (report key, scale, axis label, smallest y-axis top: all-zero scores still get a readable axis)
_METRICS = (
    ("exact_match", 100, "exact match (%)", 5.0),
    ("edit_similarity", 1, "edit similarity", 0.25),
    ("stutter_rate", 100, "stutter (%)", 5.0),
)


def _metrics(report: dict) -> tuple[tuple[str, int, str, float], ...]:
    """The metrics every row of the report has (reports before 2026-12-02 did not count stutter)."""
    rows = [row for rows in report["kinds"].values() for row in rows]
    return tuple(m for m in _METRICS if all(row.get(m[0]) is not None for row in rows))


def _series(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped into what the plot draws as one series: each AR configuration alone, and the block decoder's
    thresholds at one block size and lookup setting as one curve (loosest threshold last)."""
    series: dict[str, list[dict]] = {}
    for row in rows:
        if row["mode"] == "block":
            lookup = f" lookup {row['lookup_tokens']}" if row.get("lookup_tokens") else ""
            series.setdefault(f"block B={row['block_size']}{lookup}", []).append(row)
        else:
            series.setdefault(row["config"], []).append(row)
    return {name: sorted(group, key=lambda r: -r["threshold"]) for name, group in series.items()}


def plot_quality_vs_parallelism(report: dict, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(report["kinds"].items())
    metrics = _metrics(report)
    fig, axes = plt.subplots(len(metrics), len(kinds), figsize=(6 * len(kinds), 4 * len(metrics)), squeeze=False)
    for column, (kind, rows) in enumerate(kinds):
        for line, (key, scale, label, min_top) in enumerate(metrics):
            ax = axes[line][column]
            top = min_top
            for name, group in _series(rows).items():
                block = group[0]["mode"] == "block"
                xs = [r["tokens_per_forward"] for r in group]
                ys = [r[key] * scale for r in group]
                errs = [2 * (r.get(f"{key}_se") or 0.0) * scale for r in group]
                style = ("o-" if not group[0].get("lookup_tokens") else "^--") if block else "s"
                ax.errorbar(xs, ys, yerr=errs, fmt=style, markersize=6, capsize=3, linewidth=1, label=name)
                # Each point's threshold, so the curve reads "lower threshold: further right" (the plain curve only:
                # the lookup one lies next to it).
                if block and not group[0].get("lookup_tokens"):
                    for r, x, y in zip(group, xs, ys, strict=True):
                        ax.annotate(
                            f"{r['threshold']:g}", (x, y), fontsize=7, textcoords="offset points", xytext=(4, 4)
                        )
                top = max(top, *(y + e for y, e in zip(ys, errs, strict=True)))
            # From zero, with a line at one token per pass: the scale of the gain is what the picture is for.
            widest = max(row["tokens_per_forward"] for row in rows)
            ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
            ax.set_xlim(0, max(2.0, widest * 1.15))
            ax.set_ylim(0, max(min_top, top * 1.1))
            ax.legend(fontsize=8, loc="lower left")
            ax.set_xlabel("generated tokens per forward pass (labels: block threshold)")
            ax.set_ylabel(f"{label}, ± 2 standard errors")
            ax.set_title(f"{kind} tasks ({rows[0]['tasks']})")
            ax.grid(alpha=0.3)
    fig.suptitle(f"parafill eval: {report['model']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_confidence_coverage(report: dict, path: str | Path) -> None:
    """Edit similarity of what a confidence gate keeps vs the share it keeps, one line per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [(kind, rows) for kind, rows in report["kinds"].items() if rows and rows[0].get("confidence_coverage")]
    if not kinds:
        return
    fig, axes = plt.subplots(1, len(kinds), figsize=(6 * len(kinds), 4.5), squeeze=False)
    for ax, (kind, rows) in zip(axes[0], kinds, strict=True):
        rows = [row for row in rows if row["mode"] != "block" or not row.get("lookup_tokens")]  # they track these
        for row in rows:
            points = row["confidence_coverage"]
            ax.plot(
                [p["keep"] * 100 for p in points], [p["edit_similarity"] for p in points], "o-", label=row["config"]
            )
        # The gate (minConfidence) that keeps each share, for the server's decoder (block) where the kind has it.
        labelled = next((row for row in rows if row["mode"] == "block"), rows[0])
        for p in labelled["confidence_coverage"]:
            spot = (p["keep"] * 100, p["edit_similarity"])
            ax.annotate(f"{p['min_confidence']:.2f}", spot, fontsize=7, textcoords="offset points", xytext=(0, 7))
        ax.set_xlim(105, 0)  # from showing everything (left) to showing only the surest few (right)
        ax.set_ylim(0, 1)
        ax.set_xlabel("completions shown (%), most confident first")
        ax.set_ylabel("edit similarity of those shown")
        ax.set_title(f"{kind} tasks ({rows[0]['tasks']})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"confidence gate: {report['model']} (labels: the minConfidence that keeps each share)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
