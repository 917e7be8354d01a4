"""Forward-pass latency: one block-diffusion step over B tokens vs one AR step, side by side.

Random weights at the shapes of the default-model configurations (timing does not depend on the values).
Measurements are interleaved round-robin so machine noise hits every variant alike; the ratio to the
AR step is the number to read.

    .venv/bin/python benchmarks/bench_forward.py [--context 256] [--threads 1] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from tqdm import tqdm

from decoder.config import ModelConfig
from decoder.defaults import default_model_dir
from decoder.engine import Engine, EngineOptions
from decoder.machine import machine_info
from decoder.model import CausalLM
from decoder.tokenizer import TextTokenizer

SHAPES = {
    "5M": dict(
        hidden_size=256, intermediate_size=704, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2
    ),
    "20M": dict(
        hidden_size=384, intermediate_size=1024, num_hidden_layers=10, num_attention_heads=6, num_key_value_heads=2
    ),
}


def build_engine(shape: dict, vocab: int) -> Engine:
    cfg = ModelConfig(vocab_size=vocab, model_type="qwen2", mask_token_id=5, tie_word_embeddings=True, **shape)
    torch.manual_seed(0)
    model = CausalLM(cfg).eval()
    # The shipped tokenizer: the timed passes feed random ids, so any tokenizer serves; this one needs no training.
    tok = TextTokenizer.from_folder(default_model_dir())
    return Engine(model, tok, EngineOptions(use_prefix_cache=False))


def time_variants(engine: Engine, context: int, blocks: list[int], repeats: int) -> dict[str, list[float]]:
    vocab = engine.model.config.vocab_size
    prompt = torch.randint(8, vocab, (context,)).tolist()
    seq = engine.start(prompt, reserve=max(blocks) + 2)
    timings: dict[str, list[float]] = {"ar": [], **{f"block{b}": [] for b in blocks}}

    def run(name: str) -> None:
        ids = [7] if name == "ar" else [5] * int(name.removeprefix("block"))
        t0 = time.perf_counter()
        hidden = engine.step(seq, [], ids)  # scratch pass: nothing is committed, the cache stays as it is
        engine.logits(hidden if name != "ar" else hidden[-1:])
        timings[name].append((time.perf_counter() - t0) * 1000)

    for name in timings:  # warm-up
        run(name)
    for _ in tqdm(range(repeats), desc="rounds", leave=False):
        for name in timings:
            run(name)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--context", type=int, default=256, help="tokens already in the KV cache")
    parser.add_argument("--blocks", default="8,16,32")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    blocks = [int(b) for b in args.blocks.split(",")]
    report = {
        "machine": machine_info(),
        "context": args.context,
        "threads": args.threads,
        "vocab": args.vocab,
        "models": {},
    }
    print(f"context {args.context} tokens, {args.threads} thread(s), median of {args.repeats} interleaved rounds")
    print(f"{'model':>6} {'params':>8} {'variant':>8} {'ms':>8} {'x AR step':>10}")
    for name, shape in SHAPES.items():
        engine = build_engine(shape, args.vocab)
        timings = time_variants(engine, args.context, blocks, args.repeats)
        ar = statistics.median(timings["ar"])
        rows = {}
        for variant, values in timings.items():
            med = statistics.median(values)
            rows[variant] = {"median_ms": round(med, 3), "ratio_to_ar": round(med / ar, 3)}
            print(f"{name:>6} {engine.model.num_parameters() / 1e6:>7.1f}M {variant:>8} {med:>8.2f} {med / ar:>10.2f}")
        report["models"][name] = {"parameters": engine.model.num_parameters(), "variants": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
