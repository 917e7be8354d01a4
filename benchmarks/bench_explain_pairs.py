"""Seconds to find the explain examples of a corpus's files, in one process and in worker processes, side by
side: rounds alternate between the two, so machine noise falls on both (`corpus.explain_examples`).

    .venv/bin/python benchmarks/bench_explain_pairs.py [--files 6000] [--workers 2] [--rounds 2] [--json out.json]

The files are this interpreter's stdlib and site-packages (the default corpus roots), the first `--files` of them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from decoder.machine import machine_info
from decoder.training import corpus as C


def time_once(texts: list[str], workers: int) -> tuple[float, list[str]]:
    start = time.perf_counter()
    examples = C.explain_examples(texts, workers=workers)
    return time.perf_counter() - start, examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=6000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    texts = [f.text for f in C.collect(C.default_roots())][: args.files]
    print(f"{len(texts)} files, {sum(map(len, texts)) / 1e6:.0f} MB")
    seconds: dict[int, list[float]] = {1: [], args.workers: []}
    outputs: dict[int, list[str]] = {}
    for _ in range(args.rounds):
        for workers in seconds:
            took, outputs[workers] = time_once(texts, workers)
            seconds[workers].append(took)
            print(f"workers={workers}: {len(outputs[workers])} examples in {took:.1f} s", flush=True)
    same = outputs[1] == outputs[args.workers]
    median = {w: statistics.median(s) for w, s in seconds.items()}
    speedup = median[1] / median[args.workers]
    print(f"median {median[1]:.1f} s in 1 process, {median[args.workers]:.1f} s in {args.workers}: {speedup:.2f}x")
    print(f"same examples in the same order: {same}")
    if args.json:
        figures = {
            "files": len(texts),
            "machine": machine_info(),
            "seconds": seconds,
            "speedup": speedup,
            "same_examples": same,
        }
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
