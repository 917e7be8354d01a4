"""Where an inline item goes (no model): the selected suggest item leads the text and the range, the range
never leaves the cursor line, and the cursor's shape picks the mode."""

from __future__ import annotations

from lsp_server.documents import Document
from lsp_server.inline import InlineRequest, SelectedItem, answer_for, surroundings
from lsp_server.postprocess import Candidate

TEXT = "items = []\nitems.ap\nprint(items)\n"
CURSOR = TEXT.index("items.ap") + len("items.ap")


def test_the_selected_item_leads_the_text_and_the_range():
    sel = SelectedItem(start=CURSOR - 2, end=CURSOR, text="append")
    geo = surroundings(InlineRequest("u", Document("u", TEXT), CURSOR, sel))
    assert geo.line_prefix == "items.append" and geo.lead == "append" and geo.anchor == CURSOR - 2
    answer = answer_for(geo, Candidate("(1)"), "block", "length")
    assert answer.text == "append(1)" and (answer.start, answer.end) == (CURSOR - 2, CURSOR)
    assert answer_for(geo, None, "none", "empty").text is None


def test_the_range_stays_on_the_cursor_line():
    text = "print(x\n"
    cursor = text.index("x") + 1
    geo = surroundings(InlineRequest("u", Document("u", text), cursor))
    answer = answer_for(geo, Candidate(")", replace_chars=5), "block", "length")
    assert answer.end == geo.line_end == cursor  # clamped: nothing after the cursor on this line
    assert geo.shape.multiline  # no word characters follow the cursor
    mid = surroundings(InlineRequest("u", Document("u", TEXT), TEXT.index("items)")))
    assert not mid.shape.multiline and mid.line_suffix == "items)"


def test_the_stop_rule_follows_the_shape():
    from lsp_server.context import completion_shape
    from lsp_server.inline import stop_rule_for
    from lsp_server.settings import Settings

    inside = stop_rule_for(completion_shape("numbers = [", ""), Settings())
    assert inside("1, 2]\n\ndef f():\n") == len("1, 2]")  # the line that closes the bracket
    body = stop_rule_for(completion_shape("def f():", ""), Settings())
    assert body("\n    return 1\nx = 2\n") == len("\n    return 1")  # the indented block
    line = stop_rule_for(completion_shape("x = ", ""), Settings())
    assert line("a list of a list of a list of a\n") == len("a list of ")  # one copy of a loop
