"""The prompt window sits on a stable grid; the cursor's shape picks single-line or block mode."""

from __future__ import annotations

import pytest

from lsp_server.context import ContextBudget, build_window, completion_shape, open_brackets, stop_when_closed
from lsp_server.documents import Document

TEXT = "".join(f"line_{i} = {i}\n" for i in range(200))
DOC = Document("u", TEXT)


def window_at(line: int, column: int = 4, budget: ContextBudget | None = None):
    cursor = DOC.line_starts[line] + column
    return build_window(TEXT, DOC.line_starts, cursor, cursor, budget or ContextBudget(lines_before=64, lines_after=16))


def test_window_edges_stay_put_while_the_cursor_moves_inside_a_grid_cell():
    starts = {window_at(line).start for line in range(100, 128)}
    ends = {window_at(line).end for line in range(100, 112)}
    assert len(starts) == 1 and len(ends) == 1
    w = window_at(100)
    assert DOC.line_of(w.start) % 32 == 0 and DOC.line_of(w.end) % 32 == 0
    assert 100 - DOC.line_of(w.start) <= 64 and DOC.line_of(w.end) > 100


def test_typing_at_the_cursor_changes_only_the_end_of_the_prefix():
    w = window_at(100)
    typed = TEXT[: w.cursor] + "abc" + TEXT[w.cursor :]
    doc2 = Document("u", typed)
    w2 = build_window(
        typed, doc2.line_starts, w.cursor + 3, w.cursor + 3, ContextBudget(lines_before=64, lines_after=16)
    )
    assert w2.start == w.start and w2.prefix(typed) == w.prefix(TEXT) + "abc" and w2.suffix(typed) == w.suffix(TEXT)


def test_character_budget_moves_the_start_by_whole_grid_steps():
    w = window_at(100, budget=ContextBudget(lines_before=64, lines_after=16, grid=8, chars_before=300))
    assert w.cursor - w.start <= 300 and DOC.line_of(w.start) % 8 == 0
    tiny = window_at(100, column=10, budget=ContextBudget(chars_before=5, chars_after=3))
    assert tiny.cursor - tiny.start == 5 and tiny.end - tiny.cursor_end == 3


def test_long_lines_keep_context_on_a_finer_grid():
    # 256-character lines: one 32-line grid step (8,200 characters) is more than the 6,000-character budget.
    text = "".join(f"row_{i} = [" + ", ".join(["1234567"] * 26) + "]  # " + "x" * 10 + "\n" for i in range(200))
    doc = Document("u", text)
    assert min(len(line) for line in text.splitlines()) > 250
    budget = ContextBudget()
    for line in range(100, 140):
        cursor = doc.line_starts[line] + 10
        w = build_window(text, doc.line_starts, cursor, cursor, budget)
        before, after = line - doc.line_of(w.start), doc.line_of(w.end) - line
        assert before >= 12 and w.cursor - w.start <= budget.chars_before  # was 0 lines at some of these
        assert after >= 4 and w.end - w.cursor <= budget.chars_after
        assert doc.line_of(w.start) % 2 == 0  # still on a grid (of 16, 8, 4 or 2 lines here)
    starts = {build_window(text, doc.line_starts, doc.line_starts[120] + c, doc.line_starts[120] + c, budget).start
              for c in range(0, 200, 10)}  # fmt: skip
    assert len(starts) <= 2  # typing along the line moves the start at most once


def test_halving_keeps_a_useful_window_near_the_top_of_a_file():
    budget = ContextBudget()
    for _ in range(3):
        budget = budget.halved()
    w = window_at(18, budget=budget)
    assert DOC.line_of(w.start) < 18  # not just the cursor line


def test_completion_shape():
    assert completion_shape("x = f(", "value)").multiline is False
    assert completion_shape("x = f(", ")").multiline is True
    assert completion_shape("    def f(self):", "") == completion_shape("    def f(self):", "  ")
    assert completion_shape("    def f(self):", "").indent == 5
    assert completion_shape("        ", "").indent == 8
    assert completion_shape("    return ", "").indent == 4


@pytest.mark.parametrize(
    ("line_prefix", "line_suffix", "multiline"),
    [
        ("", "", True),  # an empty line: a block
        ("        ", "", True),
        ("    def f(self):", "", True),  # the body
        ("numbers = [", "", True),  # items over several lines
        ("x = f(a, g(", "", True),
        ("value = stack.", "", False),  # mid-statement: the rest of this line
        ("    return ", "", False),
        ("x = f(a)", "", False),
        ("s = '(' + t", "", False),  # a bracket inside a string opens nothing
        ("x = 1  # see (", "", False),  # nor one in a comment
        ("x = f(", "value)", False),  # word characters after the cursor: always the rest of the line
    ],
)
def test_a_block_only_where_one_starts(line_prefix, line_suffix, multiline):
    assert completion_shape(line_prefix, line_suffix).multiline is multiline


@pytest.mark.parametrize(
    ("line", "depth"),
    [
        ("f(", 1),
        ("f(a)[", 1),
        ("{[(", 3),
        (")", 0),
        (r's = "(\"(" + (', 1),  # an escaped quote does not end the string
        ("s = '''(", 0),  # an open triple-quoted string
        ("f('#', (", 2),
        ("x # (", 0),
    ],
)
def test_open_brackets(line, depth):
    assert open_brackets(line) == depth


def test_a_completion_inside_brackets_ends_with_the_line_that_closes_them():
    assert completion_shape("numbers = [", "").open_brackets == 1
    assert completion_shape("x = f(a, g(", "").open_brackets == 2
    rule = stop_when_closed(1)
    assert rule("1, 2, 3") is None
    assert rule("1, 2, 3]") is None  # the line may still go on (", 4]" is not possible, "] + rest" is)
    text = "1, 2, 3]\n\ndef get(a):\n    return a\n"
    assert text[: rule(text)] == "1, 2, 3]"
    nested = "\n    (1, 2),\n    (3, 4),\n]\nprint(numbers)\n"
    assert nested[: rule(nested)] == "\n    (1, 2),\n    (3, 4),\n]"
    assert rule("')', ']'\nx = 1\n") is None  # brackets in strings close nothing
    assert stop_when_closed(2)("b)\nc)\nnext\n") == len("b)\nc)")
