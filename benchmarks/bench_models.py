"""Two model folders side by side on the same held-out line tasks: what a larger (or retrained) model costs
per inline completion, through the product's path (`CompletionService.complete`, the served settings).

Per task and model: a cold request (prefix cache cleared) and a request after a keystroke (the cache warm
with the same document less the character before the cursor). The models alternate per task, in both orders,
so machine noise falls on both; medians are reported with the second/first ratio. Milliseconds per forward
pass is the cost of the model alone; whole-request latency also moves with how many passes each model needs.

    .venv/bin/python benchmarks/bench_models.py MODEL_A MODEL_B [--tasks 40] [--json OUT]

Each engine runs on the thread count it is served with (decoder.engine: one thread below 50M parameters).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from tqdm import tqdm

from decoder.evaluation.tasks import InfillTask, build_tasks, stdlib_heldout_files
from decoder.machine import machine_info
from lsp_server.documents import Document
from lsp_server.inline import InlineAnswer, InlineRequest
from lsp_server.service import CompletionService
from lsp_server.settings import Settings

FIGURES = ("cold_ms", "keystroke_ms", "ms_per_forward", "forward_passes", "tokens")


def timed(service: CompletionService, uri: str, text: str, cursor: int) -> tuple[InlineAnswer, float]:
    doc = Document(uri=uri, text=text)
    began = time.perf_counter()
    answer = service.complete(InlineRequest(uri, doc, cursor))
    return answer, (time.perf_counter() - began) * 1000


def measure(service: CompletionService, task: InfillTask, i: int) -> tuple[dict[str, float], str]:
    """One task on one model: cold, then warm after a keystroke. Each request has its own URI, so no answer
    comes from the last suggestion (typed-ahead reuse): every one runs the model."""
    text, cursor = task.prefix + task.suffix, len(task.prefix)
    service.clear_cache()
    cold, cold_ms = timed(service, f"file:///bench/{i}-cold.py", text, cursor)
    service.clear_cache()
    before = task.prefix[:-1] + task.suffix
    timed(service, f"file:///bench/{i}-before.py", before, cursor - 1)
    warm, warm_ms = timed(service, f"file:///bench/{i}-warm.py", text, cursor)
    if "typed_ahead" in (cold.route, warm.route):  # then the timing would not be the model's
        raise RuntimeError(f"task {task.name}: answered from the last suggestion, not by the model")
    passes = cold.forward_passes or 0
    row = {
        "cold_ms": cold_ms,
        "keystroke_ms": warm_ms,
        "ms_per_forward": cold.latency_ms / passes if passes else float("nan"),
        "forward_passes": passes,
        "tokens": cold.tokens or 0,
    }
    return row, cold.text or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs=2, help="two model folders (Hugging Face format)")
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    names = [str(Path(m)) for m in args.models]
    if names[0] == names[1]:
        parser.error("name two different model folders")
    services = {}
    for name in names:
        service = CompletionService(Settings(model=name))
        service.holder.load_now(service.settings)
        services[name] = service
    tasks = build_tasks(stdlib_heldout_files(), "line", args.tasks)
    rows: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    texts: dict[str, list[str]] = {n: [] for n in names}
    for i, task in enumerate(tqdm(tasks, desc="tasks")):
        for name in names if i % 2 == 0 else reversed(names):
            row, text = measure(services[name], task, i)
            rows[name].append(row)
            texts[name].append(text)

    medians = {n: {k: statistics.median(r[k] for r in rows[n]) for k in FIGURES} for n in names}
    width = max(len(n) for n in names)
    print(f"{'':{width}} {'cold p50':>11} {'keystroke p50':>14} {'ms/forward':>11} {'passes':>7} {'tokens':>7}")
    for n in names:
        m = medians[n]
        print(
            f"{n:{width}} {m['cold_ms']:8.1f} ms {m['keystroke_ms']:11.1f} ms {m['ms_per_forward']:11.2f} "
            f"{m['forward_passes']:7.1f} {m['tokens']:7.1f}"
        )
    first, second = names
    ratio = {k: medians[second][k] / medians[first][k] for k in FIGURES if medians[first][k]}
    print(f"{second} / {first} (medians): " + ", ".join(f"{k} {v:.2f}x" for k, v in ratio.items()))
    same = sum(a == b for a, b in zip(texts[first], texts[second], strict=True))
    print(f"identical completions: {same}/{len(tasks)}")
    if args.json:
        threads = torch.get_num_threads()  # as the engines set it on load (the served count)
        report = {
            "tasks": len(tasks),
            "machine": machine_info(),
            "threads": threads,
            "medians": medians,
            "ratio": ratio,
            "same": same,
        }
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
