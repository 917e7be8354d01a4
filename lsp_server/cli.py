"""`parafill` command line: one subcommand per job, each a thin layer over the library."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from lsp_server import (
    cmd_bench,
    cmd_complete,
    cmd_eval,
    cmd_explain,
    cmd_generate,
    cmd_report,
    cmd_serve,
    cmd_train,
)
from lsp_server.errors import UserError

# name -> (help, add_arguments, run). Later subcommands register here.
SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "generate": ("generate text from a prompt (block diffusion or AR)", cmd_generate.add_arguments, cmd_generate.run),
    "serve": ("run the language server (stdio, or --tcp)", cmd_serve.add_arguments, cmd_serve.run),
    "complete": ("inline completion at FILE:LINE:COL (as the server)", cmd_complete.add_arguments, cmd_complete.run),
    "explain": ("explain FILE[:START-END] (as the server)", cmd_explain.add_arguments, cmd_explain.run),
    "eval": (
        "completion quality on held-out Python files, AR vs block diffusion",
        cmd_eval.add_arguments,
        cmd_eval.run,
    ),
    "report": (
        "compare two models' eval reports task by task, or merge reports of one model",
        cmd_report.add_arguments,
        cmd_report.run,
    ),
    "bench": (
        "latency vs span (block, AR, llama.cpp), quality vs threshold, prefix cache, LSP p50/p99",
        cmd_bench.add_arguments,
        cmd_bench.run,
    ),
    "corpus": (
        "build a tokenized corpus of Python source for training",
        cmd_train.add_corpus,
        cmd_train.run_corpus_command,
    ),
    "train": (
        "train or fine-tune a model (AR, then block diffusion)",
        cmd_train.add_train,
        cmd_train.run_train_command,
    ),
    "distill-set": (
        "self-distillation rows for parallel decoding: real prompts + the model's greedy continuations",
        cmd_train.add_distill,
        cmd_train.run_distill_command,
    ),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one clear line, exit 2 (argparse prints usage too)
        print(f"parafill: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="parafill", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (help_text, add_arguments, _) in SUBCOMMANDS.items():
        add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _, _, run = SUBCOMMANDS[args.command]
    try:
        return run(args)
    except UserError as exc:
        print(f"parafill: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
