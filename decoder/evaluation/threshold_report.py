"""`parafill report thresholds`: what the served-threshold rule measured, threshold by threshold, and where the
losses come from, file by file. The rule itself is `decoder/evaluation/threshold_choice.py`; this only prints
its tests, so what is printed is what `ship` decided on."""

from __future__ import annotations

from collections import defaultdict

from decoder.evaluation.threshold_choice import (
    LOWER_IS_BETTER,
    MetricTest,
    ThresholdTest,
    block_rows,
    choose_threshold,
    holding_thresholds,
    loss_sign,
    threshold_tests,
)

# How each metric is shown: label, scale, digits, unit.
_SHOWN = {
    "exact_match": ("EM", 100, 1, " pts"),
    "edit_similarity": ("ES", 1, 3, ""),
    "stutter": ("stutter", 100, 1, " pts"),
}


class NoBlockRows(ValueError):
    """The report has no block-decoder rows to test at that block size."""


def block_sizes(report: dict) -> list[int]:
    """The block sizes of the report's plain block-decoder rows."""
    return sorted(
        {
            int(row["block_size"])
            for rows in report.get("kinds", {}).values()
            for row in rows
            if row["mode"] == "block" and not row.get("lookup_tokens")
        }
    )


def _tests(report: dict, block_size: int) -> list[ThresholdTest]:
    tests = threshold_tests(report, block_size)
    if not tests:
        raise NoBlockRows(f"the report has no block-decoder rows at B={block_size} on thresholds every kind shares")
    return tests


def _loss_word(metric: str) -> str:
    return "rise" if metric in LOWER_IS_BETTER else "loss"


def _metric(test: MetricTest) -> str:
    label, scale, digits, unit = _SHOWN[test.metric]
    mean, worst = test.mean_loss * scale + 0.0, test.worst_loss * scale + 0.0  # + 0.0: no "-0.0"
    return (
        f"{label} {_loss_word(test.metric)} {mean:+.{digits}f}{unit}"
        f" (worst {worst:.{digits}f} / {test.margin * scale:.{digits}f})" + ("" if test.holds else " FAILS")
    )


def format_threshold_tests(report: dict, block_size: int) -> str:
    """Each measured threshold, strictest first: per task kind, tokens per forward and each metric's loss
    against the strictest (mean, worst case at 95% / margin); then the threshold the rule serves and why the
    search stopped."""
    tests = _tests(report, block_size)
    reference = tests[0].threshold
    lines = [
        f"block B={block_size}: each threshold against t={reference:g}, task by task "
        "(mean, and in brackets the worst case at 95% confidence / the margin it must stay under)"
    ]
    holding = holding_thresholds(tests)
    reached = len(holding) + 1  # the rule tested these; the rest are shown, not judged
    for i, test in enumerate(tests):
        state = "reference" if i == 0 else "holds" if test.holds else "fails"
        state += "" if i < reached else " (past the stop: not judged)"
        lines.append(f"t={test.threshold:g}: {state}")
        for kind, kind_tests in test.tests.items():
            metrics = "  ".join(_metric(t) for t in kind_tests) if test.threshold != reference else ""
            lines.append(f"  {kind:<7} tok/fwd {test.tokens_per_forward[kind]:.2f}  {metrics}".rstrip())
    choice = choose_threshold(report, block_size)
    assert choice is not None  # the same rows gave tests
    lines.append(f"served: t={choice.threshold:g} (the fastest of {', '.join(f'{t.threshold:g}' for t in holding)})")
    stopped = tests[len(holding)] if len(holding) < len(tests) else None
    if stopped is not None:
        failing = [
            f"{kind} {_SHOWN[t.metric][0]}"
            for kind, kind_tests in stopped.tests.items()
            for t in kind_tests
            if not t.holds
        ]
        untested = [f"{t.threshold:g}" for t in tests[len(holding) + 1 :]]
        lines.append(
            f"the search stopped at t={stopped.threshold:g} ({', '.join(failing)})"
            + (f"; not tested below it: {', '.join(untested)}" if untested else "")
        )
    return "\n".join(lines)


def task_file(name: str) -> str:
    """The held-out file a task name points into: `typing.py:1406:39` and `typing.py#43` are `typing.py`."""
    return name.split("#")[0].split(":")[0]


def losses_by_file(report: dict, block_size: int, threshold: float, metric: str = "edit_similarity") -> str:
    """Where a threshold's loss against the strictest comes from: per task kind and held-out file, the tasks,
    the loss per task and the file's share of the kind's total loss (positive: the faster threshold is worse).
    One file with much of the loss says the loss is that file's, not the threshold's everywhere."""
    tests = _tests(report, block_size)
    reference = tests[0].threshold
    if threshold not in {t.threshold for t in tests}:
        raise NoBlockRows(
            f"t={threshold:g} is not among the measured thresholds ({', '.join(f'{t.threshold:g}' for t in tests)})"
        )
    sign = loss_sign(metric)
    label = _SHOWN[metric][0]
    lines = [f"{label} {_loss_word(metric)} at t={threshold:g} against t={reference:g}, by held-out file"]
    for kind, rows in block_rows(report, block_size).items():
        ref, row, names = rows[reference], rows[threshold], report.get("task_names", {}).get(kind)
        if names is None:
            lines.append(f"{kind}: no task names in the report (written before per-task scores were kept)")
            continue
        old, new = ref.get("task_scores", {}).get(metric), row.get("task_scores", {}).get(metric)
        if old is None or new is None:
            lines.append(f"{kind}: no per-task {metric.replace('_', ' ')} in the report")
            continue
        per_file: dict[str, list[float]] = defaultdict(list)
        for name, o, n in zip(names, old, new, strict=True):
            per_file[task_file(name)].append(sign * (o - n))
        sums = {name: sum(losses) for name, losses in per_file.items()}
        total = sum(sums.values())
        # A file's share of the kind's loss says something only where the files' losses do not mostly cancel.
        shares = total > 0 and all(abs(v) <= total for v in sums.values())
        lines.append(
            f"{kind} ({len(names)} tasks, {_loss_word(metric)} {total / len(names):+.4f} per task"
            + ("" if shares else "; no shares: the files' gains and losses mostly cancel")
            + ")"
        )
        for name in sorted(per_file, key=lambda f: -sums[f]):
            losses = per_file[name]
            share = f"  share {sums[name] / total:4.0%}" if shares else ""
            lines.append(
                f"  {name:<28} {len(losses):>4} tasks  sum {sums[name]:+8.3f}  per task {sums[name] / len(losses):+.4f}"
                + share
            )
    return "\n".join(lines)
