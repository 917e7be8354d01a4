"""`parafill corpus` and `parafill train`: the training library behind one-line errors for bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from decoder.training.cli import add_train_arguments, run_train
from decoder.training.prepare import add_corpus_arguments, run_corpus
from lsp_server.errors import UserError

add_corpus = add_corpus_arguments
add_train = add_train_arguments


def run_corpus_command(args: argparse.Namespace) -> int:
    for folder in [*(args.wheels or []), *(args.folder or [])]:
        if not Path(folder).is_dir():
            raise UserError(f"not a folder: {folder}")
    if args.tokenizer and not Path(args.tokenizer).exists():
        raise UserError(f"tokenizer file {args.tokenizer} does not exist")
    return run_corpus(args)


def run_train_command(args: argparse.Namespace) -> int:
    corpus = Path(args.corpus)
    missing = [name for name in ("tokenizer.json", "shards.json") if not (corpus / name).is_file()]
    if missing:
        missing_text = ", ".join(missing)
        raise UserError(f"{corpus} is not a corpus folder (missing {missing_text}): build one with parafill corpus")
    if args.init_from and not Path(args.init_from, "config.json").is_file():
        raise UserError(f"--init-from {args.init_from}: no config.json there")
    if args.max_steps is None and args.time_budget_minutes is None:
        raise UserError("give --max-steps or --time-budget-minutes")
    return run_train(args)
