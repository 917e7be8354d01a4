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
    (the characters the item replaces are not counted)."""
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
    for k in range(min(len(rest), len(text)), 0, -1):
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

    def feed(self, text: str) -> list[tuple[int, str]]:
        found: list[tuple[int, str]] = []
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


def balance_brackets(ctx: RuleContext, c: Candidate) -> Candidate | None:
    """Cut at a closing bracket that closes nothing; when the completion closes brackets opened before
    the cursor that the editor already auto-closed after it, replace those auto-closed characters."""
    scanner = BracketScanner()
    stack: list[str] = []
    for _, ch in scanner.feed(ctx.prefix):
        if ch in OPENERS:
            stack.append(ch)
        elif stack and stack[-1] == CLOSERS[ch]:
            stack.pop()
    outer = len(stack)  # brackets still open at the cursor
    closed_outer: list[str] = []  # closers in the completion that close those, innermost first
    for i, ch in scanner.feed(c.text):
        if ch in OPENERS:
            stack.append(ch)
            continue
        if not stack or stack[-1] != CLOSERS[ch]:
            return replace(c, text=c.text[:i].rstrip(), replace_chars=0)
        stack.pop()
        if len(stack) < outer:
            outer -= 1
            closed_outer.append(ch)
    auto_closed = 0
    for expected, actual in zip(closed_outer, ctx.line_suffix, strict=False):
        if expected != actual:
            break
        auto_closed += 1
    return replace(c, replace_chars=max(c.replace_chars, auto_closed))


def drop_blank(ctx: RuleContext, c: Candidate) -> Candidate | None:
    return c if c.text.strip() else None


# balance_brackets runs before trim_suffix_overlap: once the item replaces an auto-closed bracket, that
# bracket no longer follows the completion and must not be trimmed from it.
CHAIN: tuple[Rule, ...] = (limit_scope, trim_trailing_whitespace, balance_brackets, trim_suffix_overlap, drop_blank)


def postprocess(ctx: RuleContext, text: str, chain: tuple[Rule, ...] = CHAIN) -> Candidate | None:
    candidate: Candidate | None = Candidate(text)
    for rule in chain:
        candidate = rule(ctx, candidate)
        if candidate is None:
            return None
    return candidate
