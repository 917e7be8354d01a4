"""Inline-completion post-processing: small pure rules run in a fixed chain (after Tabby's postprocess/).

Each rule takes the cursor's surroundings and a candidate and returns a candidate, or None to drop it.
The model's raw text goes in; what comes out is what the editor shows. No model, no I/O: every rule has
golden cases in tests/lsp/test_postprocess.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

_WORD = re.compile(r"\w")
OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {v: k for k, v in OPENERS.items()}
INVALID = "\ufffd"  # what decoding puts for bytes that are not UTF-8


@dataclass(frozen=True)
class RuleContext:
    prefix: str  # text the model saw before the cursor (bracket state comes from it)
    line_prefix: str  # the cursor line before the cursor
    line_suffix: str  # the cursor line after the cursor, without its end of line
    next_lines: str  # text after the cursor line's end of line
    multiline: bool  # False: the rest of this line only
    indent: int  # multi-line: stop before a later line indented less than this
    max_lines: int = 16


@dataclass(frozen=True)
class Candidate:
    text: str
    replace_chars: int = 0  # characters after the cursor, on its line, that the item replaces


Rule = Callable[[RuleContext, Candidate], "Candidate | None"]


def block_end(text: str, indent: int, max_lines: int) -> int:
    """Length of `text` up to the end of the block: before the first later line indented less than
    `indent`, and at most `max_lines` lines."""
    lines = text.split("\n")
    offset = len(lines[0])
    for count, line in enumerate(lines[1:], start=2):
        stripped = line.lstrip(" \t")
        if count > max_lines or (stripped and len(line) - len(stripped) < indent):
            return offset
        offset += 1 + len(line)
    return len(text)


def cut_invalid_bytes(ctx: RuleContext, c: Candidate) -> Candidate | None:
    """Cut at the first U+FFFD: the model wrote bytes that are not UTF-8 and decoding turned them into it. Kept
    where the document around the cursor holds one too (the model may be copying it)."""
    cut = c.text.find(INVALID)
    if cut < 0 or any(INVALID in part for part in (ctx.prefix, ctx.line_suffix, ctx.next_lines)):
        return c
    return replace(c, text=c.text[:cut])


def limit_scope(ctx: RuleContext, c: Candidate) -> Candidate | None:
    """Single-line mode keeps the first line; multi-line mode keeps the current block."""
    text = c.text.replace("\r\n", "\n").replace("\r", "\n")
    if not ctx.multiline:
        return replace(c, text=text.split("\n", 1)[0])
    return replace(c, text=text[: block_end(text, ctx.indent, ctx.max_lines)])


def trim_trailing_whitespace(ctx: RuleContext, c: Candidate) -> Candidate | None:
    return replace(c, text=c.text.rstrip())


def trim_suffix_overlap(ctx: RuleContext, c: Candidate) -> Candidate | None:
    """Never repeat what already follows the cursor: whole trailing lines equal to the next lines of the
    document, then trailing characters equal to the start of what stays of the cursor line after the item
    (the characters the item replaces are not counted, and neither are closers that are the item's own)."""
    text = c.text
    if "\n" in text:
        lines = text.split("\n")
        following = [line.rstrip() for line in ctx.next_lines.replace("\r\n", "\n").split("\n")]
        for k in range(len(lines) - 1, 0, -1):
            tail = [line.rstrip() for line in lines[-k:]]
            if any(tail) and tail == following[:k]:
                text = "\n".join(lines[:-k]).rstrip()
                break
    rest = ctx.line_suffix[c.replace_chars :]
    whole = len(rest.rstrip())
    keep = own_end(ctx, text, c.replace_chars)
    for k in range(min(len(rest), len(text) - keep), 0, -1):
        piece = rest[:k]
        # Only the whole rest of the line or punctuation (auto-closed brackets, quotes): a single shared
        # word character is more likely coincidence than repetition.
        if text.endswith(piece) and (k == whole or not _WORD.search(piece)) and piece.strip():
            text = text[:-k]
            break
    return replace(c, text=text)


class BracketScanner:
    """Brackets outside string literals and `#` comments, carrying the string state across `feed` calls."""

    def __init__(self) -> None:
        self.quote: str | None = None
        self.comment = False
        self.string_end: int | None = None  # in the last `feed`: just past the first string's closing quote

    def feed(self, text: str) -> list[tuple[int, str]]:
        found: list[tuple[int, str]] = []
        self.string_end = None
        i, n = 0, len(text)
        while i < n:
            ch = text[i]
            if self.comment:
                self.comment = ch != "\n"
            elif self.quote is not None:
                if ch == "\\":
                    i += 1
                elif text.startswith(self.quote, i):
                    i += len(self.quote) - 1
                    self.quote = None
                    if self.string_end is None:
                        self.string_end = i + 1
                elif ch == "\n" and len(self.quote) == 1:
                    self.quote = None  # an unterminated one-line string ends with its line
            elif ch == "#":
                self.comment = True
            elif ch in "'\"":
                self.quote = ch * 3 if text.startswith(ch * 3, i) else ch
                i += len(self.quote) - 1
            elif ch in OPENERS or ch in CLOSERS:
                found.append((i, ch))
            i += 1
        return found


@dataclass(frozen=True)
class Closings:
    """What a completion closes, by index in its text (each index just past the closing text)."""

    outer: tuple[tuple[int, str], ...]  # the string, then the brackets, open at the cursor, innermost first
    own: tuple[int, ...]  # closers of brackets the completion opened itself
    stray: int | None  # the first closer that closes nothing (outer stops there)
    closes_all: bool  # the completion closes every bracket open at the cursor before `stray`


def scan_closings(prefix: str, text: str) -> Closings:
    scanner = BracketScanner()
    stack: list[str] = []
    for _, ch in scanner.feed(prefix):
        if ch in OPENERS:
            stack.append(ch)
        elif stack and stack[-1] == CLOSERS[ch]:
            stack.pop()
    outer, quote = len(stack), scanner.quote  # brackets and string still open at the cursor
    found = scanner.feed(text)
    closed: list[tuple[int, str]] = [(scanner.string_end, quote)] if quote and scanner.string_end else []
    own: list[int] = []
    stray: int | None = None
    for i, ch in found:
        if ch in OPENERS:
            stack.append(ch)
        elif not stack or stack[-1] != CLOSERS[ch]:
            stray = i if stray is None else stray
        else:
            stack.pop()
            if len(stack) >= outer:
                own.append(i + 1)
            elif stray is None:
                outer -= 1
                closed.append((i + 1, ch))
    return Closings(tuple(closed), tuple(own), stray, outer == 0)


def match_auto_closed(line_suffix: str, outer: tuple[tuple[int, str], ...]) -> list[tuple[int, int]]:
    """(characters of `line_suffix` replaced, index in the text) after each closing in `outer` that the editor
    had already auto-closed after the cursor, in order; a string quote it did not auto-close is skipped."""
    steps: list[tuple[int, int]] = []
    replaced = 0
    for end, closing in outer:
        if line_suffix.startswith(closing, replaced):
            replaced += len(closing)
        elif closing in CLOSERS:
            break
        steps.append((replaced, end))
    return steps


def own_end(ctx: RuleContext, text: str, replace_chars: int) -> int:
    """End of the part of `text` whose closers are the completion's own: brackets it opened, and the
    auto-closed characters it already replaces."""
    closings = scan_closings(ctx.prefix, text)
    steps = match_auto_closed(ctx.line_suffix, closings.outer)
    replacing = [end for replaced, end in steps if 0 < replaced <= replace_chars]  # 0: a quote not auto-closed
    return max((*closings.own, *replacing), default=0)


def drop_echo(text: str, start: int, echoed: str) -> str:
    """Drop what follows `start` on its line when it only repeats `echoed`: the model wrote the auto-closed text
    that followed the cursor, then wrote it again."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    after = text[start:line_end]
    if echoed and after and (echoed * len(after)).startswith(after):
        return text[:start] + text[line_end:]
    return text


def balance_brackets(ctx: RuleContext, c: Candidate) -> Candidate | None:
    """Cut at a closing bracket that closes nothing; when the completion closes brackets (and the string) open
    before the cursor that the editor already auto-closed after it, replace those auto-closed characters."""
    closings = scan_closings(ctx.prefix, c.text)
    text = c.text if closings.stray is None else c.text[: closings.stray].rstrip()
    steps = match_auto_closed(ctx.line_suffix, closings.outer)
    replaced, end = steps[-1] if steps else (0, 0)
    if closings.closes_all and len(steps) == len(closings.outer):
        text = drop_echo(text, end, ctx.line_suffix[:replaced])
    return replace(c, text=text, replace_chars=max(c.replace_chars, replaced))


def drop_blank(ctx: RuleContext, c: Candidate) -> Candidate | None:
    return c if c.text.strip() else None


# balance_brackets runs before trim_suffix_overlap: once the item replaces an auto-closed bracket, that
# bracket no longer follows the completion and must not be trimmed from it.
# cut_invalid_bytes runs first: no later rule should keep or balance text past the invalid bytes.
CHAIN: tuple[Rule, ...] = (
    cut_invalid_bytes,
    limit_scope,
    trim_trailing_whitespace,
    balance_brackets,
    trim_suffix_overlap,
    drop_blank,
)


def postprocess(ctx: RuleContext, text: str, chain: tuple[Rule, ...] = CHAIN) -> Candidate | None:
    candidate: Candidate | None = Candidate(text)
    for rule in chain:
        candidate = rule(ctx, candidate)
        if candidate is None:
            return None
    return candidate
