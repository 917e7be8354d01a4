"""`parafill eval`: completion quality of a model on held-out Python files (see decoder/evaluation)."""

from __future__ import annotations

import argparse
import json
from functools import partial

from decoder.defaults import default_model_dir
from decoder.evaluation.cli import add_eval_arguments, run_eval
from decoder.evaluation.tasks import load_tasks
from lsp_server.cmd_generate import add_model_arguments
from lsp_server.cmd_paths import check_output_file
from lsp_server.errors import UserError
from lsp_server.model_loading import open_engine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_eval_arguments(parser)


KINDS = ("line", "block", "explain")


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse bad numbers and names before the model loads, in one line each (not a traceback mid-run)."""
    kinds = [k for k in args.kinds.split(",") if k]
    if not kinds or any(k not in KINDS for k in kinds):
        raise UserError(f"--kinds takes a comma-separated list of {', '.join(KINDS)}; got {args.kinds!r}")
    try:
        thresholds = [float(t) for t in args.thresholds.split(",") if t]
    except ValueError:
        raise UserError(f"--thresholds takes comma-separated numbers in [0, 1]; got {args.thresholds!r}") from None
    if any(not 0.0 <= t <= 1.0 for t in thresholds):
        raise UserError(f"--thresholds must lie in [0, 1]; got {args.thresholds!r}")
    for name in ("limit", "block_size"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be >= 1")
    if args.lookup < 0 or args.bpb_tokens < 0:
        raise UserError("--lookup and --bpb-tokens must be >= 0")
    if args.jobs < 1:
        raise UserError("--jobs must be >= 1")
    if args.tasks:
        check_tasks(args.tasks)
    check_output_file(args.json, "--json")
    check_output_file(args.plot, "--plot")
    check_output_file(args.coverage_plot, "--coverage-plot")


def check_tasks(path: str) -> None:
    """Read the task file once up front (it is small): a bad one fails before the model loads."""
    try:
        tasks = load_tasks(path)
    except OSError as exc:
        raise UserError(f"cannot read --tasks {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise UserError(f"--tasks {path} is not a JSONL file of tasks: {exc}") from None
    if not tasks:
        raise UserError(f"--tasks {path} holds no tasks")


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    opener = partial(open_engine, args.model, args.device, args.dtype, backend=args.backend)
    run_eval(args, opener(), str(args.model or default_model_dir()), opener)
    return 0
