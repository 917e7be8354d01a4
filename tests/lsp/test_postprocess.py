"""Golden cases for every inline post-processing rule: document with a cursor (|), raw model text ->
what the editor shows. Pure functions, no model."""

from __future__ import annotations

import pytest

from lsp_server.context import completion_shape
from lsp_server.postprocess import (
    CHAIN,
    Candidate,
    RuleContext,
    balance_brackets,
    block_end,
    cut_invalid_bytes,
    drop_blank,
    limit_scope,
    postprocess,
    trim_suffix_overlap,
    trim_trailing_whitespace,
)

CURSOR = "|"


def ctx_for(document: str, max_lines: int = 16) -> RuleContext:
    """RuleContext for a document written with one `|` where the cursor is."""
    before, after = document.split(CURSOR)
    line_prefix = before.rsplit("\n", 1)[-1]
    line_suffix, _, next_lines = after.partition("\n")
    shape = completion_shape(line_prefix, line_suffix)
    return RuleContext(
        prefix=before,
        line_prefix=line_prefix,
        line_suffix=line_suffix,
        next_lines=next_lines,
        multiline=shape.multiline,
        indent=shape.indent,
        max_lines=max_lines,
    )


def accepted(document: str, candidate: Candidate | None) -> str:
    """The document after the user accepts `candidate` at the cursor: what they end up with."""
    before, after = document.split(CURSOR)
    if candidate is None:
        return before + after
    return before + candidate.text + after[candidate.replace_chars :]


# -- cut_invalid_bytes: U+FFFD is an invalid byte sequence the model wrote, not code ---------------------


@pytest.mark.parametrize(
    ("document", "raw", "expected"),
    [
        ("    self.|\n", "quantity\ufffdish_code = 1", "quantity"),
        ("x = |\n", "\ufffd", ""),
        ("x = |\n", "value", "value"),
        # the document itself holds one (before or after the cursor): the model may be copying it
        ('s = "\ufffd"\nx = |\n', '"\ufffd"', '"\ufffd"'),
        ('x = |\ns = "\ufffd"\n', '"\ufffd"', '"\ufffd"'),
    ],
)
def test_cut_invalid_bytes(document, raw, expected):
    assert cut_invalid_bytes(ctx_for(document), Candidate(raw)).text == expected


# -- limit_scope: the rest of the line, or the block being started (lsp_server.context.completion_shape) -----


@pytest.mark.parametrize(
    ("document", "raw", "expected"),
    [
        # a word follows the cursor: the rest of this line only
        ("x = compute(|value)\n", "2 * \nmore", "2 * "),
        # nothing but a closing bracket follows: multi-line allowed, up to the end of the block
        ("def f(a):\n    return g(|)\n", "a,\n          b", "a,\n          b"),
        # after a line that opens a block: the body, stopping at the first line back at the def's indent
        ("def f(a):|\n", "\n    b = a + 1\n    return b\ndef g():\n    pass", "\n    b = a + 1\n    return b"),
        # inside a body: stop before the dedent
        (
            "class A:\n    def f(self):\n        |",
            "x = 1\n        return x\n    def g(self):",
            "x = 1\n        return x",
        ),
        # mid-statement: the rest of this line
        ("v = |", "1\nw = 2", "1"),
        # CRLF from the model is normalised before scoping
        ("|", "v = 1\r\nw = 2", "v = 1\nw = 2"),
    ],
)
def test_limit_scope(document, raw, expected):
    assert limit_scope(ctx_for(document), Candidate(raw)).text == expected


def test_limit_scope_caps_the_number_of_lines():
    raw = "\n".join(f"    x{i} = {i}" for i in range(10))
    out = limit_scope(ctx_for("def f():\n    |", max_lines=3), Candidate(raw))
    assert out.text.count("\n") == 2


def test_block_end_keeps_blank_lines_inside_the_block():
    text = "a = 1\n\n    b = 2\nc = 3"
    assert text[: block_end(text, indent=4, max_lines=16)] == "a = 1\n\n    b = 2"


