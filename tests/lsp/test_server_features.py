"""The server as a subprocess over stdio: capabilities, positions with non-BMP text, the selected item,
explain streamed as $/progress (request and command), explain cancelled."""

from __future__ import annotations

import asyncio
import sys

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled

from tests.lsp.faulty_server import FAULT_MESSAGE
from tests.lsp.session import SAMPLE, Session, doc_uri, end_of_line_with, position_of, tiny_options

pytestmark = pytest.mark.asyncio(loop_scope="module")

EMOJI_DOC = 'names = ["😀 smile", "🚀 rocket"]  # ✨\nlabel = "😀" + \nprint(label)\n'


async def test_initialize_advertises_inline_completion_and_explain(shared):
    caps = shared.result.capabilities
    assert caps.inline_completion_provider is not None
    assert "parafill.explain" in caps.execute_command_provider.commands
    assert caps.position_encoding == types.PositionEncodingKind.Utf16
    sync = caps.text_document_sync
    assert sync.change == types.TextDocumentSyncKind.Incremental and sync.open_close


async def test_inline_after_non_bmp_characters_has_a_valid_same_line_range(shared):
    uri = doc_uri("emoji.py")
    shared.open(uri, EMOJI_DOC)
    line, col = position_of(EMOJI_DOC, EMOJI_DOC.index(" + ") + 3)
    assert col == len('label = "😀" + ') + 1  # the emoji counts two UTF-16 units
    items = await shared.inline(uri, line, col)
    assert items, "the tiny model completes here"
    rng = items[0].range
    assert rng.start == types.Position(line, col) and rng.end.line == line
    assert rng.end.character <= len(EMOJI_DOC.splitlines()[line].encode("utf-16-le")) // 2


async def test_min_confidence_holds_back_unsure_ghost_text(shared):
    line, col = position_of(EMOJI_DOC, EMOJI_DOC.index(" + ") + 3)
    shared.open(doc_uri("sure.py"), EMOJI_DOC)
    assert await shared.inline(doc_uri("sure.py"), line, col), "minConfidence 0 (the default) shows everything"
    shared.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"parafill": {"minConfidence": 1.0}})
    )
    try:
        shared.open(doc_uri("unsure.py"), EMOJI_DOC)  # a fresh document: nothing typed ahead to serve
        held_back = await shared.inline(doc_uri("unsure.py"), line, col)
    finally:
        shared.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"parafill": {"minConfidence": 0.0}})
        )
    assert held_back == []  # no token of a random tiny model is certain
    last = (await shared.stats())["last"]["inline"]
    assert last["stop_reason"] == "low_confidence" and last["forward_passes"] > 0  # decoded, then held back


async def test_utf8_positions_when_the_client_offers_only_utf8(tiny_model_dir):
    s = await Session().start(tiny_options(tiny_model_dir), encodings=["utf-8"])
    try:
        assert s.result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
        uri = doc_uri("emoji8.py")
        s.open(uri, EMOJI_DOC)
        line_text = 'label = "😀" + '
        items = await s.inline(uri, 1, len(line_text.encode("utf-8")))
        assert items and items[0].range.start == types.Position(1, len(line_text.encode("utf-8")))
        assert await s.inline(uri, 1, line_text.encode("utf-8").index("😀".encode()) + 2) == []  # inside the emoji
    finally:
        await s.stop()


async def test_inline_honours_the_selected_completion_item(shared):
    text = SAMPLE.read_text()
    uri = doc_uri("selected.py")
    offset = end_of_line_with(text, "return self.price * self.quantity")
    text = text[:offset] + "\n        sel" + text[offset:]
    shared.open(uri, text)
    line, col = position_of(text, offset + len("\n        sel"))
    selected = types.SelectedCompletionInfo(
        range=types.Range(types.Position(line, 8), types.Position(line, col)), text="self"
    )
    items = await shared.inline(uri, line, col, selected=selected)
    assert items and items[0].insert_text.startswith("self")
    assert items[0].range.start == types.Position(line, 8) and items[0].range.end.line == line


