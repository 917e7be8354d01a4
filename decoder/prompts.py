"""Prompt formats the default model is trained on: FIM (SPM / PSM), explain, and token healing.

Each part is tokenized on its own and the ids are joined, so the token boundary at the cursor is the
same whatever surrounds it. SPM puts the suffix first (`<suffix> S <prefix> P <middle>`): typing at the
cursor then changes only the tail of the prompt, and the prefix cache keeps the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from decoder.tokenizer import TextTokenizer

FIM_ORDERS = ("spm", "psm")


class PromptFormatError(ValueError):
    """The tokenizer lacks the special tokens a prompt format needs."""


@dataclass
class Prompt:
    ids: list[int]
    # Token healing: text backed off the end of the prompt, which the output must start with
    # (the decoder constrains the first token to `first_token_allowed`; callers strip `healed_text`).
    healed_text: str = ""
    first_token_allowed: Tensor | None = None


def heal(tokenizer: TextTokenizer, ids: list[int]) -> tuple[list[int], str, Tensor | None]:
    """Back off the last token; allow as first generated token only tokens that extend its text.

    A prompt that ends inside a word ("self.ite") or on a space ends on a token the model rarely saw in
    that place; letting the model re-choose it (constrained to agree with the text) fixes the boundary.
    """
    if not ids:
        return ids, "", None
    text = tokenizer.token_texts[ids[-1]]
    if not text or not text.isprintable():
        return ids, "", None
    allowed = torch.tensor([t.startswith(text) for t in tokenizer.token_texts], dtype=torch.bool)
    return ids[:-1], text, allowed


def fim_prompt(
    tokenizer: TextTokenizer, prefix: str, suffix: str, order: str = "spm", token_healing: bool = True
) -> Prompt:
    sp = tokenizer.special
    if not sp.has_fim:
        raise PromptFormatError("the tokenizer has no FIM tokens (<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>)")
    if order not in FIM_ORDERS:
        raise ValueError(f"unknown FIM order {order!r}: expected one of {FIM_ORDERS}")
    prefix_ids = tokenizer.encode(prefix)
    healed, allowed = "", None
    if token_healing:
        prefix_ids, healed, allowed = heal(tokenizer, prefix_ids)
    suffix_ids = tokenizer.encode(suffix)
    if order == "spm":
        ids = [sp.fim_suffix, *suffix_ids, sp.fim_prefix, *prefix_ids, sp.fim_middle]
    else:
        ids = [sp.fim_prefix, *prefix_ids, sp.fim_suffix, *suffix_ids, sp.fim_middle]
    return Prompt(ids=ids, healed_text=healed, first_token_allowed=allowed)  # type: ignore[arg-type]


def explain_prompt(tokenizer: TextTokenizer, code: str) -> Prompt:
    """`<|explain_code|> code <|explain_text|>`: the answer follows, ended by end-of-text."""
    sp = tokenizer.special
    if sp.explain_code is None or sp.explain_text is None:
        raise PromptFormatError("the tokenizer has no explain tokens (<|explain_code|>, <|explain_text|>)")
    return Prompt(ids=[sp.explain_code, *tokenizer.encode(code), sp.explain_text])


def plain_prompt(tokenizer: TextTokenizer, text: str, token_healing: bool = False) -> Prompt:
    ids = tokenizer.encode(text)
    if token_healing and len(ids) > 1:
        ids, healed, allowed = heal(tokenizer, ids)
        return Prompt(ids=ids, healed_text=healed, first_token_allowed=allowed)
    return Prompt(ids=ids)
