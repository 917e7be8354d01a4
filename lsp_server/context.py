"""The text around the cursor that the model sees: prefix and suffix cut on a stable line grid.

The prompt is SPM (`<suffix> S <prefix> P <middle>`), so the prefix cache can reuse everything up to the
cursor as long as the suffix and the start of the prefix stay put. "The last N characters" would move the
start with every keystroke and nothing could be reused; here the prefix starts at a line that is a
multiple of `grid`, and the suffix ends at one, so both move only when the cursor crosses a grid line.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, replace

from lsp_server.documents import for_model
from lsp_server.postprocess import OPENERS, BracketScanner

_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class ContextBudget:
    lines_before: int = 128
    lines_after: int = 32
    grid: int = 32
    chars_before: int = 6000
    chars_after: int = 2000

    def halved(self) -> ContextBudget:
        """A smaller window on the same grid (used when the prompt does not fit the token budget)."""
        return replace(
            self,
            lines_before=max(1, self.lines_before // 2),
            grid=max(1, self.grid // 2),  # a coarse grid would jump straight past a short window
            lines_after=self.lines_after // 2,
            chars_before=max(1, self.chars_before // 2),
            chars_after=self.chars_after // 2,
        )


@dataclass(frozen=True)
class Window:
    start: int  # document offset where the prefix starts
    cursor: int  # where the completion goes
    cursor_end: int  # end of the text the completion replaces (== cursor unless a selected item replaces some)
    end: int  # document offset where the suffix ends

    # The prompt's text: lone surrogates (kept in the document) would make the tokenizer raise.
    def prefix(self, text: str) -> str:
        return for_model(text[self.start : self.cursor])

    def suffix(self, text: str) -> str:
        return for_model(text[self.cursor_end : self.end])


def _ceil(n: int, grid: int) -> int:
    return -(-n // grid) * grid


def build_window(text: str, line_starts: list[int], cursor: int, cursor_end: int, budget: ContextBudget) -> Window:
    """Prefix from a grid line before `cursor`, suffix from `cursor_end` to a grid line after it."""
    grid = max(1, budget.grid)
    line = _line_of(line_starts, cursor)
    end_line = _line_of(line_starts, cursor_end)

    first = min(line, _ceil(max(0, line - budget.lines_before), grid))
    fits = bisect_left(line_starts, cursor - budget.chars_before)  # the first line that starts within budget
    if fits > first:  # long lines: the character budget decides, on the coarsest grid that keeps half of it
        keep = max(1, (line - fits + 1) // 2)
        first = next((f for g in _finer(grid) if line - (f := _ceil(fits, g)) >= keep), line)
    start = line_starts[first]
    if cursor - start > budget.chars_before:  # one very long line: cut inside it (not stable, but rare)
        start = cursor - budget.chars_before

    last = ((end_line + budget.lines_after) // grid + 1) * grid  # exclusive
    fits = bisect_right(line_starts, cursor_end + budget.chars_after) - 1  # the last line end within budget
    if fits < last and _offset(text, line_starts, last) - cursor_end > budget.chars_after:
        keep = max(1, (fits - end_line) // 2)
        last = next((f for g in _finer(grid) if (f := fits // g * g) - end_line - 1 >= keep), end_line + 1)
    end = _offset(text, line_starts, last)
    if end - cursor_end > budget.chars_after:
        end = cursor_end + budget.chars_after
    return Window(start=start, cursor=cursor, cursor_end=cursor_end, end=max(end, cursor_end))


def _finer(grid: int) -> list[int]:
    """The grid, then finer ones down to single lines. A window's edges sit on the coarsest grid that keeps at
    least half the lines the character budget allows: on lines of 200+ characters one 32-line step is more
    than the whole budget, and stepping by it left the prompt with the cursor's line alone."""
    steps = [grid]
    while steps[-1] > 1:
        steps.append(steps[-1] // 2)
    return steps


def _line_of(line_starts: list[int], offset: int) -> int:
    return bisect_right(line_starts, offset) - 1


def _offset(text: str, line_starts: list[int], line: int) -> int:
    return line_starts[line] if line < len(line_starts) else len(text)


@dataclass(frozen=True)
class Shape:
    multiline: bool  # False: complete the rest of this line only
    indent: int  # a multi-line completion stops before a later line indented less than this
    open_brackets: int = 0  # brackets the cursor's line leaves open: the completion ends with the line closing them


def completion_shape(line_prefix: str, line_suffix: str) -> Shape:
    """The rest of the line, or a block scoped by indentation.

    A block where one is being started: on a blank or indentation-only line, after a line that opens a block
    (ends with ':'; the block is then the deeper-indented body, so the completion stops at the first later line
    back at this line's indentation), or inside brackets the line leaves open (arguments, items). Anywhere else
    (word characters after the cursor, or mid-statement) the rest of this line only: a longer guess there is
    mostly noise, and stopping at the newline keeps it fast.
    """
    line = line_prefix + line_suffix
    indent = len(line) - len(line.lstrip(" \t"))
    code = line_prefix.strip()
    if code.endswith(":"):
        indent += 1
    elif not code:
        indent = len(line_prefix)  # on a blank or indentation-only line the cursor column is the block
    brackets = open_brackets(line_prefix)
    starts_block = not code or code.endswith(":") or brackets > 0
    return Shape(multiline=starts_block and _WORD.search(line_suffix) is None, indent=indent, open_brackets=brackets)


def stop_when_closed(open_count: int) -> Callable[[str], int | None]:
    """A text stop rule for a completion inside brackets: stop at the end of the line on which the completion
    closes the `open_count` brackets left open before the cursor (`numbers = [` -> `1, 2, 3]`, not the code
    the model would go on to write after it)."""

    def rule(text: str) -> int | None:
        depth = 0
        for i, ch in BracketScanner().feed(text):
            depth += 1 if ch in OPENERS else -1
            if depth <= -open_count:
                end = text.find("\n", i)
                return None if end < 0 else end
        return None

    return rule


def open_brackets(line: str) -> int:
    """How many brackets one line of Python leaves open (string literals and a comment skipped)."""
    depth = 0
    for _, ch in BracketScanner().feed(line):
        depth = depth + 1 if ch in OPENERS else max(0, depth - 1)
    return depth