def _explain_params(uri: str, token: str | None = None) -> dict:
    rng = {"start": {"line": 16, "character": 0}, "end": {"line": 19, "character": 0}}
    return {"textDocument": {"uri": uri}, "range": rng} | ({"workDoneToken": token} if token else {})


async def test_explain_streams_progress_reports_then_the_full_text(shared):
    uri = doc_uri("explain.py")
    shared.open(uri, SAMPLE.read_text())
    answer = await shared.request("parafill/explain", _explain_params(uri, "explain-1"))
    events = [value for token, value in shared.progress if token == "explain-1"]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "begin" and kinds[-1] == "end" and kinds.count("report") >= 2
    streamed = "".join(e.get("message", "") for e in events if e["kind"] == "report")
    assert answer["text"] and streamed == answer["text"]
    assert answer["route"] == "ar" and answer["forward_passes"] >= 2

    # the command form, with no token: the server creates one (window/workDoneProgress/create)
    before = len(shared.progress)
    rng = types.Range(types.Position(16, 0), types.Position(19, 0))
    params = types.ExecuteCommandParams(command="parafill.explain", arguments=[uri, rng])
    result = await shared.request(types.WORKSPACE_EXECUTE_COMMAND, params)
    created = [value for _, value in shared.progress[before:]]
    assert result["text"] and sum(e["kind"] == "report" for e in created) >= 2


async def test_explain_loads_the_model_when_inline_completions_are_off(tiny_model_dir):
    # `enable: false` turns ghost text off and spares the eager load; an explain still gets the model.
    session = await Session().start(tiny_options(tiny_model_dir, enable=False))
    try:
        uri = doc_uri("disabled.py")
        session.open(uri, SAMPLE.read_text())
        assert (await session.stats())["model"]["state"] == "idle"
        assert await session.inline(uri, *position_of(SAMPLE.read_text(), 40)) == []
        answer = await session.request("parafill/explain", _explain_params(uri, "off-1"))
        assert answer["text"] and answer["route"] == "ar"
        assert [e["kind"] for t, e in session.progress if t == "off-1"][-1] == "end"
        assert (await session.stats())["model"]["state"] == "ready"
    finally:
        await session.stop()


async def test_an_explanation_that_loops_is_ended_there(shared):
    uri = doc_uri("loop.py")
    shared.open(uri, SAMPLE.read_text())
    unstopped = await shared.request("parafill/explain", _explain_params(uri))
    assert unstopped["stop_reason"] == "length" and unstopped["tokens"] == 256  # the tiny model loops on
    shared.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"parafill": {"explainStopOnLoop": True}})
    )
    try:
        stopped = await shared.request("parafill/explain", _explain_params(uri))
    finally:
        shared.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"parafill": {"explainStopOnLoop": False}})
        )
    assert stopped["stop_reason"] == "stop_rule" and stopped["tokens"] < unstopped["tokens"]
    assert unstopped["text"].startswith(stopped["text"])  # the same greedy text, ended where it loops


async def test_explain_drafts_by_prompt_lookup_give_the_same_text_in_fewer_passes(tiny_model_dir):
    # fp32: the server's bf16 default may round a pass over a draft differently from a one-token pass, and a
    # random model's logits are full of near ties, so only fp32 promises the very same text.
    session = await Session().start(tiny_options(tiny_model_dir, dtype="float32"))
    try:
        uri = doc_uri("lookup.py")
        session.open(uri, SAMPLE.read_text())
        drafted = await session.request("parafill/explain", _explain_params(uri))  # lookupTokens: default, 8
        session.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"parafill": {"lookupTokens": 0}})
        )
        plain = await session.request("parafill/explain", _explain_params(uri))
    finally:
        await session.stop()
    assert drafted["text"] == plain["text"] and drafted["tokens"] == plain["tokens"] == 256
    assert plain["forward_passes"] == 256 and drafted["forward_passes"] < plain["forward_passes"]


