"""Prompt formats: FIM (SPM / PSM), explain (our tokens, or an instruct model's chat template), token healing.

Each part is tokenized on its own and the ids are joined, so the token boundary at the cursor is the
same whatever surrounds it. SPM puts the suffix first (`<suffix> S <prefix> P <middle>`): typing at the
cursor then changes only the tail of the prompt, and the prefix cache keeps the rest.
"""

from __future__ import annotations

import bisect
import textwrap
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import torch
from torch import Tensor

from decoder.generation import StopAt, earliest_stop
from decoder.repetition import stop_on_loop
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
    if not text or not text.isprintable() or "\ufffd" in text:  # a byte of a split character is no text to extend
        return ids, "", None
    return ids[:-1], text, _tokens_starting_with(tokenizer, text)


_SORTED_TEXTS: WeakKeyDictionary[TextTokenizer, tuple[list[str], Tensor]] = WeakKeyDictionary()


def _tokens_starting_with(tokenizer: TextTokenizer, text: str) -> Tensor:
    """Bool mask of the tokens whose text starts with `text`. In sorted order they are one contiguous run, so
    two binary searches find them (a scan of every token's text took ~1 ms per request at 8k tokens, and
    grows with the vocabulary: Qwen's has 152k)."""
    cached = _SORTED_TEXTS.get(tokenizer)
    if cached is None:
        order = sorted(range(len(tokenizer.token_texts)), key=tokenizer.token_texts.__getitem__)
        cached = [tokenizer.token_texts[i] for i in order], torch.tensor(order, dtype=torch.long)
        _SORTED_TEXTS[tokenizer] = cached
    texts, order = cached
    lo = bisect.bisect_left(texts, text)
    hi = bisect.bisect_left(texts, text + "\U0010ffff", lo)  # past every text that `text` + a character begins
    allowed = torch.zeros(len(texts), dtype=torch.bool)
    allowed[order[lo:hi]] = True
    return allowed


def heal_indentation(tokenizer: TextTokenizer, prefix: str) -> tuple[list[int], str, Tensor] | None:
    """Token healing for a cursor after the indentation of a blank line (`"    def f(self):\n        |"`).

    Code tokenizes as "\n" plus one space fewer than the indentation, then " word"; a prompt that ends on the
    full indentation ends on a token the model rarely saw there, and it answers with another newline: ghost
    text that starts on the next line, or none. Back off one space and allow as first token only a space
    followed by what can begin a statement, so the completion starts on the cursor's line. None where this
    does not apply.
    """
    line = prefix[prefix.rfind("\n") + 1 :]
    if not line or line.strip(" "):
        return None
    allowed = _space_then_statement(tokenizer)
    if not allowed.any():
        return None
    return tokenizer.encode(prefix[:-1]), " ", allowed


_SPACE_THEN_STATEMENT: WeakKeyDictionary[TextTokenizer, Tensor] = WeakKeyDictionary()


def _space_then_statement(tokenizer: TextTokenizer) -> Tensor:
    """Tokens that are a space and then what can begin a Python statement (or a comment); once per tokenizer."""
    mask = _SPACE_THEN_STATEMENT.get(tokenizer)
    if mask is None:
        starts = [len(t) > 1 and t[0] == " " and _begins_statement(t[1:]) for t in tokenizer.token_texts]
        mask = _SPACE_THEN_STATEMENT[tokenizer] = torch.tensor(starts, dtype=torch.bool)
    return mask


# Keywords that join two expressions: a line cannot begin with them.
_INFIX_KEYWORDS = frozenset({"and", "as", "in", "is", "or"})


def _begins_statement(text: str) -> bool:
    if text[0] in "_\"'([{@#-~*":
        return True
    word = text.split(None, 1)[0] if text[0].isalnum() else ""
    return bool(word) and word not in _INFIX_KEYWORDS


def fim_prompt(
    tokenizer: TextTokenizer, prefix: str, suffix: str, order: str = "spm", token_healing: bool = True
) -> Prompt:
    sp = tokenizer.special
    if not sp.has_fim:
        raise PromptFormatError("the tokenizer has no FIM tokens (<|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>)")
    if order not in FIM_ORDERS:
        raise ValueError(f"unknown FIM order {order!r}: expected one of {FIM_ORDERS}")
    healed, allowed = "", None
    if token_healing and (indentation := heal_indentation(tokenizer, prefix)) is not None:
        prefix_ids, healed, allowed = indentation
    else:
        prefix_ids = tokenizer.encode(prefix)
        if token_healing:
            prefix_ids, healed, allowed = heal(tokenizer, prefix_ids)
    suffix_ids = tokenizer.encode(suffix)
    if order == "spm":
        ids = [sp.fim_suffix, *suffix_ids, sp.fim_prefix, *prefix_ids, sp.fim_middle]
    else:
        ids = [sp.fim_prefix, *prefix_ids, sp.fim_suffix, *suffix_ids, sp.fim_middle]
    return Prompt(ids=ids, healed_text=healed, first_token_allowed=allowed)  # type: ignore[arg-type]


