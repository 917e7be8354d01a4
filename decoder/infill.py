"""Fill in the middle between a prefix and a suffix: FIM prompt, token healing, decoding, text stop rules.

This is the model-level operation behind an inline completion and behind `parafill eval`. Editor rules
that only trim the answer (suffix overlap, brackets) live in the LSP layer; rules that end generation
early (end of line, end of the indented block) live here, so no forward pass is spent past them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from decoder.engine import Engine
from decoder.generation import GenerationControl, GenerationParams, GenerationResult, earliest_stop
from decoder.prompts import fim_prompt
from decoder.repetition import line_loop_cut
from decoder.router import generate

# A text stop rule: given the completion text so far, the length to keep if generation should stop.
TextStopRule = Callable[[str], int | None]


def stop_at_line_end(text: str) -> int | None:
    cut = text.find("\n")
    if cut < 0:
        return None
    return cut - 1 if cut and text[cut - 1] == "\r" else cut  # a CRLF file's line ends before its "\r"


def without_loops(rule: TextStopRule) -> TextStopRule:
    """`rule`, and also stop where the text kept so far ends in a loop within a line ("a list of a list of
    ..."), keeping its first copy (decoder/repetition.line_loop_cut)."""

    def cut_loops(text: str) -> int | None:
        cut = rule(text)
        kept = text if cut is None else text[:cut]
        loop = line_loop_cut(kept.rstrip("\n"))  # the final check sees the text with a newline added
        return cut if loop is None else loop

    return cut_loops


def earliest(*rules: TextStopRule) -> TextStopRule:
    """Stop where the first of `rules` would."""
    combined = earliest_stop(*rules)
    if combined is None:
        raise ValueError("earliest() needs at least one rule")
    return combined


def completion_stop_rule(multiline: bool, indent: int, max_lines: int) -> TextStopRule:
    """The stop rule of a completion (the server's and `parafill eval`'s): the end of the line, or the end of
    the indented block; either way, no loops."""
    return without_loops(stop_at_block_end(indent, max_lines) if multiline else stop_at_line_end)


def stop_at_block_end(indent: int, max_lines: int = 16, max_cycle: int = 3) -> TextStopRule:
    """Stop before the first complete line (after the first) indented less than `indent`, before lines that
    repeat the ones just before them (one to `max_cycle` lines: a small model's loop, never wanted in ghost
    text), or after `max_lines` lines."""

    def rule(text: str) -> int | None:
        lines = text.split("\n")
        kept = len(lines[0])  # end of the text kept so far
        if max_lines <= 1:
            return kept if len(lines) > 1 else None
        # Non-blank lines so far, each with where the text would be cut before it. The first line starts at the
        # cursor: on a blank line that is the block's indentation, so compare it with that indentation.
        seen = [(" " * indent + lines[0], 0)] if lines[0].strip() else []
        for count, line in enumerate(lines[1:-1], start=2):  # the last piece may still be growing
            stripped = line.lstrip(" \t").rstrip("\r")  # in a CRLF file a blank line is "\r", not a dedent
            if stripped:
                if len(line) - len(stripped) < indent:
                    return kept
                seen.append((line, kept))
                if (cut := _cycle_start(seen, max_cycle)) is not None:
                    return cut
            kept += 1 + len(line)
            if count >= max_lines:
                return kept
        return None

    return rule


def _cycle_start(seen: list[tuple[str, int]], max_cycle: int) -> int | None:
    """Where the last k lines began, if they repeat the k lines before them (blank lines ignored)."""
    for k in range(1, max_cycle + 1):
        if len(seen) >= 2 * k and [t for t, _ in seen[-k:]] == [t for t, _ in seen[-2 * k : -k]]:
            return seen[-k][1]
    return None


@dataclass
class InfillResult:
    text: str  # what goes at the cursor (healed text removed, cut by the stop rule)
    generation: GenerationResult
    healed_text: str


def tokens_spelling(decode: Callable[[list[int]], str], ids: list[int], kept: str) -> int:
    """How many of `ids` it takes to spell `kept` (a prefix of their text). Compared as text, not by length:
    a character split over byte tokens ("é" is two in a byte-level BPE) decodes half-way as one U+FFFD, which
    a length would count as the whole character and cut it in two."""
    return next(k for k in range(len(ids) + 1) if decode(ids[:k]).startswith(kept))


def infill(
    engine: Engine,
    prefix: str,
    suffix: str,
    mode: str,
    params: GenerationParams,
    stop_rule: TextStopRule | None = None,
    control: GenerationControl | None = None,
    order: str = "spm",
    token_healing: bool = True,
) -> InfillResult:
    tok = engine.tokenizer
    prompt = fim_prompt(tok, prefix, suffix, order=order, token_healing=token_healing)
    stops = set(params.stop_token_ids) | {t for t in (tok.special.end_of_text, tok.special.fim_pad) if t is not None}
    params = replace(params, stop_token_ids=frozenset(stops))
    healed = prompt.healed_text

    def completion_text(ids: list[int]) -> str:
        text = tok.decode(ids)
        return text[len(healed) :] if text.startswith(healed) else text

    def stop_at(ids: list[int]) -> int | None:
        if stop_rule is None or (cut := stop_rule(text := completion_text(ids))) is None:
            return None
        # Keep the tokens that make up the kept text; the last one may run past the cut (a newline merged with
        # the next line's indentation), and the text is cut below. Tokens after it, decoded in the same pass
        # (a block step commits several), are not part of the completion: they are neither returned nor counted.
        return tokens_spelling(completion_text, ids, text[:cut])

    control = replace(control or GenerationControl(), first_token_allowed=prompt.first_token_allowed, stop_at=stop_at)
    result = generate(engine, prompt.ids, mode, params, control)
    text = completion_text(result.token_ids)
    if stop_rule is not None and (cut := stop_rule(text + "\n")) is not None:
        text = text[:cut]
    return InfillResult(text=text, generation=result, healed_text=healed)
