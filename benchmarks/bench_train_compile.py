"""Eager vs `torch.compile` for CPU training: seconds per joint training step, side by side.

Two trainers start from the same weights in one process; rounds of a few steps alternate between them, so
machine noise falls on both. The compiled one's first steps (the compilation) are timed apart.

    .venv/bin/python benchmarks/bench_train_compile.py [--corpus data/corpus] [--rounds 4] [--threads 2]

Needs a tokenized corpus (`parafill corpus --out data/corpus --tokenizer models/default/tokenizer.json`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from decoder.defaults import default_model_dir
from decoder.training.trainer import TrainConfig, Trainer


def trainer(corpus: str, run_dir: str, compiled: bool, threads: int) -> Trainer:
    cfg = TrainConfig(
        corpus=corpus,
        run_dir=run_dir,
        size="5m",
        max_steps=10**6,
        ar_fraction=0.0,  # the joint objective, as CPU runs train now
        init_from=str(default_model_dir()),
        compile=compiled,
        threads=threads,
        progress=False,
        seed=1,
    )
    return Trainer(cfg)


def seconds_per_step(tr: Trainer, steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        tr.train_step()
    return (time.perf_counter() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="data/corpus")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps-per-round", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="parafill-compile-bench-") as scratch:
        eager = trainer(args.corpus, f"{scratch}/eager", False, args.threads)
        compiled = trainer(args.corpus, f"{scratch}/compiled", True, args.threads)
        print(f"compiled, first 3 steps (compilation): {3 * seconds_per_step(compiled, 3):.1f} s", flush=True)
        seconds_per_step(eager, 2)  # warm up the eager one too
        times: dict[str, list[float]] = {"eager": [], "compiled": []}
        for r in range(args.rounds):
            times["eager"].append(seconds_per_step(eager, args.steps_per_round))
            times["compiled"].append(seconds_per_step(compiled, args.steps_per_round))
            print(f"round {r + 1}: eager {times['eager'][-1]:.3f} s/step, compiled {times['compiled'][-1]:.3f}")
    e, c = statistics.median(times["eager"]), statistics.median(times["compiled"])
    print(f"median seconds per step: eager {e:.3f}, compiled {c:.3f}; compiled is {e / c:.2f}x as fast")


if __name__ == "__main__":
    main()
