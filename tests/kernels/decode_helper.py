"""Block decoding run end to end: called in-process (reference) and in the interpreter worker (Triton)."""

from __future__ import annotations

from decoder.engine import Engine, EngineOptions
from decoder.generation import GenerationParams
from decoder.router import generate


def decode(
    model_dir: str, prompt: str, block_size: int, threshold: float, temperature: float = 0.0, seed: int | None = None
) -> tuple[list[int], list[int], str]:
    """(token ids, commit steps, denoise backend used) for one block-diffusion generation."""
    from parafill_kernels import denoise_backend_name

    engine = Engine.from_folder(model_dir, EngineOptions(use_prefix_cache=False))
    params = GenerationParams(
        max_new_tokens=16, block_size=block_size, threshold=threshold, temperature=temperature, seed=seed
    )
    result = generate(engine, engine.tokenizer.encode(prompt), "block", params)
    return result.token_ids, result.commit_steps, denoise_backend_name("cpu")