# -- trim_trailing_whitespace ------------------------------------------------------------------------


def test_trim_trailing_whitespace():
    assert trim_trailing_whitespace(ctx_for("x = |"), Candidate("1  \n\n")).text == "1"
    assert trim_trailing_whitespace(ctx_for("x = |"), Candidate("  1")).text == "  1"


# -- trim_suffix_overlap: never repeat what already follows the cursor ---------------------------------


@pytest.mark.parametrize(
    ("document", "raw", "expected"),
    [
        ("print(|)\n", "total)", "total"),  # the auto-closed bracket is already there
        ("items = [|]\n", "1, 2]", "1, 2"),
        ('name = "|"\n', 'bob"', "bob"),
        ("f(|))\n", "a))", "a"),  # two closers already follow
        # the model wrote the whole rest of the line again
        ("result = |value + 1\n", "value + 1", ""),
        # one shared word character is coincidence, not repetition: keep it
        ("y = |x + 1\n", "a + x", "a + x"),
        # whole lines equal to the document's next lines are dropped
        ("def f():\n    |\n    return x\n", "x = 1\n    return x", "x = 1"),
        ("def f():\n    |\n    return x\n", "x = 1\n    return y", "x = 1\n    return y"),
        # a closer that balances a bracket the completion opened is the completion's own: kept
        ("    return len(self.|)\n", "items()", "items()"),
        ("y = foo(|)\n", "bar())", "bar()"),
    ],
)
def test_trim_suffix_overlap(document, raw, expected):
    assert trim_suffix_overlap(ctx_for(document), Candidate(raw)).text == expected


def test_trim_suffix_overlap_keeps_closers_the_item_already_replaces():
    # the item's `)` replaces bar's auto-closed one; the `)` left after it is foo's, not a repeat
    out = trim_suffix_overlap(ctx_for("x = foo(bar(|))\n"), Candidate("x)", 1))
    assert out == Candidate("x)", 1)


# -- balance_brackets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "raw", "expected", "replace"),
    [
        # a closer that closes nothing is cut, with what follows it
        ("x = |\n", "a) + 1", "a", 0),
        ("x = |\n", "[1, 2)]", "[1, 2", 0),
        # closing a bracket opened before the cursor is fine
        ("total = sum(|\n", "values) + 1", "values) + 1", 0),
        # ...and when the editor auto-closed it after the cursor, the item replaces that character
        ("total = sum(|)\n", "values) + 1", "values) + 1", 1),
        ("d = {'a': [|]}\n", "1]}", "1]}", 2),
        # brackets inside strings and comments do not count
        ("s = |\n", "'(' + x  # )", "'(' + x  # )", 0),
        # ...the string's auto-closed quote before the auto-closed bracket is replaced with it
        ('print("|")\n', ')")', ')")', 2),
        ('print("|")\n', 'hi") + 1', 'hi") + 1', 2),
        # balanced inside the completion: untouched
        ("x = |\n", "f(a[0], {1: 2})", "f(a[0], {1: 2})", 0),
        # cut at a stray closer after the completion closed the auto-closed bracket: it still replaces it
        ("foo(|)\n", "a) * 2)", "a) * 2", 1),
        # the model echoed the auto-closed suffix after writing it: the echo goes
        ('log.info("|")\n', '>")")")', '>")', 2),
        ('log.info("|")\n', '>")"', '>")', 2),
        # the line's auto-closed text is not all closers: only what the completion wrote before its closer
        ("f(|value)\n", "x)", "x)", 0),
    ],
)
def test_balance_brackets(document, raw, expected, replace):
    out = balance_brackets(ctx_for(document), Candidate(raw))
    assert (out.text, out.replace_chars) == (expected, replace)


# -- drop_blank ---------------------------------------------------------------------------------------


def test_drop_blank():
    assert drop_blank(ctx_for("x = |"), Candidate("  \n\t")) is None
    assert drop_blank(ctx_for("x = |"), Candidate("")) is None
    assert drop_blank(ctx_for("x = |"), Candidate("1")) == Candidate("1")