def explain_prompt(tokenizer: TextTokenizer, code: str) -> Prompt:
    """`<|explain_code|> code <|explain_text|>`: the answer follows, ended by end-of-text. The code is laid out
    as in training (decoder/training/corpus.explain_example): dedented, no blank lines around it, a newline
    before <|explain_text|>; so a method selected inside its class reads like any function."""
    sp = tokenizer.special
    if sp.explain_code is None or sp.explain_text is None:
        raise PromptFormatError("the tokenizer has no explain tokens (<|explain_code|>, <|explain_text|>)")
    code = textwrap.dedent(code).strip("\n")
    return Prompt(ids=[sp.explain_code, *tokenizer.encode(code + "\n"), sp.explain_text])


_CLOSING_QUOTES = ('"""', "'''")


def stop_before_closing_quotes(tokenizer: TextTokenizer) -> StopAt:
    """A stop_at rule for answers in our explain format, which are a docstring's text: that text cannot hold
    the docstring's closing quotes, so a model that writes them has finished the answer and gone on to the
    code after it. Keeps the tokens before the one the quotes start in."""

    def stop_at(ids: list[int]) -> int | None:
        # Quotes just written lie within the last few tokens; decode the whole answer only once they are there.
        if not any(q in tokenizer.decode(ids[-4:]) for q in _CLOSING_QUOTES):
            return None
        text = tokenizer.decode(ids)
        found = [i for q in _CLOSING_QUOTES if (i := text.find(q)) >= 0]
        if not found:
            return None
        keep = 0
        while len(tokenizer.decode(ids[: keep + 1])) <= min(found):
            keep += 1
        return keep

    return stop_at


def explain_stop_rule(tokenizer: TextTokenizer, stop_on_loops: bool = True) -> StopAt | None:
    """Where an explanation ends besides end-of-text: where it starts looping (it would not recover), and in
    our explain format before closing docstring quotes."""
    return earliest_stop(
        stop_on_loop() if stop_on_loops else None,
        stop_before_closing_quotes(tokenizer) if has_explain_tokens(tokenizer) else None,
    )


EXPLAIN_INSTRUCTION = "Explain what the following code does, briefly and precisely."


def chat_explain_prompt(
    tokenizer: TextTokenizer,
    code: str,
    language: str = "python",
    instruction: str = EXPLAIN_INSTRUCTION,
    system: str | None = None,
) -> Prompt:
    """The explain request as one user turn of an instruct model, rendered with the checkpoint's template."""
    if tokenizer.chat_template is None:
        raise PromptFormatError("the tokenizer has no chat template (tokenizer_config.json or chat_template.jinja)")
    messages = [] if system is None else [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": f"{instruction}\n\n```{language}\n{code}\n```"})
    return Prompt(ids=tokenizer.encode(render_chat(tokenizer, messages)))


def has_explain_tokens(tokenizer: TextTokenizer) -> bool:
    """Whether explain prompts use our own format (`explain_prompt`): the tokenizer has both explain tokens."""
    return tokenizer.special.explain_code is not None and tokenizer.special.explain_text is not None


def build_explain_prompt(tokenizer: TextTokenizer, code: str, language: str = "python") -> Prompt:
    """Our explain tokens when the tokenizer has them, else the chat template, else a plain comment cue."""
    if has_explain_tokens(tokenizer):
        return explain_prompt(tokenizer, code)
    if tokenizer.chat_template is not None:
        return chat_explain_prompt(tokenizer, code, language)
    return Prompt(ids=tokenizer.encode(f"{code}\n\n# In plain words, the code above\n#"))


def render_chat(tokenizer: TextTokenizer, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """Render a chat template the way transformers does, in a sandbox (templates are data, never code).

    The environment matches transformers' (trim_blocks, lstrip_blocks, loop controls, `raise_exception`,
    a `tojson` filter); Qwen3-style templates get enable_thinking=False so the answer starts at once.
    """
    import json

    try:
        from jinja2 import TemplateError
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as exc:  # jinja2 comes with torch; say so if an environment lacks it
        raise PromptFormatError(f"rendering a chat template needs jinja2 ({exc})") from exc

    def raise_exception(message: str) -> None:
        raise PromptFormatError(f"chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda value, indent=None, **_: json.dumps(value, indent=indent, ensure_ascii=False)
    env.globals["raise_exception"] = raise_exception
    config = tokenizer.token_config

    def token(name: str) -> str:
        value = config.get(name)
        return value.get("content", "") if isinstance(value, dict) else value or ""

    try:
        template = env.from_string(tokenizer.chat_template or "")
        return template.render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=token("bos_token"),
            eos_token=token("eos_token"),
            tools=None,
            enable_thinking=False,
        )
    except TemplateError as exc:
        raise PromptFormatError(f"cannot render the chat template: {exc}") from exc


def plain_prompt(tokenizer: TextTokenizer, text: str, token_healing: bool = False) -> Prompt:
    ids = tokenizer.encode(text)
    if token_healing and len(ids) > 1:
        ids, healed, allowed = heal(tokenizer, ids)
        return Prompt(ids=ids, healed_text=healed, first_token_allowed=allowed)
    return Prompt(ids=ids)
