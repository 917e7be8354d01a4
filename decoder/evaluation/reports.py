"""Work on `parafill eval` reports after the fact: merge reports of one model (kinds run in separate
processes), and compare two models task by task.

Why paired: two models scored on the same 300 tasks differ by far less than either score's own standard error
suggests, because most of the spread is between tasks (easy lines are easy for both). The standard error of
the per-task differences is the right yardstick for "is the new model better". Measured for the model shipped
on 2026-11-30 (23:51) against the one it replaced: 1.3-2.5x smaller than the unpaired one in edit similarity, on
every row (`se` against `unpaired_se` in `benchmarks/results/compare_cpu-5m-i_vs_f.json`).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass

# A difference counts as real when its 95% interval (about two paired standard errors) excludes zero.
Z_95 = 1.96
# How a report was made, besides its tasks: two reports that differ here measured different things.
SETUP_KEYS = (
    "python",
    "dtype",
    "token_healing",
    "fallback_window",
    "defer_repeats",
    "heldout",
    "heldout_files",
    "task_allocation",
    "task_lines",
)
# What a report written before a setup key existed did: compared as such, not skipped.
SETUP_BEFORE_KEYS = {
    "task_allocation": "even",
    "task_lines": "code lines; literal tables included",
    "defer_repeats": False,
    "heldout": "stdlib",
}


class ReportMismatch(ValueError):
    """The reports cannot be paired or merged (different tasks, or a kind in both)."""


def report_json(value: object, indent: int = 0) -> str:
    """JSON with one key per line, like `json.dumps(indent=2)`, but each list of plain values (per-task scores,
    task names) on one line instead of one line per value."""
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(str(k))}: {report_json(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        items = [f"{inner}{report_json(v, indent + 2)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(value)


def merge_reports(reports: list[dict], model: str | None = None) -> dict:
    """One report from several of the same model, each holding different kinds (as `--kinds` split them)."""
    if not reports:
        raise ReportMismatch("nothing to merge")
    for other in reports[1:]:
        check_same_setup(reports[0], other)
        if other.get("model") != reports[0].get("model"):
            raise ReportMismatch(f"reports of different models: {reports[0].get('model')!r}, {other.get('model')!r}")
    merged = {key: value for key, value in reports[0].items() if key not in ("kinds", "task_names")}
    merged["kinds"], merged["task_names"] = {}, {}
    for report in reports:
        for kind, rows in report["kinds"].items():
            if kind in merged["kinds"]:
                raise ReportMismatch(f"kind {kind!r} is in more than one report")
            merged["kinds"][kind] = rows
            if kind in report.get("task_names", {}):
                merged["task_names"][kind] = report["task_names"][kind]
    with_bpb = [r for r in reports if r.get("bits_per_byte") is not None]
    if with_bpb:
        merged["bits_per_byte"] = with_bpb[0]["bits_per_byte"]
        if "bits_per_byte_files" in with_bpb[0]:
            merged["bits_per_byte_files"] = with_bpb[0]["bits_per_byte_files"]
    merged["seconds"] = round(sum(r.get("seconds", 0.0) for r in reports), 1)
    if model is not None:
        merged["model"] = model
    return merged


@dataclass(frozen=True)
class PairedDifference:
    """new - old over the same tasks: mean, its standard error, and how many tasks went each way."""

    mean: float
    se: float
    wins: int  # tasks where the new model scored higher
    losses: int
    tasks: int
    unpaired_se: float  # the same difference's standard error had the two runs been on different tasks

    @property
    def interval(self) -> tuple[float, float]:
        return self.mean - Z_95 * self.se, self.mean + Z_95 * self.se

    def span(self, scale: float = 1.0, digits: int = 3, unit: str = "") -> str:
        """`+0.004 [-0.002, +0.010]`: the mean and its 95% interval, times `scale`."""
        low, high = self.interval
        return f"{self.mean * scale:+.{digits}f}{unit} [{low * scale:+.{digits}f}, {high * scale:+.{digits}f}]"

    @property
    def verdict(self) -> str:
        low, high = self.interval
        return "better" if low > 0 else "worse" if high < 0 else "same"


def paired_difference(old: list[float], new: list[float]) -> PairedDifference:
    if len(old) != len(new) or not old:
        raise ReportMismatch(f"cannot pair {len(old)} scores with {len(new)}")
    diffs = [n - o for o, n in zip(old, new, strict=True)]
    n = len(diffs)
    se, unpaired = float("nan"), float("nan")
    if n > 1:
        se = statistics.stdev(diffs) / math.sqrt(n)
        unpaired = math.hypot(statistics.stdev(old), statistics.stdev(new)) / math.sqrt(n)
    return PairedDifference(
        mean=statistics.fmean(diffs),
        se=se,
        wins=sum(d > 0 for d in diffs),
        losses=sum(d < 0 for d in diffs),
        tasks=n,
        unpaired_se=unpaired,
    )


def compare_bits_per_byte(old: dict, new: dict) -> PairedDifference | None:
    """Held-out bits per byte, file by file: old - new (the bits per byte the new model saves: positive is better),
    over the files both reports scored on the same bytes. None when a report has no per-file numbers (written
    before they were kept, or run with --bpb-tokens 0) or they share no file."""
    before, after = old.get("bits_per_byte_files"), new.get("bits_per_byte_files")
    if not before or not after:
        return None
    shared = [name for name in after if name in before and before[name][1] == after[name][1] and after[name][1]]
    if not shared:
        return None
    old_rates = [before[name][0] / before[name][1] for name in shared]
    new_rates = [after[name][0] / after[name][1] for name in shared]
    return paired_difference(new_rates, old_rates)  # paired_difference(a, b) is b - a: here old - new


@dataclass(frozen=True)
class ConfigComparison:
    kind: str
    config: str
    exact_match: PairedDifference
    edit_similarity: PairedDifference
    tokens_per_forward: tuple[float, float]  # (old, new): a rate over all tasks, not a per-task score
    stutter: PairedDifference | None = None  # None: a report from before stutter was counted

    @property
    def stutter_verdict(self) -> str | None:
        """`worse` when the new model stutters more beyond noise (for stutter, up is worse), `better`, `same`."""
        if self.stutter is None:
            return None
        return {"better": "worse", "worse": "better"}.get(self.stutter.verdict, self.stutter.verdict)

    @property
    def worse(self) -> bool:
        """Worse beyond noise in a score, or in stutter."""
        return "worse" in (self.edit_similarity.verdict, self.exact_match.verdict, self.stutter_verdict)


def compare_reports(old: dict, new: dict) -> list[ConfigComparison]:
    """Every (kind, configuration) both reports ran, compared task by task. Raises ReportMismatch when a shared
    kind was run on different tasks, or a report predates per-task scores."""
    check_same_setup(old, new)
    out: list[ConfigComparison] = []
    for kind, new_rows in new["kinds"].items():
        if kind not in old["kinds"]:
            continue
        _check_same_tasks(old, new, kind)
        old_rows = {row["config"]: row for row in old["kinds"][kind]}
        out += [_compare_rows(kind, old_rows[row["config"]], row) for row in new_rows if row["config"] in old_rows]
    return out


COMPLETION_KINDS = ("line", "block")


@dataclass(frozen=True)
class Judgement:
    worse: list[ConfigComparison]  # judged rows where the new model is worse
    unjudged: list[str]  # judged pairs one of the reports lacks, said why


def regressions(
    old: dict, new: dict, served_config: str | None = None, previous_served_config: str | None = None
) -> Judgement:
    """Completion rows where the new model is worse, task by task, in edit similarity or exact match: AR against
    AR, and the served block configuration against the one served before (`previous_served_config`; the same
    configuration when None), which is what users notice. Only these rows are judged: the more rows tested, the
    more often one looks worse by chance (each test alone: about 1 in 40 for an equal model). A configuration
    served before that the old report lacks leaves its pair unjudged (named in `unjudged`; the others are still
    judged). Raises ReportMismatch when the reports ran different tasks or lack per-task scores, or when the new
    report lacks a row it is judged on (AR, or the configuration it would be served with): the new model can
    always be measured there, and unmeasured it would ship unjudged."""
    check_same_setup(old, new)
    pairs = [("ar", "ar")]
    if served_config is not None:
        pairs.append((previous_served_config or served_config, served_config))
    worse: list[ConfigComparison] = []
    unjudged: list[str] = []
    for kind in COMPLETION_KINDS:
        if kind not in old["kinds"] or kind not in new["kinds"]:  # not judged would mean not refused
            raise ReportMismatch(f"{kind} tasks are in one report only (evaluate both with the same --kinds)")
        _check_same_tasks(old, new, kind)
        for before, after in pairs:
            new_row = _row(new, kind, after, "the new report")
            try:
                old_row = _row(old, kind, before, "the old report")
            except ReportMismatch as exc:  # the old served row missing: only this pair goes unjudged
                unjudged.append(str(exc))
                continue
            r = _compare_rows(kind, old_row, new_row)  # no per-task scores: raises, as for the whole report
            if r.worse:
                worse.append(r)
    return Judgement(worse, unjudged)


def _compare_rows(kind: str, before: dict, after: dict) -> ConfigComparison:
    a, b = _task_scores(before, kind), _task_scores(after, kind)
    same = before["config"] == after["config"]
    stutter = None
    if "stutter" in a and "stutter" in b:
        stutter = paired_difference(a["stutter"], b["stutter"])
    return ConfigComparison(
        kind=kind,
        config=after["config"] if same else f"{after['config']} (was {before['config']})",
        exact_match=paired_difference(a["exact_match"], b["exact_match"]),
        edit_similarity=paired_difference(a["edit_similarity"], b["edit_similarity"]),
        tokens_per_forward=(before["tokens_per_forward"], after["tokens_per_forward"]),
        stutter=stutter,
    )


def _row(report: dict, kind: str, config: str, which: str) -> dict:
    row = next((r for r in report["kinds"][kind] if r["config"] == config), None)
    if row is None:
        raise ReportMismatch(f"{kind}: {which} has no {config!r} row (evaluate that configuration there too)")
    return row


def check_same_setup(a: dict, b: dict) -> None:
    """Raise ReportMismatch when two reports were made differently (Python and so its held-out files, dtype,
    token healing, fallback window, how tasks are shared among files). A key an older report lacks is not
    checked, unless SETUP_BEFORE_KEYS says what such reports did."""
    for key in SETUP_KEYS:
        first, second = a.get(key, SETUP_BEFORE_KEYS.get(key)), b.get(key, SETUP_BEFORE_KEYS.get(key))
        if first is not None and second is not None and first != second:
            shown = f"{first!r} vs {second!r}" if key != "heldout_files" else "other held-out files"
            raise ReportMismatch(f"the reports were made differently: {key} {shown}")


def _check_same_tasks(old: dict, new: dict, kind: str) -> None:
    if _task_names(old, kind) != _task_names(new, kind):
        raise ReportMismatch(f"{kind}: the reports ran different tasks (another --limit, --seed or --tasks?)")


def _task_names(report: dict, kind: str) -> list[str]:
    names = report.get("task_names", {}).get(kind)
    if names is None:
        raise ReportMismatch(f"{kind}: a report has no per-task scores (written before they were kept): rerun eval")
    return names


def _task_scores(row: dict, kind: str) -> dict[str, list[float]]:
    scores = row.get("task_scores")
    if scores is None:
        raise ReportMismatch(f"{kind} {row['config']}: no per-task scores in the report: rerun eval")
    out = {"exact_match": [float(x) for x in scores["exact_match"]], "edit_similarity": scores["edit_similarity"]}
    if "stutter" in scores:
        out["stutter"] = [float(x) for x in scores["stutter"]]
    return out


def format_comparison(rows: list[ConfigComparison]) -> str:
    """One line per configuration, e.g. `line ar  ES +0.004 [-0.002, +0.010] 61 up/48 down same  EM ...`."""

    def diff(d: PairedDifference, scale: float, digits: int, unit: str, verdict: str | None = None) -> str:
        return f"{d.span(scale, digits, unit)} {d.wins} up/{d.losses} down {verdict or d.verdict:<6}"

    lines = ["new - old, task by task (95% interval from the paired standard error)"]
    for r in rows:
        old_tpf, new_tpf = r.tokens_per_forward
        es, em = diff(r.edit_similarity, 1, 3, ""), diff(r.exact_match, 100, 1, "%")
        stutter = ""
        if r.stutter is not None:
            stutter = f"  stutter {diff(r.stutter, 100, 1, '%', r.stutter_verdict)}"
        lines.append(f"{r.kind:>7} {r.config:<24} ES {es}  EM {em}{stutter}  tok/fwd {old_tpf:.2f} -> {new_tpf:.2f}")
    return "\n".join(lines)


def format_bits_per_byte(old: dict, new: dict, saved: PairedDifference) -> str:
    """`held-out bits per byte 1.2735 -> 1.2650; old - new, file by file: +0.0085 [...] 40 up/2 down better`."""
    return (
        f"held-out bits per byte {old['bits_per_byte']:.4f} -> {new['bits_per_byte']:.4f}; old - new, file by file "
        f"({saved.tasks} files): {saved.span(digits=4)} {saved.wins} up/{saved.losses} down {saved.verdict}"
    )
