"""`parafill generate`: run a decoder on a prompt, print the text or a JSON record with the commit trace."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from decoder.block_decoder import NoMaskTokenError
from decoder.engine import BACKENDS
from decoder.generation import GenerationControl, GenerationParams
from decoder.router import MODES, generate
from lsp_server.errors import UserError
from lsp_server.model_loading import open_engine


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="Hugging Face model folder (default: the shipped model)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--dtype", default=None, help="fp32 or bf16 (default: fp32 on CPU, bf16 on CUDA)")
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="torch",
        help="torch (default) or onnx: ONNX Runtime, CUDA provider with onnxruntime-gpu, else CPU; fp32 only; "
        "the model is exported once and cached next to it",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-file", type=Path, help="file holding the prompt")
    parser.add_argument("--mode", choices=MODES, default="block")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=8)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--fallback-window", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--no-cache", action="store_true", help="do not use the prefix cache")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def read_prompt(args: argparse.Namespace) -> str:
    if args.prompt is not None:
        return args.prompt
    try:
        return args.prompt_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read prompt file {args.prompt_file}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    params = GenerationParams(
        max_new_tokens=args.max_new_tokens,
        block_size=args.block_size,
        threshold=args.threshold,
        fallback_window=args.fallback_window,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
    )
    try:
        params.validate()
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    prompt = read_prompt(args)
    engine = open_engine(args.model, args.device, args.dtype, use_cache=not args.no_cache, backend=args.backend)
    eot = engine.tokenizer.special.end_of_text
    params.stop_token_ids = frozenset({eot} if eot is not None else ())
    prompt_ids = engine.tokenizer.encode(prompt)
    if not prompt_ids:
        raise UserError("the prompt is empty")
    try:
        result = generate(engine, prompt_ids, args.mode, params, GenerationControl())
    except NoMaskTokenError as exc:
        raise UserError(str(exc)) from exc
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        sys.stdout.write(result.text + "\n")
        print(
            f"[{args.mode}] {len(result.token_ids)} tokens, {result.forward_passes} forward passes, "
            f"{result.latency_ms:.1f} ms",
            file=sys.stderr,
        )
    return 0
