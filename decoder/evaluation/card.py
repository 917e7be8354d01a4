"""The model card's evaluation section, written from `parafill eval --json` reports (the shipped model's, and
optionally the one it replaces, measured with the same code and tasks), so the card's table is the report."""

from __future__ import annotations

from decoder.evaluation.metrics import gate_value
from decoder.evaluation.reports import SETUP_BEFORE_KEYS, ReportMismatch, compare_bits_per_byte, compare_reports
from decoder.evaluation.threshold_choice import ThresholdChoice
from decoder.families import THRESHOLD_FIELD

_KIND_NAMES = {"line": "rest of line", "block": "block", "explain": "explain (first line)"}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _rows_by_config(report: dict | None, kind: str) -> dict[str, dict]:
    return {row["config"]: row for row in (report or {}).get("kinds", {}).get(kind, [])}


def eval_section(
    report: dict,
    previous: dict | None = None,
    command: str = "parafill eval",
    note: str = "",
    served: ThresholdChoice | None = None,
) -> str:
    """Markdown: one table row per task kind and decoder configuration, the previous model's EM and ES in
    brackets where it was measured on the same configuration, the served threshold and what the confidence
    gate keeps there, then held-out bits per byte."""
    title, heldout = _heldout_heading(report)
    lines = [
        f"## Evaluation{title} (`{command}`)",
        heldout + " EM: whitespace-split equality; ES: 1 -"
        " Levenshtein / max length, with its standard error; explain tasks compare the explanation's first line"
        " with the docstring's. Stutter: the share of completions that repeat a word back to back ('in in') more"
        " often than their target. p50 latency: "
        + report.get("latency", "one cold request per task (prefix cache cleared): prefill and decoding")
        + "."
        + (" In brackets: the model this one replaced, same code and tasks." if previous else ""),
    ]
    if note:
        lines.append(note)
    # Reports from before 2026-12-02 did not measure stutter: their cards keep the table they had.
    stutter = any(row.get("stutter_rate") is not None for rows in report["kinds"].values() for row in rows)
    lines += [
        "",
        "| tasks | decoder | EM | ES ± se | tokens / forward | AR-ness (leftmost) |"
        + (" stutter |" if stutter else "")
        + " p50 |",
        "|---|---|---|---|---|---|" + ("---|" if stutter else "") + "---|",
    ]
    for kind, rows in report["kinds"].items():
        before = _rows_by_config(previous, kind)
        for row in rows:
            old = before.get(row["config"])
            se = row.get("edit_similarity_se")
            em, es = _pct(row["exact_match"]), f"{row['edit_similarity']:.3f}{'' if se is None else f' ± {se:.3f}'}"
            if old is not None:
                em, es = f"{em} ({_pct(old['exact_match'])})", f"{es} ({old['edit_similarity']:.3f})"
            arness = row.get("ar_ness_leftmost_fraction")
            tpf = f"{row['tokens_per_forward']:.2f}" + ("" if old is None else f" ({old['tokens_per_forward']:.2f})")
            lines.append(
                f"| {_KIND_NAMES.get(kind, kind)} ({row['tasks']}) | {row['config']} | {em} | {es} | {tpf} | "
                f"{'-' if arness is None else f'{arness:.2f}'} | "
                + (f"{_pct(row.get('stutter_rate'))} | " if stutter else "")
                + f"{row['latency_ms_p50']:.0f} ms |"
            )
    lines += _paired_lines(previous, report)
    lines += _served_lines(served)
    lines += _gate_lines(report, None if served is None else served.config)
    if "bits_per_byte" in report:
        bpb = f"Held-out bits per byte {report['bits_per_byte']:.4f}"
        if previous and "bits_per_byte" in previous:
            saved = compare_bits_per_byte(previous, report)
            file_by_file = "" if saved is None else f"; saved file by file {saved.span(digits=4)}, {saved.verdict}"
            bpb += f" (previous: {previous['bits_per_byte']:.4f}{file_by_file})"
        lines += ["", bpb + "."]
    return "\n".join(lines) + "\n"


def _heldout_heading(report: dict) -> tuple[str, str]:
    """(title suffix, sentence) naming the held-out files the report scored: the stdlib set, or the wheel files of
    `parafill eval --heldout-corpus`."""
    stdlib = SETUP_BEFORE_KEYS["heldout"]  # what eval writes for the stdlib set, and what older reports scored
    heldout = report.get("heldout", stdlib)
    if heldout == stdlib:
        return "", "Held-out standard-library files (the validation split)."
    files = len(report.get("heldout_files", []))
    return ", third-party code", f"Held-out third-party files: {heldout}, one file a wheel ({files} files)."


def _paired_lines(previous: dict | None, report: dict) -> list[str]:
    """Edit similarity against the previous model task by task, where both reports kept per-task scores."""
    try:
        rows = compare_reports(previous, report) if previous else []
    except ReportMismatch:
        return []
    if not rows:
        return []
    parts = [f"{r.kind} {r.config} {r.edit_similarity.span()} {r.edit_similarity.verdict}" for r in rows]
    intro = "ES against the previous model, task by task (`parafill report compare`, 95% interval): "
    return ["", intro + "; ".join(parts) + "."]


def _served_lines(choice: ThresholdChoice | None) -> list[str]:
    if choice is None:
        return []
    tpf = ", ".join(f"{kind} {v:.2f}" for kind, v in sorted(choice.tokens_per_forward.items()))
    return [
        "",
        f"Served threshold: **{choice.threshold:g}** (config.json `{THRESHOLD_FIELD}`; tokens per forward {tpf}):"
        f" {choice.reason}. A user's `threshold` setting overrides it.",
    ]


def _gate_lines(report: dict, config: str | None = None) -> list[str]:
    """What the minConfidence gate keeps on rest-of-line tasks with the block decoder configuration `config`
    (default: the first block-decoder configuration)."""
    blocks = [r for r in report["kinds"].get("line", []) if r["mode"] == "block"]
    row = next((r for r in blocks if config is None or r["config"] == config), None)
    if row is None:
        return []
    coverage = [c for c in row.get("confidence_coverage", []) if c["keep"] < 1.0]
    if not coverage:
        return []
    kept = "; ".join(
        f"{c['keep']:.0%} at >= {gate_value(c['min_confidence'], 2):.2f} "
        f"(ES {c['edit_similarity']:.3f}, EM {_pct(c['exact_match'])})"
        for c in coverage
    )
    return ["", f"Confidence gate (`minConfidence`), rest of line, {row['config']}: keeps {kept}."]
