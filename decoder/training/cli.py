"""`parafill train` (and `parafill corpus`) arguments and entry points; lsp_server.cli wires them in."""

from __future__ import annotations

import argparse
import json

from decoder.compute_dtype import COMPUTE_DTYPES
from decoder.training.config import TrainConfig, default_threads
from decoder.training.distill import DistillSetConfig, build_distill_set
from decoder.training.prepare import add_corpus_arguments, run_corpus
from decoder.training.sizes import SIZES
from decoder.training.trainer import Trainer
from decoder.training.validation import evaluate_folder

__all__ = [
    "add_corpus_arguments",
    "add_distill_arguments",
    "add_train_arguments",
    "run_corpus",
    "run_distill",
    "run_train",
]


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    d = TrainConfig(corpus="", run_dir="")
    parser.add_argument("--corpus", required=True, help="corpus folder built by `parafill corpus` (shards + tokenizer)")
    parser.add_argument(
        "--mix-corpus",
        default=None,
        help="a second corpus folder (same tokenizer) to draw --mix-rate of the document rows from",
    )
    parser.add_argument(
        "--mix-rate",
        type=float,
        default=d.mix_rate,
        help="share of document rows from --mix-corpus (e.g. 0.3: the stdlib keeps most of its share)",
    )
    parser.add_argument("--run", help="run folder (log, checkpoint); e.g. runs/cpu-5m")
    parser.add_argument("--size", default=d.size, choices=sorted(SIZES))
    parser.add_argument("--seq-len", type=int, default=d.seq_len)
    parser.add_argument("--batch-size", type=int, default=d.batch_size)
    parser.add_argument("--lr", type=float, default=d.lr)
    parser.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--time-budget-minutes", type=float, default=None)
    parser.add_argument(
        "--ar-fraction",
        type=float,
        default=d.ar_fraction,
        help="share of the run spent on AR-only pretraining before the joint objective",
    )
    parser.add_argument("--block-sizes", default=",".join(map(str, d.block_sizes)))
    parser.add_argument("--fim-rate", type=float, default=d.fim_rate)
    parser.add_argument("--explain-rate", type=float, default=d.explain_rate)
    parser.add_argument("--eval-every-minutes", type=float, default=d.eval_every_minutes)
    parser.add_argument("--eval-windows", type=int, default=d.eval_windows)
    parser.add_argument("--checkpoint-every-minutes", type=float, default=d.checkpoint_every_minutes)
    parser.add_argument("--export-every-minutes", type=float, default=d.export_every_minutes)
    parser.add_argument("--export", default=None, help="write the HF model folder here (periodically and at the end)")
    parser.add_argument(
        "--dtype", default=d.dtype, choices=COMPUTE_DTYPES, help="autocast dtype (auto: bf16 where it is native)"
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (pays on GPU)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: min(2, cores))")
    parser.add_argument(
        "--adaptive-threads",
        action="store_true",
        help="on a shared CPU: keep measuring 1..threads threads and use the fastest",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--init-from", default=None, help="start from this model folder's weights")
    parser.add_argument(
        "--grow-layers",
        type=int,
        default=None,
        help="grow the --init-from model to this many layers first; it computes the same until trained",
    )
    parser.add_argument(
        "--grown-lr-scale",
        type=float,
        default=d.grown_lr_scale,
        help="learning-rate multiplier of the layers --grow-layers adds",
    )
    parser.add_argument(
        "--distill-set",
        default=None,
        help="folder from `parafill distill-set`: mix self-distillation rows into the joint stage",
    )
    parser.add_argument("--distill-rate", type=float, default=d.distill_rate, help="share of joint batches")
    parser.add_argument(
        "--certainty-weight",
        type=float,
        default=d.certainty_weight,
        help="certainty forcing on distill batches: weight of the entropy of right masked predictions (0: off)",
    )
    parser.add_argument(
        "--schedule",
        default=d.schedule,
        choices=("cosine", "wsd"),
        help="learning rate after warmup: cosine over the run, or wsd: the peak rate, then cosine over the last "
        "--decay-fraction (the state where the decay begins is kept in RUN/checkpoint-stable)",
    )
    parser.add_argument("--decay-fraction", type=float, default=d.decay_fraction, help="wsd: share of the run decaying")
    parser.add_argument("--resume", action="store_true", help="continue from RUN/checkpoint")
    parser.add_argument(
        "--resume-stable",
        action="store_true",
        help="continue from RUN/checkpoint-stable, a wsd run before its decay (implies --resume; give a longer budget)",
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--eval-only",
        action="store_true",
        help="print the --init-from model's validation bits per byte on --corpus (--eval-windows windows) as JSON "
        "and exit; no training, --run not needed",
    )


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        corpus=args.corpus,
        mix_corpus=args.mix_corpus,
        mix_rate=args.mix_rate,
        run_dir=args.run,
        size=args.size,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        max_steps=args.max_steps,
        time_budget_minutes=args.time_budget_minutes,
        ar_fraction=args.ar_fraction,
        block_sizes=tuple(int(b) for b in args.block_sizes.split(",")),
        fim_rate=args.fim_rate,
        explain_rate=args.explain_rate,
        eval_every_minutes=args.eval_every_minutes,
        eval_windows=args.eval_windows,
        checkpoint_every_minutes=args.checkpoint_every_minutes,
        export_every_minutes=args.export_every_minutes,
        export_dir=args.export,
        dtype=args.dtype,
        compile=args.compile,
        threads=args.threads or (default_threads() if args.device == "cpu" else None),
        adaptive_threads=args.adaptive_threads,
        device=args.device,
        seed=args.seed,
        init_from=args.init_from,
        grow_layers=args.grow_layers,
        grown_lr_scale=args.grown_lr_scale,
        distill_set=args.distill_set,
        distill_rate=args.distill_rate,
        certainty_weight=args.certainty_weight,
        schedule=args.schedule,
        decay_fraction=args.decay_fraction,
        resume=args.resume or args.resume_stable,
        resume_stable=args.resume_stable,
        progress=not args.no_progress,
    )


