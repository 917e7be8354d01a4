"""`parafill generate`: run a decoder on a prompt, print the text or a JSON record with the commit trace."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from decoder.block_causal_engine import BlockLayoutError
from decoder.block_decoder import BlockSamplingError, NoMaskTokenError
from decoder.engine import BACKENDS
from decoder.engines import ROUTES, family_params
from decoder.generation import GenerationControl, GenerationParams
from decoder.prompts import PromptFormatError
from decoder.router import MODES, generate
from lsp_server.errors import UserError
from lsp_server.model_loading import open_routes


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="Hugging Face model folder (default: the shipped model)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument(
        "--dtype", default=None, help="fp32 or bf16 (default: bf16 on CUDA and on CPUs with native bf16, else fp32)"
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="torch",
        help="torch (default) or onnx: ONNX Runtime, CUDA provider with onnxruntime-gpu, else CPU; fp32 only; "
        "the model is exported once and cached next to it",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument(
        "--explain-model",
        help="separate model folder for the explain route (e.g. an instruct AR model), with its own cache",
    )
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-file", type=Path, help="file holding the prompt")
    parser.add_argument(
        "--route",
        choices=ROUTES,
        default=None,
        help="serve the prompt as an inline completion or an explain request (the prompt is then the code to "
        "explain): picks the route's model, decoding mode, block settings and prompt format",
    )
    parser.add_argument("--mode", choices=MODES, default=None, help="block or ar (default: block, or the route's)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=None, help="default: the model family's (8 for ours)")
    parser.add_argument("--sub-block-size", type=int, default=None, help="commit sub-blocks left to right")
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="default: the model's measured one (config.json block_threshold), else its family's",
    )
    parser.add_argument("--fallback-window", type=int, default=None)
    parser.add_argument(
        "--lookup", type=int, default=0, help="AR: draft up to this many tokens by prompt lookup per pass (greedy)"
    )
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
    _check_numbers(args)  # before loading anything: bad arguments fail fast
    prompt = read_prompt(args)
    if args.explain_model and args.route != "explain":
        raise UserError("--explain-model serves the explain route: add --route explain")
    routes = open_routes(
        args.model, args.explain_model, args.device, args.dtype, use_cache=not args.no_cache, backend=args.backend
    )
    kind = args.route or "inline"
    engine = routes.engine_for(kind)
    mode = args.mode or (routes.mode_for(kind) if args.route else "block")
    fixed = getattr(engine, "block_size", None) if getattr(engine, "kv_layout", "causal") != "causal" else None
    if fixed is not None and args.block_size not in (None, fixed):
        raise UserError(f"this checkpoint decodes blocks of {fixed} on a block-causal layout: --block-size {fixed}")
    try:
        params = family_params(
            engine,
            max_new_tokens=args.max_new_tokens,
            block_size=args.block_size,
            sub_block_size=args.sub_block_size,
            threshold=args.threshold,
            fallback_window=args.fallback_window,
            lookup_tokens=args.lookup,
            temperature=args.temperature,
            top_p=args.top_p,
            seed=args.seed,
        )
        if args.block_size is not None and args.sub_block_size is None and params.sub_block_size:
            params.sub_block_size = min(params.sub_block_size, params.block_size)
        params.validate()
    except (TypeError, ValueError) as exc:
        raise UserError(str(exc)) from exc
    try:
        prompt_ids = routes.explain_prompt(prompt).ids if args.route == "explain" else engine.tokenizer.encode(prompt)
    except PromptFormatError as exc:
        raise UserError(str(exc)) from exc
    if not prompt_ids:
        raise UserError("the prompt is empty")
    _check_context(len(prompt_ids), params.max_new_tokens, engine.model.config.max_position_embeddings)
    try:
        result = generate(engine, prompt_ids, mode, params, GenerationControl())
    except (NoMaskTokenError, BlockLayoutError, BlockSamplingError) as exc:
        raise UserError(str(exc)) from exc
    if args.json:
        record = result.to_json()
        if args.route:
            record["route"] = {"kind": kind, **routes.describe()[kind]}  # type: ignore[dict-item]
        print(json.dumps(record))
    else:
        sys.stdout.write(result.text + "\n")
        print(
            f"[{mode}] {len(result.token_ids)} tokens, {result.forward_passes} forward passes, "
            f"{result.latency_ms:.1f} ms",
            file=sys.stderr,
        )
    return 0


def _check_context(prompt_tokens: int, max_new_tokens: int, context: int) -> None:
    """Positions past the model's context were never trained: refuse rather than decode noise. (The server
    and `complete` cut a window around the cursor instead; a raw prompt has no cursor to cut around.)"""
    if prompt_tokens + max_new_tokens > context:
        raise UserError(
            f"the prompt is {prompt_tokens} tokens; with --max-new-tokens {max_new_tokens} that is past the "
            f"model's context of {context} tokens: shorten the prompt or lower --max-new-tokens"
        )


def _check_numbers(args: argparse.Namespace) -> None:
    given = {
        "max_new_tokens": args.max_new_tokens,
        "block_size": args.block_size,
        "threshold": args.threshold,
        "fallback_window": args.fallback_window,
        "lookup_tokens": args.lookup,
        "temperature": args.temperature,
        "top_p": args.top_p,
    }
    params = GenerationParams(**{k: v for k, v in given.items() if v is not None})
    if args.sub_block_size is not None and args.sub_block_size < 1:
        raise UserError("sub_block_size must be >= 1")
    try:
        params.validate()
    except ValueError as exc:
        raise UserError(str(exc)) from exc
