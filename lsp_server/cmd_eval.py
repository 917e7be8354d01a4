"""`parafill eval`: completion quality of a model on held-out Python files (see decoder/evaluation)."""

from __future__ import annotations

import argparse

from decoder.defaults import default_model_dir
from decoder.evaluation.cli import add_eval_arguments, run_eval
from lsp_server.cmd_generate import add_model_arguments
from lsp_server.model_loading import open_engine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_eval_arguments(parser)


def run(args: argparse.Namespace) -> int:
    engine = open_engine(args.model, args.device, args.dtype, backend=args.backend)
    run_eval(args, engine, str(args.model or default_model_dir()))
    return 0
