"""Prompt-lookup drafts for AR decoding, side by side with plain AR on the same requests: forward passes,
latency and whether the outputs are the same.

Two request kinds on held-out files, both through the product's own code paths, every request cold (prefix
cache cleared) and the variants alternating per request in rotating order:
- explain: `lsp_server.explain.run_explain` on functions of the held-out files (the explain route: AR,
  stop on end-of-text and on loops), with the `lookupTokens` setting at 0 and at each --draft value;
- AR completions: `decoder.infill.infill` in AR mode on the eval's multi-line block tasks (the inline
  route when `inlineMode` is "ar"), with the eval's stop rule.

    .venv/bin/python benchmarks/bench_lookup.py [--model models/default] [--tasks 30] [--draft 4,8] \
        [--dtype fp32|bf16] [--json benchmarks/results/lookup_cpu.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
from collections.abc import Callable

import torch
from tqdm import tqdm

from decoder.defaults import default_model_dir
from decoder.engine import EngineOptions
from decoder.engines import ModelRoutes
from decoder.evaluation.tasks import HeldoutFile, build_tasks, stdlib_heldout_files
from decoder.infill import completion_stop_rule, infill
from decoder.machine import machine_info
from lsp_server.explain import run_explain
from lsp_server.settings import Settings

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
Run = Callable[[int], tuple[str, int, int, float]]  # lookup tokens -> (text, tokens, passes, latency ms)


def functions(files: list[HeldoutFile], limit: int, min_lines: int = 4, max_lines: int = 40) -> list[str]:
    """Source of up to `limit` functions of the held-out files, spread over the files."""
    per_file: list[list[str]] = []
    for file in files:
        try:
            tree = ast.parse(file.text)
        except SyntaxError:
            continue
        lines = file.text.splitlines()
        found = [
            "\n".join(lines[node.lineno - 1 : node.end_lineno])
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno is not None
            and min_lines <= node.end_lineno - node.lineno + 1 <= max_lines
        ]
        per_file.append(found)
    picked: list[str] = []
    for i in range(max((len(f) for f in per_file), default=0)):  # round robin over the files
        picked += [f[i] for f in per_file if i < len(f)]
    return picked[:limit]


def explain_run(routes: ModelRoutes, code: str) -> Run:
    def run(lookup: int) -> tuple[str, int, int, float]:
        routes.explain.clear_prefix_cache()
        answer = run_explain(routes, code, Settings(lookup_tokens=lookup, explain_max_tokens=128))
        return answer.text, answer.tokens, answer.forward_passes, answer.latency_ms

    return run


def completion_run(routes: ModelRoutes, prefix: str, suffix: str, indent: int) -> Run:
    rule = completion_stop_rule(True, indent, 16)

    def run(lookup: int) -> tuple[str, int, int, float]:
        routes.inline.clear_prefix_cache()
        params = routes.params_for("inline", max_new_tokens=64, lookup_tokens=lookup)
        res = infill(routes.inline, prefix, suffix, "ar", params, stop_rule=rule, order=routes.fim_order())
        gen = res.generation
        return res.text, len(gen.token_ids), gen.forward_passes, gen.latency_ms

    return run


def measure(runs: list[Run], variants: list[int], desc: str) -> dict[str, dict]:
    rows = {v: {"latency_ms": [], "tokens": 0, "passes": 0, "texts": []} for v in variants}
    for i, run in enumerate(tqdm(runs, desc=desc)):
        order = variants[i % len(variants) :] + variants[: i % len(variants)]  # rotate who goes first
        for v in order:
            text, tokens, passes, ms = run(v)
            row = rows[v]
            row["latency_ms"].append(ms)
            row["tokens"] += tokens
            row["passes"] += passes
            row["texts"].append(text)
    plain = rows[0]
    out = {}
    for v, row in rows.items():
        p50 = statistics.median(row["latency_ms"])
        out["plain AR" if v == 0 else f"lookup {v}"] = {
            "lookup_tokens": v,
            "requests": len(runs),
            "same_output": sum(a == b for a, b in zip(row["texts"], plain["texts"], strict=True)),
            "tokens": row["tokens"],
            "forward_passes": row["passes"],
            "tokens_per_forward": round(row["tokens"] / max(1, row["passes"]), 3),
            "latency_ms_p50": round(p50, 1),
            "latency_ms_mean": round(statistics.fmean(row["latency_ms"]), 1),
            "p50_vs_plain": round(p50 / statistics.median(plain["latency_ms"]), 3),
            "mean_vs_plain": round(statistics.fmean(row["latency_ms"]) / statistics.fmean(plain["latency_ms"]), 3),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(default_model_dir()))
    parser.add_argument("--tasks", type=int, default=30, help="requests of each kind")
    parser.add_argument("--draft", default="4,8", help="comma-separated lookupTokens values beside 0")
    parser.add_argument("--dtype", choices=DTYPES, default="fp32")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    variants = [0, *(int(v) for v in args.draft.split(","))]
    routes = ModelRoutes.open(args.model, options=EngineOptions(dtype=DTYPES[args.dtype]))
    files = stdlib_heldout_files()
    explain = [explain_run(routes, code) for code in functions(files, args.tasks)]
    blocks = build_tasks(files, "block", args.tasks)
    completions = [completion_run(routes, t.prefix, t.suffix, t.indent) for t in blocks]
    report = {
        "model": args.model,
        "dtype": args.dtype,
        "torch_threads": torch.get_num_threads(),
        "machine": machine_info(),
        "explain": measure(explain, variants, "explain"),
        "ar_completion": measure(completions, variants, "AR completions"),
    }
    for kind in ("explain", "ar_completion"):
        print(f"\n{kind}")
        for name, r in report[kind].items():
            print(
                f"  {name:<10} same {r['same_output']}/{r['requests']}  tok/fwd {r['tokens_per_forward']:.2f}  "
                f"passes {r['forward_passes']}  p50 {r['latency_ms_p50']:.0f} ms ({r['p50_vs_plain']:.2f}x)  "
                f"mean {r['latency_ms_mean']:.0f} ms ({r['mean_vs_plain']:.2f}x)"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