# -- the whole chain ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "raw", "expected"),
    [
        ("print(|)\n", "total)", Candidate("total)", 1)),
        # the model closed the bracket itself and went on: the item replaces the auto-closed one
        ("print(|)\n", "total)\nprint(other)", Candidate("total)\nprint(other)", 1)),
        # the completion closed the string: the item replaces the auto-closed quote
        ('name = "|"\n', 'bob"', Candidate('bob"', 1)),
        ("total = sum(|)\n", "values) + 1  \n", Candidate("values) + 1", 1)),
        ("def f(a):|\n", "\n    return a\n\n\ndef g():\n", Candidate("\n    return a")),
        ("x = |value\n", "\n", None),  # single-line mode and the model went to the next line
        ("x = |\n", "   ", None),
        ("x = |\n", ")", None),  # only a stray closer
    ],
)
def test_chain(document, raw, expected):
    assert postprocess(ctx_for(document), raw) == expected


@pytest.mark.parametrize(
    ("document", "raw", "expected"),
    [
        # the user's closing brackets are neither lost nor repeated
        ("x = foo(bar(|))\n", "x)", "x = foo(bar(x))\n"),
        ("x = foo(bar(|))\n", "x))", "x = foo(bar(x))\n"),
        ("f(g(|)\n", "a))", "f(g(a))\n"),
        ("    return len(self.|)\n", "items()", "    return len(self.items())\n"),
        ("print(self.|)\n", "items()", "print(self.items())\n"),
        ("y = foo(|)\n", "bar())", "y = foo(bar())\n"),
        ('log.info("|")\n', '>")")")', 'log.info(">")\n'),
        ('print("|")\n', 'hi") + 1', 'print("hi") + 1\n'),
        ('print("|")\n', ')")', 'print(")")\n'),
        ('print("|")\n', 'a", b', 'print("a", b)\n'),
        ('name = "|"\n', 'bob""', 'name = "bob"\n'),
        ('x = "|"\n', 'a" + "b"', 'x = "a" + "b"\n'),
        ("f(g(|))\n", "a)) + 1", "f(g(a)) + 1\n"),
        ('print("|)\n', 'hi")', 'print("hi")\n'),  # only the bracket was auto-closed
        ('s = f"{|}"\n', 'x}"', 's = f"{x}"\n'),  # braces inside an f-string are string text
        ("foo(|)\n", "\n    a,\n    b,\n)", "foo(\n    a,\n    b,\n)\n"),
        ("foo(|)\n", "a) * 2)", "foo(a) * 2\n"),
        # behaviours that stay
        ("print(|)\n", "total)", "print(total)\n"),
        ("print(|)\n", "total", "print(total)\n"),
        ("print(|)\n", "total)\nprint(other)", "print(total)\nprint(other)\n"),
        ("items = [|]\n", "1, 2]", "items = [1, 2]\n"),
        ('name = "|"\n', 'bob"', 'name = "bob"\n'),
        ("total = sum(|)\n", "values) + 1  \n", "total = sum(values) + 1\n"),
        ("d = {'a': [|]}\n", "1]}", "d = {'a': [1]}\n"),
        ("f(|))\n", "a))", "f(a))\n"),
        ("x = |\n", "a) + 1", "x = a\n"),
        ("result = |value + 1\n", "value + 1", "result = value + 1\n"),
        ("f(|value)\n", "value)", "f(value)\n"),
        ("def f():\n    |\n    return x\n", "x = 1\n    return x", "def f():\n    x = 1\n    return x\n"),
        ("    self.|\n", "quantity\ufffdish_code = 1", "    self.quantity\n"),
    ],
)
def test_chain_accepted_line(document, raw, expected):
    assert accepted(document, postprocess(ctx_for(document), raw)) == expected


def test_chain_order_is_fixed():
    names = [rule.__name__ for rule in CHAIN]
    assert names == [
        "cut_invalid_bytes",
        "limit_scope",
        "trim_trailing_whitespace",
        "balance_brackets",
        "trim_suffix_overlap",
        "drop_blank",
    ]
