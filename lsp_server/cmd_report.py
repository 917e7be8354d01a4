"""`parafill report`: `parafill eval` reports after the fact, no model loaded.

parafill report compare OLD.json NEW.json   # task by task: is NEW better, worse, or within the noise?
parafill report merge A.json B.json --json OUT.json --plot OUT.png   # kinds evaluated in separate processes
parafill report thresholds REPORT.json [--also WHEELS.json] [--by-file 0.15]   # the served-threshold rule's tests
"""

from __future__ import annotations

import argparse
from pathlib import Path

from decoder.evaluation.reports import (
    ConfigComparison,
    PairedDifference,
    ReportMismatch,
    compare_bits_per_byte,
    compare_reports,
    format_bits_per_byte,
    format_comparison,
    merge_reports,
    report_json,
)
from decoder.evaluation.threshold_choice import MARGINS, strictest_choice, threshold_tests
from decoder.evaluation.threshold_report import NoBlockRows, block_sizes, format_threshold_tests, losses_by_file
from lsp_server.cmd_paths import check_output_file, read_json_file
from lsp_server.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, parser_class=type(parser))
    compare = actions.add_parser("compare", help="paired differences between two models' reports (same tasks)")
    compare.add_argument("old", help="report of the model in use (e.g. benchmarks/results/eval_default_cpu.json)")
    compare.add_argument("new", help="report of the candidate")
    compare.add_argument("--json", help="also write the comparison here")
    merge = actions.add_parser("merge", help="one report from reports of one model that ran different kinds")
    merge.add_argument("reports", nargs="+")
    merge.add_argument("--json", required=True, help="write the merged report here")
    merge.add_argument("--model", help="the model name to record (default: the first report's)")
    merge.add_argument("--plot", help="write a PNG of quality vs tokens per forward here")
    merge.add_argument("--coverage-plot", help="write a PNG of quality vs the share a confidence gate keeps")
    thresholds = actions.add_parser(
        "thresholds", help="the served-threshold rule's test of each measured threshold, as `ship` made it"
    )
    thresholds.add_argument("report")
    thresholds.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="REPORT",
        help="another held-out set's report of the same model (third-party code): its tests too, and the threshold "
        "served when it must hold on every report, as `ship --wheel-eval` chooses it",
    )
    thresholds.add_argument("--block-size", type=int, help="the block rows to test (default: the report's only one)")
    thresholds.add_argument(
        "--by-file", type=float, metavar="T", help="also: where threshold T's loss comes from, held-out file by file"
    )
    thresholds.add_argument(
        "--metric", choices=sorted(MARGINS), default="edit_similarity", help="the loss --by-file breaks down"
    )


def load_report(path: str) -> dict:
    report = read_json_file(path, "report")
    if not isinstance(report, dict) or not isinstance(report.get("kinds"), dict):
        raise UserError(f"{path} is not a `parafill eval` report (no 'kinds')")
    return report


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "compare":
            return _compare(args)
        if args.action == "thresholds":
            return _thresholds(args)
        return _merge(args)
    except (ReportMismatch, NoBlockRows) as exc:
        raise UserError(str(exc)) from None


def _compare(args: argparse.Namespace) -> int:
    check_output_file(args.json, "--json")
    old, new = load_report(args.old), load_report(args.new)
    rows = compare_reports(old, new)
    if not rows:
        raise UserError("the reports share no kind and configuration to compare")
    print(format_comparison(rows))
    saved = compare_bits_per_byte(old, new)
    if saved is not None:
        print(format_bits_per_byte(old, new, saved))
    if args.json:
        out: dict = {"old": args.old, "new": args.new, "rows": [_comparison_json(r) for r in rows]}
        if saved is not None:
            out["bits_per_byte"] = {
                "old": old["bits_per_byte"],
                "new": new["bits_per_byte"],
                "saved_per_file": _difference_json(saved, saved.verdict),
            }
        Path(args.json).write_text(report_json(out) + "\n")
    return 0


def _difference_json(d: PairedDifference, verdict: str) -> dict:
    return {**vars(d), "interval": list(d.interval), "verdict": verdict}


def _comparison_json(r: ConfigComparison) -> dict:
    row = {
        "kind": r.kind,
        "config": r.config,
        "exact_match": _difference_json(r.exact_match, r.exact_match.verdict),
        "edit_similarity": _difference_json(r.edit_similarity, r.edit_similarity.verdict),
    }
    if r.stutter is not None and r.stutter_verdict is not None:  # reports from before stutter was counted: none
        row["stutter"] = _difference_json(r.stutter, r.stutter_verdict)
    row["tokens_per_forward"] = {"old": r.tokens_per_forward[0], "new": r.tokens_per_forward[1]}
    return row


def _merge(args: argparse.Namespace) -> int:
    from decoder.evaluation.plots import plot_confidence_coverage, plot_quality_vs_parallelism

    for value, flag in ((args.json, "--json"), (args.plot, "--plot"), (args.coverage_plot, "--coverage-plot")):
        check_output_file(value, flag)
    merged = merge_reports([load_report(p) for p in args.reports], args.model)
    Path(args.json).write_text(report_json(merged) + "\n", encoding="utf-8")
    if args.plot:
        plot_quality_vs_parallelism(merged, args.plot)
    if args.coverage_plot:
        plot_confidence_coverage(merged, args.coverage_plot)
    print(f"{args.json}: kinds {', '.join(merged['kinds'])} from {len(args.reports)} reports")
    return 0


def _thresholds(args: argparse.Namespace) -> int:
    report = load_report(args.report)
    block_size = args.block_size
    if block_size is None:
        sizes = block_sizes(report)
        if len(sizes) != 1:
            measured = ", ".join(map(str, sizes)) or "none"
            raise UserError(f"{args.report} has block rows at block sizes {measured}: name one with --block-size")
        block_size = sizes[0]
    by_file = None if args.by_file is None else losses_by_file(report, block_size, args.by_file, args.metric)
    others = [load_report(path) for path in args.also]
    for path, other in zip(args.also, others, strict=True):  # before anything is printed
        if not threshold_tests(other, block_size):
            raise UserError(f"{path} has no block-decoder rows at B={block_size} on shared thresholds")
    print(format_threshold_tests(report, block_size))
    for path, other in zip(args.also, others, strict=True):
        print(f"\n{path}:\n{format_threshold_tests(other, block_size)}")
    if others:
        choice = strictest_choice([report, *others], block_size)
        assert choice is not None  # the first report's tests printed above
        print(f"\nserved with every report: t={choice.threshold:g}")
    if by_file is not None:
        print("\n" + by_file)
    return 0
