"""The server as a subprocess under load: a burst of superseding/cancelled requests, prefix-cache reuse and
typed-ahead reuse across keystrokes, and inline completions served while an explain runs."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from lsp_server.protocol import plain
from tests.lsp.session import SAMPLE, doc_uri, end_of_line_with, position_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

INLINE = types.TEXT_DOCUMENT_INLINE_COMPLETION


def _items(result) -> list[types.InlineCompletionItem]:
    return list(result.items if isinstance(result, types.InlineCompletionList) else result or [])


async def test_burst_of_50_superseding_requests_is_fully_answered_and_stops_cancelled_work(shared):
    text = SAMPLE.read_text()
    uri = doc_uri("burst.py")
    shared.open(uri, text)
    before = await shared.stats()
    cursor = end_of_line_with(text, "return self.price * self.quantity")
    typed = "\n        value = self.price"  # typed one character per request, as an editor would
    pending, ids = [], []
    started = time.monotonic()
    for i in range(50):
        line, col = position_of(text, cursor)
        ch = typed[i % len(typed)]
        shared.insert(uri, i + 2, line, col, ch)
        text, cursor = text[:cursor] + ch + text[cursor:], cursor + 1
        line, col = position_of(text, cursor)
        msg_id = shared.next_id()
        pending.append(shared.send(INLINE, shared.inline_params(uri, line, col), msg_id))
        if ids:
            shared.cancel(ids[-1])  # the editor cancels the request it no longer needs
        ids.append(msg_id)
    results = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 90)
    elapsed = time.monotonic() - started

    assert len(results) == 50
    for result in results[:-1]:  # each older one: -32800 (cancelled) or an empty list (superseded)
        assert isinstance(result, JsonRpcRequestCancelled) or _items(result) == [], result
    assert _items(results[-1]), "the last request gets a completion"
    assert elapsed < 60

    first, second = await shared.quiet_stats()
    assert second["active"] == 0 and second["scheduler"]["inline_running"] == 0
    assert second["pass_checks"] == first["pass_checks"] and second["forward_passes"] == first["forward_passes"]
    stopped = second["cancelled"] + second["superseded"] - before["cancelled"] - before["superseded"]
    assert stopped == 49
    # Cancelled work stopped early: the whole burst cost less than a few full requests.
    full = second["last"]["inline"]["forward_passes"] or 1
    assert second["forward_passes"] - before["forward_passes"] <= 5 * max(full, 17)


async def test_typing_a_character_reuses_the_prefix_cache_and_typed_ahead_skips_the_model(shared):
    text = SAMPLE.read_text()
    uri = doc_uri("cache.py")
    shared.open(uri, text)
    cursor = end_of_line_with(text, "def value(self) -> float:")
    line, col = position_of(text, cursor)
    first = await shared.inline(uri, line, col)
    assert first
    # A character that is not the start of the suggestion: the model runs again, on a warm prefix cache.
    ch = "z" if first[0].insert_text.startswith("#") else "#"
    shared.insert(uri, 2, line, col, ch)
    text, cursor = text[:cursor] + ch + text[cursor:], cursor + 1
    second = await shared.inline(uri, line, col + 1)
    last = (await shared.stats())["last"]["inline"]
    assert last["route"] == "block" and last["prompt_tokens"] > 0
    assert last["cached_prompt_tokens"] > 0.5 * last["prompt_tokens"]
    cache = (await shared.stats())["model"]["cache"]
    cached_tokens = cache["cached_pages"] * cache["page_tokens"]
    assert cache["hits"] > 0 and 0 < cached_tokens <= cache["capacity_tokens"]
    assert cache["bytes_used"] == cached_tokens * cache["bytes_per_token"]  # the stated capacity is the real one

    # Typing the first character of the new suggestion: answered from it, with no forward pass.
    assert second and len(second[0].insert_text) >= 2
    suggestion = second[0].insert_text
    passes = (await shared.stats())["forward_passes"]
    shared.insert(uri, 3, line, col + 1, suggestion[0])
    text, cursor = text[:cursor] + suggestion[0] + text[cursor:], cursor + 1
    line, col = position_of(text, cursor)
    third = await shared.inline(uri, line, col)
    stats = await shared.stats()
    assert third and third[0].insert_text == suggestion[1:]
    assert stats["last"]["inline"]["route"] == "typed_ahead" and stats["forward_passes"] == passes


async def test_an_explain_in_progress_does_not_starve_inline_completions(shared):
    text = SAMPLE.read_text()
    uri = doc_uri("both.py")
    shared.open(uri, text)
    rng = {"start": {"line": 24, "character": 0}, "end": {"line": 40, "character": 0}}
    explain = asyncio.ensure_future(
        shared.send("parafill/explain", {"textDocument": {"uri": uri}, "range": rng, "workDoneToken": "both"})
    )
    for _ in range(3000):  # wait until the explain is decoding
        if any(token == "both" and value["kind"] == "report" for token, value in shared.progress):
            break
        await asyncio.sleep(0.01)
    assert any(token == "both" and value["kind"] == "report" for token, value in shared.progress)
    line, col = position_of(text, end_of_line_with(text, "def is_available(self) -> bool:"))
    await shared.inline(uri, line, col)
    assert not explain.done(), "the inline answer came first, while the explain was still running"
    inline = (await shared.stats())["last"]["inline"]
    assert inline["route"] == "block" and inline["forward_passes"] > 0  # the model ran it, mid-explain
    answer = plain(await asyncio.wait_for(explain, 60))
    assert answer["text"] and answer["route"] == "ar"


async def test_inline_completions_never_queue_behind_explanations(shared):
    # More explanations than there are workers: with one shared pool, the suggestion waited for one to end.
    text = SAMPLE.read_text()
    uri = doc_uri("many_explains.py")
    shared.open(uri, text)
    rng = {"start": {"line": 24, "character": 0}, "end": {"line": 40, "character": 0}}
    explains = [
        asyncio.ensure_future(
            shared.send("parafill/explain", {"textDocument": {"uri": uri}, "range": rng, "workDoneToken": f"many-{i}"})
        )
        for i in range(5)
    ]
    for _ in range(3000):  # wait until explanations are decoding
        if any(token.startswith("many-") and value["kind"] == "report" for token, value in shared.progress):
            break
        await asyncio.sleep(0.01)
    line, col = position_of(text, end_of_line_with(text, "def is_available(self) -> bool:"))
    await shared.inline(uri, line, col)
    assert not any(e.done() for e in explains), "the suggestion waited for an explanation to finish"
    answers = [plain(a) for a in await asyncio.wait_for(asyncio.gather(*explains), 120)]
    assert all(a["text"] for a in answers)


async def test_debounce_lets_a_newer_request_supersede_before_any_model_work(shared):
    text = SAMPLE.read_text()
    uri = doc_uri("debounce.py")
    shared.open(uri, text)
    set_debounce = types.DidChangeConfigurationParams(settings={"parafill": {"debounceMs": 300}})
    shared.client.workspace_did_change_configuration(set_debounce)
    try:
        before = await shared.stats()
        line, col = position_of(text, end_of_line_with(text, "def by_tag(self, tag: str) -> list[Item]:"))
        first = shared.send(INLINE, shared.inline_params(uri, line, col))
        await asyncio.sleep(0.05)
        second = shared.send(INLINE, shared.inline_params(uri, line, col))
        assert _items(await asyncio.wait_for(first, 30)) == []  # superseded while waiting
        assert _items(await asyncio.wait_for(second, 60))
        after = await shared.stats()
        assert after["inline_requests"] - before["inline_requests"] == 1  # only the newer one reached the model
        assert after["superseded"] - before["superseded"] == 1
    finally:
        reset = types.DidChangeConfigurationParams(settings={"parafill": {"debounceMs": 0}})
        shared.client.workspace_did_change_configuration(reset)


async def test_the_time_budget_stops_a_request_with_what_is_committed(shared):
    text = SAMPLE.read_text()
    uri = doc_uri("budget.py")
    shared.open(uri, text)
    shared.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"parafill": {"timeBudgetMs": 1}})
    )
    try:
        before = await shared.stats()
        line, col = position_of(text, end_of_line_with(text, "def cheapest(self) -> Item | None:"))
        items = await shared.inline(uri, line, col)
        stats = await shared.stats()
        last = stats["last"]["inline"]
        assert last["stop_reason"] == "time_budget" and stats["inline_time_budget"] == before["inline_time_budget"] + 1
        assert last["tokens"] < 32 and (items == []) == (last["text"] == "")
    finally:
        shared.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"parafill": {"timeBudgetMs": 20000}})
        )
