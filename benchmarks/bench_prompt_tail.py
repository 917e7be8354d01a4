"""Block decoding, warm prefix cache: the prompt's uncached tail run in the first block step (as shipped)
vs in a prefill pass of its own, side by side on the same held-out line tasks.

Each measured request follows the "keystroke before" (the same prompt less its last character), so the
cache holds all but the tail, as in the editor. Variants alternate per task, in both orders.

    .venv/bin/python benchmarks/bench_prompt_tail.py [--model models/default] [--tasks 40] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from tqdm import tqdm

from decoder.defaults import default_model_dir
from decoder.engine import Engine, EngineOptions, Sequence
from decoder.evaluation.tasks import build_tasks, stdlib_heldout_files
from decoder.generation import GenerationParams
from decoder.infill import completion_stop_rule, infill

VARIANTS = ("tail in first step", "separate prefill")


def start_without_deferral(start: Callable[..., Sequence]) -> Callable[..., Sequence]:
    return lambda *args, **kwargs: start(*args, **{**kwargs, "defer_tail": False})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(default_model_dir()))
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    engine = Engine.from_folder(args.model, EngineOptions())
    starts = {VARIANTS[0]: engine.start, VARIANTS[1]: start_without_deferral(engine.start)}
    tasks = build_tasks(stdlib_heldout_files(), "line", args.tasks)
    params = GenerationParams(max_new_tokens=48, block_size=8, threshold=0.9, fallback_window=1)
    ms: dict[str, list[float]] = {v: [] for v in VARIANTS}
    passes: dict[str, list[int]] = {v: [] for v in VARIANTS}
    texts: dict[str, list[str]] = {v: [] for v in VARIANTS}
    runs = [(rep, task) for rep in range(args.repeats) for task in tasks]
    for rep, task in tqdm(runs, desc="requests"):
        rule = completion_stop_rule(False, task.indent, 16)
        for variant in VARIANTS if rep % 2 == 0 else reversed(VARIANTS):
            engine.start = starts[variant]  # type: ignore[method-assign]
            engine.clear_prefix_cache()
            infill(engine, task.prefix[:-1], task.suffix, "block", params, stop_rule=rule)  # the keystroke before
            began = time.perf_counter()
            res = infill(engine, task.prefix, task.suffix, "block", params, stop_rule=rule)
            ms[variant].append((time.perf_counter() - began) * 1000)
            passes[variant].append(res.generation.forward_passes)
            texts[variant].append(res.text)
    for v in VARIANTS:
        print(f"{v:20} p50 {statistics.median(ms[v]):6.1f} ms   forward passes {statistics.fmean(passes[v]):.2f}")
    ratio = statistics.median(ms[VARIANTS[0]]) / statistics.median(ms[VARIANTS[1]])
    same = sum(a == b for a, b in zip(texts[VARIANTS[0]], texts[VARIANTS[1]], strict=True))
    print(f"p50 ratio {ratio:.3f}; identical completions {same}/{len(runs)}")


if __name__ == "__main__":
    main()
