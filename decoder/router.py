"""Route a request to a decoder by its kind: inline completion -> block diffusion, explain -> AR."""

from __future__ import annotations

from dataclasses import dataclass

from decoder.ar_decoder import decode_ar
from decoder.block_decoder import decode_block
from decoder.engine import Engine
from decoder.generation import GenerationControl, GenerationParams, GenerationResult

MODES = ("block", "ar")


@dataclass
class RoutingRules:
    inline: str = "block"
    explain: str = "ar"
    # Outputs expected to be longer than this many blocks go to AR whatever their kind.
    max_blocks_for_diffusion: int = 8

    def choose(self, kind: str, params: GenerationParams) -> str:
        if kind not in ("inline", "explain"):
            raise ValueError(f"unknown request kind {kind!r}")
        mode = self.inline if kind == "inline" else self.explain
        if mode == "block" and params.max_new_tokens > self.max_blocks_for_diffusion * params.block_size:
            return "ar"
        return mode


def generate(
    engine: Engine,
    prompt_ids: list[int],
    mode: str,
    params: GenerationParams,
    control: GenerationControl | None = None,
) -> GenerationResult:
    if mode == "block":
        return decode_block(engine, prompt_ids, params, control)
    if mode == "ar":
        return decode_ar(engine, prompt_ids, params, control)
    raise ValueError(f"unknown decoding mode {mode!r}: expected one of {MODES}")
