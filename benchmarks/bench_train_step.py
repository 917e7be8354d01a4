"""Seconds per joint training step on CPU, two variants side by side: bf16 vs fp32 autocast, eager vs
`torch.compile`, or the dense [2L, 2L] attention mask vs the JointMask the objective uses (decoder/masks.py).

Two trainers start from the same weights in one process; rounds of a few steps alternate between them, so
machine noise falls on both. Each variant's first steps (warm-up; for `torch.compile`, the compilation) are
timed apart.

    .venv/bin/python benchmarks/bench_train_step.py --compare dtype|compile|mask [--corpus data/corpus] [--rounds 4]
        [--steps-per-round 4] [--threads 2] [--model models/default]

Needs a tokenized corpus (`parafill corpus --out data/corpus --tokenizer models/default/tokenizer.json`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace

import torch

from decoder.compute_dtype import cpu_has_native_bf16
from decoder.defaults import default_model_dir
from decoder.masks import joint_training_mask, training_mask
from decoder.training import objective
from decoder.training.config import TrainConfig
from decoder.training.trainer import Trainer

# Each comparison: two named variants, as TrainConfig fields over the common base (fp32).
COMPARISONS: dict[str, dict[str, dict[str, object]]] = {
    "dtype": {"bf16": {"dtype": "bf16"}, "fp32": {"dtype": "fp32"}},
    "compile": {"eager": {"compile": False}, "compiled": {"compile": True}},
    "mask": {"dense mask": {"dtype": "auto"}, "joint mask": {"dtype": "auto"}},  # in the dtype training runs in
}
# The "mask" variants differ in what the joint objective builds as its attention mask, not in their config.
MASK_BUILDERS = {"dense mask": training_mask, "joint mask": joint_training_mask}


def seconds_per_step(tr: Trainer, steps: int, variant: str = "") -> float:
    objective.joint_training_mask = MASK_BUILDERS.get(variant, joint_training_mask)
    try:
        started = time.perf_counter()
        for _ in range(steps):
            tr.train_step()
        return (time.perf_counter() - started) / steps
    finally:
        objective.joint_training_mask = joint_training_mask  # what the objective uses outside this benchmark


def compare(
    base: TrainConfig, variants: dict[str, dict[str, object]], rounds: int, steps_per_round: int, warmup_steps: int
) -> dict[str, float]:
    """Median seconds per step of each variant of `base`, rounds alternating between them."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="parafill-train-step-bench-") as scratch:
        trainers = {
            name: Trainer(replace(base, run_dir=f"{scratch}/{name}", **fields))  # type: ignore[arg-type]
            for name, fields in variants.items()
        }
        for name, tr in trainers.items():
            warm = warmup_steps * seconds_per_step(tr, warmup_steps, name)
            print(f"{name}: first {warmup_steps} steps {warm:.1f} s (warm-up)", flush=True)
        for r in range(rounds):
            for name, tr in trainers.items():
                times[name].append(seconds_per_step(tr, steps_per_round, name))
            print(f"round {r + 1}: " + ", ".join(f"{n} {t[-1]:.3f} s/step" for n, t in times.items()), flush=True)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", choices=sorted(COMPARISONS), required=True)
    parser.add_argument("--corpus", default="data/corpus")
    parser.add_argument("--model", default=str(default_model_dir()), help="starting weights")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps-per-round", type=int, default=4)
    parser.add_argument("--warmup-steps", type=int, default=2, help="first steps per variant, timed apart")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"native bf16 on this CPU: {cpu_has_native_bf16()}; {args.threads} threads", flush=True)
    base = TrainConfig(
        corpus=args.corpus,
        run_dir="",
        max_steps=10**6,
        ar_fraction=0.0,  # the joint objective, as CPU runs train now
        dtype="fp32",
        init_from=args.model,
        threads=args.threads,
        progress=False,
        seed=1,
    )
    medians = compare(base, COMPARISONS[args.compare], args.rounds, args.steps_per_round, args.warmup_steps)
    (a, ta), (b, tb) = medians.items()
    tokens = base.batch_size * base.seq_len
    print(
        f"median seconds per step: {a} {ta:.3f} ({tokens / ta:,.0f} tokens/s), {b} {tb:.3f} ({tokens / tb:,.0f} "
        f"tokens/s); {b} is {ta / tb:.2f}x as fast as {a}"
    )


if __name__ == "__main__":
    main()
