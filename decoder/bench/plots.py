"""PNG plots of a `parafill bench` report: span latency (log-log, with fitted exponents), quality and
tokens per forward vs threshold, prefix cache cold vs warm, LSP p50/p99."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_spans(spans: dict[str, Any], path: str | Path, title: str = "") -> None:
    """Decode latency and total (cold prompt) latency vs span, log-log, one line per runner and thread count."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    styles = ["-", "--", ":"]
    for t_index, (threads, entry) in enumerate(sorted(spans["threads"].items())):
        for r_index, (name, runner) in enumerate(entry["summary"].items()):
            xs = [r["span"] for r in runner["rows"]]
            color = f"C{r_index}"
            for ax, key, fit in ((axes[0], "decode_ms", "fit_decode"), (axes[1], "total_ms", "fit_total")):
                exponent = runner[fit]["exponent"]
                ax.plot(
                    xs,
                    [r[key] for r in runner["rows"]],
                    styles[t_index % len(styles)],
                    marker="o",
                    color=color,
                    label=f"{name}, {threads} thr (slope {exponent:.2f})",
                )
    for ax, what in zip(axes, ("decoding (prompt already in the KV cache)", "request, cold prompt"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("span (tokens)")
        ax.set_ylabel("ms (median)")
        ax.set_title(what)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(title or "latency vs span length")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_threshold(threshold: dict[str, Any], path: str | Path, title: str = "") -> None:
    """Per task kind: tokens per forward and quality (exact match, edit similarity) vs threshold, AR dashed."""
    plt = _pyplot()
    kinds = list(threshold["kinds"])
    fig, axes = plt.subplots(1, len(kinds), figsize=(6 * len(kinds), 4.5), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        rows = threshold["kinds"][kind]
        block = [r for r in rows if r["mode"] == "block"]
        ar = next((r for r in rows if r["mode"] == "ar"), None)
        ts = [r["threshold"] for r in block]
        ax.plot(ts, [r["exact_match"] for r in block], "o-", color="C0", label="exact match (block)")
        ax.plot(ts, [r["edit_similarity"] for r in block], "s-", color="C1", label="edit similarity (block)")
        if ar is not None:
            ax.axhline(ar["exact_match"], color="C0", ls="--", lw=1, label="exact match (AR)")
            ax.axhline(ar["edit_similarity"], color="C1", ls="--", lw=1, label="edit similarity (AR)")
        ax.set_xlabel("commit threshold")
        ax.set_ylabel("quality")
        ax.set_ylim(0, 1)
        ax.invert_xaxis()
        right = ax.twinx()
        right.plot(ts, [r["tokens_per_forward"] for r in block], "^-", color="C2", label="tokens / forward (block)")
        right.set_ylabel("tokens per forward", color="C2")
        right.set_ylim(bottom=0)
        lines = ax.get_legend_handles_labels()
        more = right.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper left")
        ax.set_title(f"{kind} tasks ({rows[0]['tasks']}), B={threshold['block_size']}")
        ax.grid(alpha=0.3)
    fig.suptitle(title or "quality and tokens per forward vs threshold")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_cache(cache: dict[str, Any], path: str | Path, title: str = "") -> None:
    """Cold vs warm request latency per context length, one panel per engine (model / random weights)."""
    plt = _pyplot()
    entries = [(name, e) for name, e in cache.items() if isinstance(e, dict) and e.get("rows")]
    if not entries:
        return
    fig, axes = plt.subplots(1, len(entries), figsize=(6 * len(entries), 4.5), squeeze=False)
    for ax, (name, entry) in zip(axes[0], entries, strict=True):
        rows = entry["rows"]
        xs = range(len(rows))
        ax.bar([x - 0.2 for x in xs], [r["cold_ms"] for r in rows], 0.4, label="cold (cache cleared)")
        ax.bar([x + 0.2 for x in xs], [r["warm_ms"] for r in rows], 0.4, label="warm (one keystroke later)")
        for x, r in zip(xs, rows, strict=True):
            ax.annotate(f"{r['cold_over_warm']}x", (x, r["cold_ms"]), ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(xs), [str(r["context_tokens"]) for r in rows])
        ax.set_xlabel("prompt tokens")
        ax.set_ylabel("request latency, ms (median)")
        ax.set_yscale("log")
        ax.set_title("\n".join(textwrap.wrap(entry.get("label", name), 60)), fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(title or f"prefix cache: {entries[0][1]['span']}-token inline span")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_lsp(summary: list[dict[str, Any]], path: str | Path, title: str = "") -> None:
    """p50 and p99 of inline latency through the LSP path per series (idle, during explain, AR) and kind."""
    plt = _pyplot()
    kinds = ["cold", "warm", "typed-ahead"]
    series = list(dict.fromkeys(r["series"] for r in summary))
    rows = sorted(
        (r for r in summary if r["n"]),
        key=lambda r: (series.index(r["series"]), kinds.index(r["kind"]) if r["kind"] in kinds else 9),
    )
    wrapped = ["\n".join(textwrap.wrap(r["series"], 14, break_long_words=False)) for r in rows]
    labels = [f"{w}\n{r['kind']} (n={r['n']})" for w, r in zip(wrapped, rows, strict=True)]
    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows)), 4.5))
    ax.bar([x - 0.2 for x in xs], [r["p50_ms"] for r in rows], 0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], [r["p99_ms"] for r in rows], 0.4, label="p99")
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("client-side latency, ms")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    ax.set_title(title or "inline completion through the LSP path")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
