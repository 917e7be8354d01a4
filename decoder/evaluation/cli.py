"""`parafill eval`: AR and block diffusion at several thresholds, side by side, on held-out files; and the
explain route on their documented functions."""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

from decoder.engine import Engine
from decoder.evaluation.metrics import gate_value
from decoder.evaluation.parallel import RowJob, run_rows, split_configs
from decoder.evaluation.plots import plot_confidence_coverage, plot_quality_vs_parallelism
from decoder.evaluation.reports import report_json
from decoder.evaluation.runner import DecodeConfig, aggregate_bits_per_byte, bits_by_file
from decoder.evaluation.tasks import (
    TASK_ALLOCATION,
    TASK_LINES,
    build_tasks,
    explain_tasks,
    load_tasks,
    stdlib_heldout_files,
    wheel_heldout_files,
)
from decoder.families import CAUSAL
from decoder.machine import load_average, machine_info

MAX_NEW_TOKENS = {"line": 48, "block": 128, "explain": 128}  # per task kind: room for its longest targets


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kinds",
        default="line,block,explain",
        help="task kinds: line (rest of line), block, explain (the explain route, AR configurations only)",
    )
    parser.add_argument("--limit", type=int, default=100, help="tasks per kind")
    parser.add_argument("--thresholds", default="0.9,0.7,0.5", help="block-diffusion thresholds")
    parser.add_argument("--block-size", type=int, default=8)
    parser.add_argument(
        "--fallback-window",
        type=int,
        default=None,
        help="when no position passes the threshold, commit the most confident of the leftmost N "
        "(default: the causal family's, as the server decodes parafill's own models)",
    )
    parser.add_argument("--no-ar", action="store_true", help="skip the AR baseline")
    parser.add_argument(
        "--lookup", type=int, default=0, help="also AR with prompt-lookup drafts of up to this many tokens"
    )
    parser.add_argument(
        "--block-lookup",
        type=int,
        default=0,
        help="also each block threshold with prompt-lookup agreement (drafts of up to this many tokens)",
    )
    parser.add_argument("--no-healing", action="store_true", help="turn token healing off")
    parser.add_argument(
        "--defer-repeats",
        action="store_true",
        help="block decoding: a position whose token its open left neighbour also predicts waits a step (measured, "
        "not served: docs/training.md)",
    )
    parser.add_argument("--tasks", help="JSONL task file instead of the standard-library held-out set")
    parser.add_argument(
        "--heldout-corpus",
        help="held-out files from the wheels in this corpus folder's validation split (third-party code) instead "
        "of the standard-library set; near-copies of this interpreter's stdlib and site-packages are left out",
    )
    parser.add_argument("--bpb-tokens", type=int, default=40_000, help="tokens for bits per byte (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="worker processes, each with its own model, that share the rows (kind x configuration) and the "
        "cores; with --dtype fp32 the rows are those of one process, latencies are measured while the others run",
    )
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--plot", help="write a PNG of quality vs tokens per forward here")
    parser.add_argument(
        "--coverage-plot", help="write a PNG of quality vs the share of completions a confidence gate keeps"
    )