def run_train(args: argparse.Namespace) -> int:
    if args.eval_only:
        return run_eval_only(args)
    if not args.run:
        raise SystemExit("give --run (the run folder)")
    cfg = config_from_args(args)
    if cfg.max_steps is None and cfg.time_budget_minutes is None:
        raise SystemExit("give --max-steps or --time-budget-minutes")
    result = Trainer(cfg, log=print).fit()
    print(json.dumps(result, indent=1, default=str))
    return 0


def run_eval_only(args: argparse.Namespace) -> int:
    """Validation bits per byte of a model folder on a corpus's validation windows: the numbers a run logs at its
    evals, for any model on any corpus built with its tokenizer (e.g. the shipped model on a wider corpus)."""
    if not args.init_from:
        raise SystemExit("--eval-only scores a model folder: give --init-from")
    scores, trainer = evaluate_folder(config_from_args(args))
    result = {
        "model": args.init_from,
        "corpus": args.corpus,
        "windows": len(trainer.val),
        "seq_len": trainer.cfg.seq_len,
        "dtype": trainer.cfg.dtype,
        **{k: round(v, 5) for k, v in scores.items()},
    }
    print(json.dumps(result, indent=1))
    return 0


def add_distill_arguments(parser: argparse.ArgumentParser) -> None:
    d = DistillSetConfig(model="", corpus="", out="")
    parser.add_argument("--model", required=True, help="model folder whose greedy continuations are the targets")
    parser.add_argument("--corpus", required=True, help="corpus folder the prompts come from (its train split)")
    parser.add_argument("--out", required=True, help="folder to write (rows.npy, distill.json)")
    parser.add_argument("--rows", type=int, default=d.rows)
    parser.add_argument("--prompt-len", type=int, default=d.prompt_len, help="a multiple of every block size")
    parser.add_argument("--gen-len", type=int, default=d.gen_len)
    parser.add_argument("--batch-size", type=int, default=d.batch_size)
    parser.add_argument("--fim-rate", type=float, default=d.fim_rate)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--dtype", default=d.dtype, choices=COMPUTE_DTYPES, help="auto: bf16 where it is native, else fp32"
    )


def run_distill(args: argparse.Namespace) -> int:
    cfg = DistillSetConfig(
        model=args.model,
        corpus=args.corpus,
        out=args.out,
        rows=args.rows,
        prompt_len=args.prompt_len,
        gen_len=args.gen_len,
        batch_size=args.batch_size,
        fim_rate=args.fim_rate,
        seed=args.seed,
        threads=args.threads,
        dtype=args.dtype,
    )
    print(build_distill_set(cfg))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m decoder.training.cli")
    sub = parser.add_subparsers(dest="cmd", required=True)
    add_train_arguments(sub.add_parser("train", help="train (or continue training) a model"))
    add_corpus_arguments(sub.add_parser("corpus", help="build a corpus folder (manifest, tokenizer, shards)"))
    add_distill_arguments(sub.add_parser("distill-set", help="self-distillation rows: prompts + greedy continuations"))
    args = parser.parse_args(argv)
    run = {"train": run_train, "corpus": run_corpus, "distill-set": run_distill}[args.cmd]
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