async def test_explain_can_be_cancelled_and_its_work_stops(shared):
    uri = doc_uri("cancel.py")
    shared.open(uri, SAMPLE.read_text())
    before = await shared.stats()
    msg_id = shared.next_id()
    pending = shared.send("parafill/explain", _explain_params(uri, "explain-c"), msg_id)
    for _ in range(3000):
        if any(v["kind"] == "report" for t, v in shared.progress if t == "explain-c"):
            break
        await asyncio.sleep(0.01)
    assert any(v["kind"] == "report" for t, v in shared.progress if t == "explain-c"), "never started decoding"
    shared.cancel(msg_id)
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(pending, 30)
    first, second = await shared.quiet_stats()
    assert second["active"] == 0 and second["pass_checks"] == first["pass_checks"]
    assert second["forward_passes"] == first["forward_passes"]
    assert second["cancelled"] == before["cancelled"] + 1
    assert second["forward_passes"] - before["forward_passes"] < 256  # stopped before the length limit
    assert [v["kind"] for t, v in shared.progress if t == "explain-c"][-1] == "end"


async def test_an_unexpected_error_during_explain_ends_its_progress_and_the_server_serves_on(tiny_model_dir):
    # The third counted pass of the explain's decoding raises (tests/lsp/faulty_server.py): the request
    # answers InternalError, its progress ends, its cancel token is released, and the next one is served.
    faulty = [sys.executable, "-m", "tests.lsp.faulty_server", "3"]
    session = await Session().start(tiny_options(tiny_model_dir), server=faulty)
    try:
        uri = doc_uri("faulty.py")
        session.open(uri, SAMPLE.read_text())
        with pytest.raises(JsonRpcException) as failed:
            await session.request("parafill/explain", _explain_params(uri, "fault-1"))
        assert failed.value.code == -32603 and FAULT_MESSAGE in str(failed.value)
        kinds = [e["kind"] for t, e in session.progress if t == "fault-1"]
        assert kinds[0] == "begin" and kinds[-1] == "end"
        assert (await session.stats())["scheduler"]["tracked_requests"] == 0

        answer = await session.request("parafill/explain", _explain_params(uri, "fault-2"))
        assert answer["text"] and [e["kind"] for t, e in session.progress if t == "fault-2"][-1] == "end"
        assert await session.inline(uri, *position_of(SAMPLE.read_text(), 40))
    finally:
        assert await session.stop() == 0


async def test_an_unexpected_error_during_an_inline_completion_answers_no_items_and_serving_goes_on(tiny_model_dir):
    faulty = [sys.executable, "-m", "tests.lsp.faulty_server", "1"]  # the first counted pass raises
    session = await Session().start(tiny_options(tiny_model_dir), server=faulty)
    try:
        text = SAMPLE.read_text()
        uri = doc_uri("faulty_inline.py")
        session.open(uri, text)
        position = position_of(text, end_of_line_with(text, "def is_available(self) -> bool:"))
        assert await session.inline(uri, *position) == []
        assert (await session.stats())["inline_failed"] == 1
        await session.inline(uri, *position)  # the next one runs the model normally
        stats = await session.stats()
        assert stats["inline_failed"] == 1 and stats["last"]["inline"]["forward_passes"] > 0
        assert any(FAULT_MESSAGE in line for line in session.stderr)
    finally:
        assert await session.stop() == 0


async def test_the_server_exits_when_the_client_process_it_was_given_is_gone(tiny_model_dir):
    # initialize's processId names the editor; this test's stand-in is a process it then kills.
    editor = await asyncio.create_subprocess_exec("sleep", "60")
    session = await Session().start(tiny_options(tiny_model_dir, enable=False), process_id=editor.pid)
    server = session.client._server
    assert (await session.stats())["model"]["state"] == "idle"  # serving while the editor lives
    editor.kill()
    await editor.wait()  # gone (and reaped)
    assert await asyncio.wait_for(server.wait(), 20) == 1  # 1: it never got shutdown
    assert any("client process" in line and "is gone" in line for line in session.stderr)
    await session.stop()
