"""Open a checkpoint as the engine its family needs, and hold the engines behind the two routes.

`open_family_engine` reads config.json, finds the family (decoder/families.py) and builds an `Engine`
(causal KV) or a `BlockCausalEngine` (Fast-dLLM v2, SDAR), with the family's mask token when neither the
config nor the tokenizer names one.

`ModelRoutes` holds one engine for both routes, or a block-diffusion engine for inline completion and a
separate AR engine for explain. Each engine has its own prefix cache (a cache is only valid for the model
that filled it). For each route it answers which engine, which decoding mode, which default parameters
(the family's published block settings) and which prompt format to use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from decoder.block_causal_engine import BlockCausalEngine
from decoder.checkpoint import read_config
from decoder.engine import Engine, EngineOptions
from decoder.families import Family, family_of
from decoder.generation import GenerationControl, GenerationParams, GenerationResult
from decoder.prompts import Prompt, build_explain_prompt, fim_prompt
from decoder.router import RoutingRules, generate

ROUTES = ("inline", "explain")


def open_family_engine(folder: str | Path, options: EngineOptions | None = None) -> Engine:
    """The engine for the checkpoint in `folder`, laid out as its family was trained."""
    folder = Path(folder)
    cfg = read_config(folder)
    family = family_of(cfg)
    engine_class = BlockCausalEngine if family.kv_layout == "block_causal" else Engine
    engine = engine_class.from_folder(folder, options)
    engine.tokenizer.logits_width = engine.model.config.vocab_size  # token-healing masks span every row
    if engine.mask_token_id is None and family.mask_token_id is not None:
        published = family.mask_token_id
        named = engine.tokenizer.token_id(family.mask_token)
        engine.mask_token_id = named if named is not None else published
        engine.logit_bias = engine._never_generated_bias()
    engine.family = family  # type: ignore[attr-defined]
    engine.stop_token_ids = stop_token_ids(folder, engine, family)  # type: ignore[attr-defined]
    return engine


def stop_token_ids(folder: Path, engine: Engine, family: Family) -> frozenset[int]:
    """End of text, end of turn (chat models), and generation_config.json's eos_token_id."""
    tok = engine.tokenizer
    ids = {tok.special.end_of_text, *tok.end_of_turn_ids(), *(tok.token_id(n) for n in family.stop_tokens)}
    path = folder / "generation_config.json"
    if path.is_file():
        try:
            eos = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
        except (OSError, ValueError, AttributeError):
            eos = None
        ids.update(eos if isinstance(eos, list) else [eos])
    vocab = engine.model.config.vocab_size
    return frozenset(i for i in ids if isinstance(i, int) and 0 <= i < vocab)


def family_params(engine: Engine, **overrides: object) -> GenerationParams:
    """GenerationParams with the family's published block settings (the checkpoint's own threshold where its
    config names one); keyword arguments override them."""
    family = getattr(engine, "family", None) or family_of(engine.model.config)
    extra = engine.model.config.extra
    block = getattr(engine, "block_size", None) or family.block_size_for(extra)
    params = GenerationParams(
        block_size=block,
        threshold=family.threshold_for(extra),
        fallback_window=family.fallback_window,
        sub_block_size=family.sub_block_size,
        stop_token_ids=getattr(engine, "stop_token_ids", frozenset()),
    )
    return replace(params, **{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]


@dataclass
class ModelRoutes:
    """The engine (and its cache) behind each route: one model for both, or one per route."""

    inline: Engine
    explain: Engine

    @classmethod
    def open(
        cls, model: str | Path, explain_model: str | Path | None = None, options: EngineOptions | None = None
    ) -> ModelRoutes:
        inline = open_family_engine(model, options)
        if explain_model is None or Path(explain_model).resolve() == Path(model).resolve():
            return cls(inline=inline, explain=inline)
        return cls(inline=inline, explain=open_family_engine(explain_model, options))

    @classmethod
    def from_engines(cls, inline: Engine, explain: Engine | None = None) -> ModelRoutes:
        return cls(inline=inline, explain=explain or inline)

    @property
    def shared(self) -> bool:
        return self.inline is self.explain

    def engine_for(self, kind: str) -> Engine:
        if kind not in ROUTES:
            raise ValueError(f"unknown request kind {kind!r}: expected one of {ROUTES}")
        return self.inline if kind == "inline" else self.explain

    def mode_for(self, kind: str, params: GenerationParams | None = None, preferred: str | None = None) -> str:
        """ "block" or "ar" for this kind on the engine that serves it: `preferred` (a user setting) or the
        family's route; with `params`, outputs longer than a few blocks go to AR where the engine's KV
        layout allows AR (a block-causal engine cannot decode one token at a time); a checkpoint
        without a mask token always decodes AR."""
        engine = self.engine_for(kind)
        family = getattr(engine, "family", None) or family_of(engine.model.config)
        has_mask = engine.mask_token_id is not None
        mode = preferred or family.mode_for(kind, has_mask=has_mask)
        causal = getattr(engine, "kv_layout", "causal") == "causal"
        if params is not None and causal:
            mode = RoutingRules(**{kind: mode}).choose(kind, params)
        return "ar" if mode == "block" and not has_mask else mode

    def params_for(self, kind: str, **overrides: object) -> GenerationParams:
        return family_params(self.engine_for(kind), **overrides)

    def fim_order(self) -> str:
        """The FIM order the inline model was trained with: Qwen2.5-Coder (recognised by its repo-level
        FIM tokens) uses PSM; parafill's own models use SPM, which keeps the cached prompt stable."""
        return "psm" if self.inline.tokenizer.token_id("<|repo_name|>") is not None else "spm"

    def inline_prompt(self, prefix: str, suffix: str, order: str | None = None, token_healing: bool = True) -> Prompt:
        return fim_prompt(self.inline.tokenizer, prefix, suffix, order or self.fim_order(), token_healing)

    def explain_prompt(self, code: str, language: str = "python") -> Prompt:
        return build_explain_prompt(self.explain.tokenizer, code, language)

    def generate(
        self,
        kind: str,
        prompt_ids: list[int],
        params: GenerationParams | None = None,
        control: GenerationControl | None = None,
        mode: str | None = None,
    ) -> GenerationResult:
        return generate(
            self.engine_for(kind), prompt_ids, mode or self.mode_for(kind), params or self.params_for(kind), control
        )

    def describe(self) -> dict[str, object]:
        """Which model serves which route, how (for logs and `parafill generate --json`)."""
        out: dict[str, object] = {"shared": self.shared}
        for kind in ROUTES:
            engine = self.engine_for(kind)
            family = getattr(engine, "family", None) or family_of(engine.model.config)
            out[kind] = {
                "family": family.name,
                "model_type": engine.model.config.model_type,
                "mode": self.mode_for(kind),
                "kv_layout": getattr(engine, "kv_layout", "causal"),
                "block_size": family_params(engine).block_size,
            }
        return out
