"""Torch vs ONNX Runtime on CPU, side by side: per-forward latency and whole-completion latency.

Both backends run the same checkpoint through the same engine (prefix cache, LM head and decoders in
PyTorch; only the forward pass differs). Measurements are interleaved round-robin (every variant, both
backends, each round) so machine noise hits both alike; medians are reported, with the torch/onnx ratio.

Per forward pass (through the engine, LM head on the rows a decoder reads):
  prefill N      a causal pass over an N-token prompt (nothing cached)
  ar step        one token behind N cached tokens
  block B        a noisy block of B tokens behind N cached tokens
Whole completion (32 new tokens by default; no stop token so both always produce all of them):
  block / ar     decode after prefilling the N-token prompt (prefix cache off: the prefill is included)
  block warm     the same with the prompt already in the prefix cache (as when typing at the cursor)

The model is --model (default: models/default); when that folder has no config.json, a random ~6M-
parameter Qwen2 (hidden 256, 6 layers, 4 heads, 2 KV heads, vocab 8192) is written to a temp folder, beside
the shipped tokenizer.

    .venv/bin/python benchmarks/bench_onnx.py [--model DIR] [--threads 1,2] [--repeats 20] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from decoder.checkpoint import save_model
from decoder.config import ModelConfig
from decoder.defaults import REPO_ROOT, default_model_dir
from decoder.engine import Engine, EngineOptions
from decoder.generation import GenerationParams
from decoder.machine import load_average, machine_info
from decoder.model import CausalLM
from decoder.router import generate

BACKENDS = ("torch", "onnx")
RANDOM_SHAPE = dict(
    vocab_size=8192,
    hidden_size=256,
    intermediate_size=704,
    num_hidden_layers=6,
    num_attention_heads=4,
    num_key_value_heads=2,
    tie_word_embeddings=True,
    model_type="qwen2",
    mask_token_id=5,
)


def random_model_folder() -> Path:
    """Random weights of RANDOM_SHAPE beside the shipped tokenizer (the same 8192-token vocabulary)."""
    folder = Path(tempfile.mkdtemp(prefix="parafill-bench-onnx-"))
    torch.manual_seed(0)
    model = CausalLM(ModelConfig(**RANDOM_SHAPE)).eval()
    save_model(model, folder, dtype=torch.float32)
    shutil.copy(default_model_dir() / "tokenizer.json", folder / "tokenizer.json")
    return folder


def prompt_ids(engine: Engine, length: int) -> list[int]:
    """`length` tokens of real Python (this repository's engine), repeated if short."""
    text = (REPO_ROOT / "decoder" / "engine.py").read_text()
    ids = engine.tokenizer.encode(text)
    while len(ids) < length:
        ids += ids
    return ids[-length:]


def variants(engine: Engine, context: int, blocks: list[int], new_tokens: int, block_size: int) -> dict[str, Callable]:
    """name -> a function running that measurement once and returning generated tokens (or None)."""
    prompt = prompt_ids(engine, context)
    cached = engine.start(prompt, reserve=max(blocks) + 1)  # the context for single steps (kept)
    mask = engine.mask_token_id
    out: dict[str, Callable] = {}

    def prefill() -> None:
        seq = engine.start(prompt, reserve=1)
        engine.next_token_logits(seq)

    def step(ids: list[int]) -> Callable:
        def run() -> None:
            hidden = engine.step(cached, [], ids)  # a scratch pass: nothing is committed
            engine.logits(hidden if len(ids) > 1 else hidden[-1:])

        return run

    def complete(mode: str, warm: bool) -> Callable:
        params = dict(max_new_tokens=new_tokens, block_size=block_size, threshold=0.9)

        def run() -> list[int]:
            engine.options.use_prefix_cache = warm
            try:
                return generate(engine, prompt, mode, GenerationParams(**params)).token_ids
            finally:
                engine.options.use_prefix_cache = False

        return run

    out[f"prefill {context}"] = prefill
    out["ar step"] = step([prompt[0]])
    if mask is not None:
        for b in blocks:
            out[f"block {b}"] = step([mask] * b)
        out[f"complete block{block_size} x{new_tokens}"] = complete("block", warm=False)
        out[f"complete block{block_size} x{new_tokens} warm"] = complete("block", warm=True)
    out[f"complete ar x{new_tokens}"] = complete("ar", warm=False)
    out[f"complete ar x{new_tokens} warm"] = complete("ar", warm=True)
    return out


def measure(folder: Path, threads: int, args: argparse.Namespace) -> dict:
    engines = {
        b: Engine.from_folder(folder, EngineOptions(backend=b, threads=threads, use_prefix_cache=False))
        for b in BACKENDS
    }
    torch.set_num_threads(threads)  # the LM head and the torch backend, for both engines
    for b, engine in engines.items():
        print(f"  {b}: {getattr(engine.runner, 'description', '')}", file=sys.stderr)
    blocks = [int(b) for b in args.blocks.split(",")]
    runs = {b: variants(e, args.context, blocks, args.new_tokens, args.block_size) for b, e in engines.items()}
    names = list(runs["torch"])
    times: dict[str, dict[str, list[float]]] = {n: {b: [] for b in BACKENDS} for n in names}
    tokens: dict[str, dict[str, list[int] | None]] = {n: {} for n in names}
    for round_ in range(args.repeats + 1):  # round 0 warms up and is not counted
        for name in names:
            for b in BACKENDS if round_ % 2 == 0 else reversed(BACKENDS):  # alternate who goes first
                started = time.perf_counter()
                result = runs[b][name]()
                elapsed = (time.perf_counter() - started) * 1000
                if round_:
                    times[name][b].append(elapsed)
                else:
                    tokens[name][b] = result
    rows = {}
    for name in names:
        t, o = (statistics.median(times[name][b]) for b in BACKENDS)
        same = tokens[name]["torch"] == tokens[name]["onnx"]
        rows[name] = {"torch_ms": round(t, 3), "onnx_ms": round(o, 3), "torch_over_onnx": round(t / o, 3)}
        if tokens[name]["torch"] is not None:
            rows[name]["same_tokens"] = same
    return {"rows": rows, "onnx": engines["onnx"].runner.description}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=default_model_dir())
    parser.add_argument("--threads", default="1,2", help="comma-separated CPU thread counts")
    parser.add_argument("--context", type=int, default=256, help="prompt / cached tokens")
    parser.add_argument("--blocks", default="8,16,32")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=8, help="block size of the block completion")
    parser.add_argument("--repeats", type=int, default=20, help="interleaved rounds per thread count")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()

    folder, source = args.model, "checkpoint"
    if not (folder / "config.json").is_file():
        print(f"no model in {folder}: using a random ~6M-parameter qwen2", file=sys.stderr)
        folder, source = random_model_folder(), "random"
    cfg = ModelConfig.from_folder(folder)
    with torch.device("meta"):
        parameters = CausalLM(cfg).num_parameters()
    import onnxruntime

    report = {
        "model": str(args.model),
        "model_source": source,
        "parameters": parameters,
        "config": {
            k: getattr(cfg, k)
            for k in (
                "hidden_size",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "intermediate_size",
                "vocab_size",
            )
        },
        "context": args.context,
        "new_tokens": args.new_tokens,
        "block_size": args.block_size,
        "repeats": args.repeats,
        "machine": {**machine_info(), "onnxruntime": onnxruntime.__version__},
        "threads": {},
    }
    try:
        for threads in [int(t) for t in args.threads.split(",")]:
            print(f"{threads} thread(s): measuring {args.repeats} interleaved rounds...", file=sys.stderr)
            report["threads"][str(threads)] = measure(folder, threads, args)
    finally:
        if source == "random":
            shutil.rmtree(folder, ignore_errors=True)
    report["machine"]["load_average_end"] = load_average()

    print(
        f"model {args.model} ({source}, {parameters / 1e6:.1f}M parameters), context {args.context}, "
        f"median of {args.repeats} interleaved rounds"
    )
    print(f"{'threads':>7}  {'variant':<26} {'torch ms':>9} {'onnx ms':>9} {'torch/onnx':>10}  same tokens")
    for threads, result in report["threads"].items():
        for name, row in result["rows"].items():
            same = {True: "yes", False: "NO"}.get(row.get("same_tokens"), "")
            print(
                f"{threads:>7}  {name:<26} {row['torch_ms']:>9.2f} {row['onnx_ms']:>9.2f} "
                f"{row['torch_over_onnx']:>10.2f}  {same}"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
