"""`parafill corpus` and `parafill train`: the training library behind one-line errors for bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from decoder.checkpoint import CheckpointError, read_config
from decoder.training.cli import add_distill_arguments, add_train_arguments, run_distill, run_train
from decoder.training.prepare import add_corpus_arguments, run_corpus
from lsp_server.cmd_paths import check_output_folder
from lsp_server.errors import UserError

add_corpus = add_corpus_arguments
add_train = add_train_arguments
add_distill = add_distill_arguments


def _require_corpus(corpus: Path) -> None:
    missing = [name for name in ("tokenizer.json", "shards.json") if not (corpus / name).is_file()]
    if missing:
        missing_text = ", ".join(missing)
        raise UserError(f"{corpus} is not a corpus folder (missing {missing_text}): build one with parafill corpus")


def _shard_tokens(corpus: Path, name: str) -> int:
    shard = corpus / f"{name}.bin"
    return shard.stat().st_size // 2 if shard.is_file() else 0  # uint16 tokens


def _require_rows(corpus: Path, seq_len: int) -> None:
    """The trainer samples rows of seq_len + 1 tokens from the train split and evaluates on windows of the
    validation split: a corpus with less fails deep inside numpy (an empty shard cannot even be mapped)."""
    train, val = _shard_tokens(corpus, "train"), _shard_tokens(corpus, "val")
    if train <= seq_len + 1 or val < seq_len:
        raise UserError(
            f"{corpus} is too small to train on: {train} train and {val} validation tokens for rows of "
            f"--seq-len {seq_len}: build a larger corpus (or lower --seq-len)"
        )


def run_corpus_command(args: argparse.Namespace) -> int:
    for folder in [*(args.wheels or []), *(args.folder or [])]:
        if not Path(folder).is_dir():
            raise UserError(f"not a folder: {folder}")
    if args.tokenizer and not Path(args.tokenizer).exists():
        raise UserError(f"tokenizer file {args.tokenizer} does not exist")
    if args.max_mb is not None and not args.max_mb > 0:
        raise UserError(f"--max-mb {args.max_mb:g}: give a positive size")
    check_output_folder(args.out, "--out")
    code = run_corpus(args)
    if _shard_tokens(Path(args.out), "train") == 0:  # no source found: say so rather than leave an empty corpus
        raise UserError(f"found no Python source for the corpus: {args.out} is empty (check --folder and --wheels)")
    return code


def run_train_command(args: argparse.Namespace) -> int:
    _require_corpus(Path(args.corpus))
    _require_rows(Path(args.corpus), args.seq_len)
    if args.distill_set and not Path(args.distill_set, "distill.json").is_file():
        raise UserError(f"--distill-set {args.distill_set}: no distill.json there (build it with parafill distill-set)")
    if not 0.0 <= args.distill_rate <= 1.0:
        raise UserError(f"--distill-rate {args.distill_rate}: give a share between 0 and 1")
    if args.init_from and not Path(args.init_from, "config.json").is_file():
        raise UserError(f"--init-from {args.init_from}: no config.json there")
    if args.grow_layers is not None:
        _check_growth(args)
    if args.eval_only:
        if not args.init_from:
            raise UserError("--eval-only scores a model folder: give --init-from")
        check_output_folder(args.run, "--run")
        return run_train(args)
    if not args.run:
        raise UserError("give --run (the run folder)")
    if args.max_steps is None and args.time_budget_minutes is None:
        raise UserError("give --max-steps or --time-budget-minutes")
    check_output_folder(args.run, "--run")
    check_output_folder(args.export, "--export")
    return run_train(args)


def _check_growth(args: argparse.Namespace) -> None:
    if not args.init_from:
        raise UserError("--grow-layers grows the --init-from model: give --init-from")
    if args.resume:
        return  # the run's checkpoint already has the grown depth; the trainer grows again before loading it
    try:
        layers = read_config(Path(args.init_from)).num_hidden_layers
    except CheckpointError as exc:
        raise UserError(f"--init-from {args.init_from}: {exc}") from exc
    if args.grow_layers < layers:
        raise UserError(
            f"--grow-layers {args.grow_layers}: the --init-from model has {layers} layers; give at least that"
        )
    if args.grown_lr_scale <= 0:
        raise UserError(f"--grown-lr-scale {args.grown_lr_scale}: give a positive multiplier")


def run_distill_command(args: argparse.Namespace) -> int:
    _require_corpus(Path(args.corpus))
    if not Path(args.model, "config.json").is_file():
        raise UserError(f"--model {args.model}: no config.json there")
    if args.rows < 1 or args.gen_len < 1 or args.prompt_len < 1 or args.batch_size < 1:
        raise UserError("--rows, --prompt-len, --gen-len and --batch-size must be positive")
    check_output_folder(args.out, "--out")
    return run_distill(args)
