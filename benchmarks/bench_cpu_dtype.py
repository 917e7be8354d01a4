"""fp32 vs bf16 weights on CPU, side by side on the same held-out line tasks: inline completions (block
decoding, cold and after a keystroke) and AR decoding speed (the explain route), with the completions compared.

The two engines load the same weights; the variants alternate per task, in both orders.

    .venv/bin/python benchmarks/bench_cpu_dtype.py [--model models/default] [--tasks 40] [--ar-tokens 64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from tqdm import tqdm

from decoder.defaults import default_model_dir
from decoder.engine import Engine, EngineOptions
from decoder.evaluation.tasks import build_tasks, stdlib_heldout_files
from decoder.generation import GenerationParams
from decoder.infill import completion_stop_rule, infill
from decoder.router import generate

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(default_model_dir()))
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--ar-tokens", type=int, default=64)
    args = parser.parse_args()

    engines = {name: Engine.from_folder(args.model, EngineOptions(dtype=dtype)) for name, dtype in DTYPES.items()}
    tasks = build_tasks(stdlib_heldout_files(), "line", args.tasks)
    block = GenerationParams(max_new_tokens=48, block_size=8, threshold=0.9, fallback_window=1)
    ar = GenerationParams(max_new_tokens=args.ar_tokens)
    ms: dict[str, dict[str, list[float]]] = {n: {"cold": [], "keystroke": [], "ar_token": []} for n in DTYPES}
    texts: dict[str, list[str]] = {n: [] for n in DTYPES}
    for i, task in enumerate(tqdm(tasks, desc="tasks")):
        rule = completion_stop_rule(False, task.indent, 16)
        for name in DTYPES if i % 2 == 0 else reversed(DTYPES):
            engine = engines[name]
            engine.clear_prefix_cache()
            began = time.perf_counter()
            res = infill(engine, task.prefix, task.suffix, "block", block, stop_rule=rule)
            ms[name]["cold"].append((time.perf_counter() - began) * 1000)
            texts[name].append(res.text)
            engine.clear_prefix_cache()
            infill(engine, task.prefix[:-1], task.suffix, "block", block, stop_rule=rule)  # the keystroke before
            began = time.perf_counter()
            infill(engine, task.prefix, task.suffix, "block", block, stop_rule=rule)
            ms[name]["keystroke"].append((time.perf_counter() - began) * 1000)
            ids = engine.tokenizer.encode(task.prefix)[-512:]
            engine.clear_prefix_cache()
            long = generate(engine, ids, "ar", ar)  # exactly --ar-tokens tokens: no stop tokens
            engine.clear_prefix_cache()
            short = generate(engine, ids, "ar", GenerationParams(max_new_tokens=1))  # the same cold prefill
            per_token = (long.latency_ms - short.latency_ms) / max(1, len(long.token_ids) - 1)
            ms[name]["ar_token"].append(per_token)
    print(f"{'':6} {'inline cold p50':>16} {'after keystroke p50':>20} {'AR ms/token p50':>16}")
    for name in DTYPES:
        m = {k: statistics.median(v) for k, v in ms[name].items()}
        print(f"{name:6} {m['cold']:13.1f} ms {m['keystroke']:17.1f} ms {m['ar_token']:16.2f}")
    ratio = {k: statistics.median(ms["bf16"][k]) / statistics.median(ms["fp32"][k]) for k in ms["fp32"]}
    print("bf16 / fp32: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items()))
    same = sum(a == b for a, b in zip(texts["fp32"], texts["bf16"], strict=True))
    print(f"identical completions: {same}/{len(tasks)}")


if __name__ == "__main__":
    main()