def run_eval(
    args: argparse.Namespace, engine: Engine, model_name: str, open_engine: Callable[[], Engine] | None = None
) -> dict:
    """`open_engine` (picklable; opens the same model as `engine`) is needed for `--jobs` > 1."""
    if args.jobs > 1 and open_engine is None:
        raise ValueError("--jobs > 1 needs a way to open the model in each worker")
    files = wheel_heldout_files(args.heldout_corpus) if args.heldout_corpus else stdlib_heldout_files()
    if not files:
        raise SystemExit(f"no held-out files in {args.heldout_corpus}: its validation split holds no wheel files")
    kinds = [k for k in args.kinds.split(",") if k]
    configs = [] if args.no_ar else [DecodeConfig("ar", block_size=args.block_size)]
    configs += [DecodeConfig("ar", lookup_tokens=args.lookup)] if args.lookup else []
    thresholds = [float(t) for t in args.thresholds.split(",") if t]
    configs += [DecodeConfig("block", t, args.block_size) for t in thresholds]
    configs += [DecodeConfig("block", t, args.block_size, args.block_lookup) for t in thresholds if args.block_lookup]
    fallback_window = args.fallback_window or CAUSAL.fallback_window
    report = {
        "model": model_name,
        "python": platform.python_version(),
        "machine": machine_info(),  # where `seconds` and the latency figures were measured
        "dtype": str(getattr(engine, "dtype", "")).removeprefix("torch."),
        "heldout": f"wheel files of {args.heldout_corpus}'s validation split" if args.heldout_corpus else "stdlib",
        "heldout_files": [f.name for f in files],
        "task_allocation": TASK_ALLOCATION,
        "task_lines": TASK_LINES,
        "edit_similarity": "1 - Levenshtein(prediction, target) / max(len), stripped",
        "exact_match": "prediction.split() == target.split()",
        "stutter": "the prediction has more words followed on their line by the same word than the target",
        "explain_target": "explain tasks: the explanation's first non-empty line against the docstring's first line",
        "latency": "one request per task and configuration, its prompt already in the prefix cache (prefilled once "
        "per task by an untimed request): the prompt's last tokens and the decoding",
        "token_healing": not args.no_healing,
        "fallback_window": fallback_window,
        "defer_repeats": args.defer_repeats,
        "jobs": args.jobs,
        "kinds": {},
        "task_names": {},
    }
    started = time.perf_counter()
    if args.bpb_tokens:
        by_file = bits_by_file(engine, {f.name: f.text for f in files}, args.bpb_tokens)
        report["bits_per_byte"] = round(aggregate_bits_per_byte(by_file.values()), 4)
        # (bits, bytes) per file, so that `parafill report compare` can pair two models file by file
        report["bits_per_byte_files"] = {name: [round(bits, 3), n] for name, (bits, n) in by_file.items()}
        print(f"bits per byte on held-out files: {report['bits_per_byte']}", file=sys.stderr)
    row_jobs: list[RowJob] = []
    for kind in kinds:
        if kind == "explain":  # the explain route decodes AR; block rows would measure no product path
            tasks, kind_configs = explain_tasks(files, args.limit, args.seed), [c for c in configs if c.mode == "ar"]
        else:
            tasks = load_tasks(args.tasks) if args.tasks else build_tasks(files, kind, args.limit, args.seed)
            tasks, kind_configs = [t for t in tasks if t.kind == kind][: args.limit], configs
        if kind_configs:
            report["task_names"][kind] = [t.name for t in tasks]
        # One job per process and kind, so that each process prefills a task once per job (run_configs).
        row_jobs += [
            RowJob(kind, tasks, group, MAX_NEW_TOKENS, not args.no_healing, fallback_window, args.defer_repeats)
            for group in split_configs(kind_configs, args.jobs)
        ]

    def show(job: RowJob, row: dict) -> None:
        print(_format_row(job.kind, row), file=sys.stderr)
        print(_format_coverage(row), file=sys.stderr)

    if args.jobs > 1 and len(row_jobs) > 1 and open_engine is not None:
        job_rows = run_rows(row_jobs, min(args.jobs, len(row_jobs)), open_engine, show)
    else:
        job_rows = []
        for job in row_jobs:
            job_rows.append(job.run(engine))
            for row in job_rows[-1]:
                show(job, row)
    for job, rows in zip(row_jobs, job_rows, strict=True):
        report["kinds"].setdefault(job.kind, []).extend(rows)
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["machine"]["load_average_end"] = load_average()
    if args.json:
        Path(args.json).write_text(report_json(report) + "\n", encoding="utf-8")
    if args.plot and report["kinds"]:
        plot_quality_vs_parallelism(report, args.plot)
    if args.coverage_plot and report["kinds"]:
        plot_confidence_coverage(report, args.coverage_plot)
    return report


def _format_row(kind: str, row: dict) -> str:
    arness, se, em_se = row["ar_ness_leftmost_fraction"], row.get("edit_similarity_se"), row.get("exact_match_se")
    return (
        f"{kind:>5} {row['config']:<20} EM {row['exact_match'] * 100:5.1f}%"
        f"{'' if em_se is None else f' ±{em_se * 100:.1f}'}  ES {row['edit_similarity']:.3f}"
        f"{'' if se is None else f' ±{se:.3f}'}  "
        f"tok/fwd {row['tokens_per_forward']:.2f}  AR-ness {'-' if arness is None else f'{arness:.2f}'}  "
        f"stutter {row.get('stutter_rate') or 0.0:.1%}  "
        f"p50 {row['latency_ms_p50']:.0f} ms"
    )


def _format_coverage(row: dict) -> str:
    """`keep 75% (>= 0.12): ES 0.223 EM 3.8%, 50% (...` for each share a confidence gate would keep."""
    parts = [
        f"{c['keep']:.0%} (>= {gate_value(c['min_confidence'], 2):.2f}): "
        f"ES {c['edit_similarity']:.3f} EM {c['exact_match']:.1%}"
        for c in row.get("confidence_coverage", [])
        if c["keep"] < 1.0
    ]
    return "        keep " + ", ".join(parts) if parts else ""
