"""Bad input over a real stdio pipe: each gets a proper error or an empty result, a log line, and the
server still answers a normal request afterwards. Also: a missing or corrupt model folder, then a good one."""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcMethodNotFound

from tests.lsp.session import SAMPLE, Session, doc_uri, end_of_line_with, position_of, tiny_options

INLINE = types.TEXT_DOCUMENT_INLINE_COMPLETION
GOOD_TEXT = SAMPLE.read_text()
GOOD_CURSOR = position_of(GOOD_TEXT, end_of_line_with(GOOD_TEXT, "return self.price * self.quantity"))


async def _still_serving(s: Session, uri: str) -> None:
    items = await s.inline(uri, *GOOD_CURSOR)
    assert items and items[0].range.start == types.Position(*GOOD_CURSOR)


async def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_bad_requests_get_errors_or_empty_answers_and_the_server_keeps_serving(tiny_model_dir):
    s = await Session().start(tiny_options(tiny_model_dir, maxDocumentKb=2048))
    try:
        good = doc_uri("good.py")
        s.open(good, GOOD_TEXT)
        await _still_serving(s, good)

        with pytest.raises(JsonRpcMethodNotFound):
            await s.request("parafill/noSuchMethod", {})
        s.client.protocol.notify("parafill/noSuchNotification", {})
        assert await s.inline(doc_uri("never-opened.py"), 0, 0) == []
        s.insert(doc_uri("never-opened.py"), 2, 0, 0, "x")  # didChange for it: ignored

        emoji = doc_uri("emoji.py")
        s.open(emoji, 'x = "😀"\n')
        assert await s.inline(emoji, 99, 0) == []  # line out of range
        assert await s.inline(emoji, 0, 6) == []  # between the two UTF-16 halves of the emoji
        past_end = await s.inline(emoji, 0, 999)  # past the line end: the end of the line (LSP rule)
        assert past_end and all(item.range.start == types.Position(0, 8) for item in past_end)

        bad_params = {"textDocument": {"uri": good}, "position": {"line": -1, "character": "x"}, "context": {}}
        with pytest.raises(JsonRpcInvalidParams):
            await asyncio.wait_for(s.send_untyped(INLINE, bad_params), 30)
        with pytest.raises(JsonRpcInvalidParams):
            await s.request("parafill/explain", {"textDocument": {"uri": good}})  # no range
        with pytest.raises(JsonRpcInvalidParams):
            rng = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
            await s.request("parafill/explain", {"textDocument": {"uri": doc_uri("nope.py")}, "range": rng})
        with pytest.raises(JsonRpcException):
            await s.request(types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(command="parafill.nope"))
        with pytest.raises(JsonRpcInvalidParams):
            params = types.ExecuteCommandParams(command="parafill.explain", arguments=[42])
            await s.request(types.WORKSPACE_EXECUTE_COMMAND, params)
        with pytest.raises(JsonRpcInvalidParams):  # the object form with a uri that is not a string
            params = types.ExecuteCommandParams(command="parafill.explain", arguments=[{"uri": [1], "range": rng}])
            await s.request(types.WORKSPACE_EXECUTE_COMMAND, params)

        lone = doc_uri("lone_surrogate.py")  # "\ud83d" is valid JSON; the tokenizer refuses the string
        s.open(lone, "s = '\ud83d'\n" + GOOD_TEXT)
        assert isinstance(await s.inline(lone, 1 + GOOD_CURSOR[0], GOOD_CURSOR[1]), list)
        rng = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}
        assert (await s.request("parafill/explain", {"textDocument": {"uri": lone}, "range": rng}))["text"]

        binary = doc_uri("blob.bin")
        s.open(binary, "PK\x03\x04\x00\x00binary\x00")
        assert await s.inline(binary, 0, 3) == []
        huge = doc_uri("huge.py")
        started = time.monotonic()
        s.open(huge, "x = 1\n" * (10 * 1024 * 1024 // 6))  # 10 MB
        assert await s.inline(huge, 5, 0) == []
        assert time.monotonic() - started < 30

        await _still_serving(s, good)
        log = "\n".join(s.stderr)
        for line in ("which is not open", "outside the document", "falls inside a character", "invalid params"):
            assert line in log, line
        assert "looks binary" in log and "KB limit" in log
        assert any("not open" in m for m in s.log_messages)  # mirrored to window/logMessage

        await s.client.shutdown_async(None)
        with pytest.raises(JsonRpcInvalidRequest):
            await s.request(INLINE, s.inline_params(good, *GOOD_CURSOR), timeout=10)
        s.client.exit(None)
        assert await asyncio.wait_for(s.client._server.wait(), 20) == 0
    finally:
        await s.stop()


async def test_missing_or_corrupt_model_folder_is_reported_and_a_good_one_is_loaded(tiny_model_dir, tmp_path):
    s = await Session().start(tiny_options(tiny_model_dir, model=str(tmp_path / "missing")))
    try:
        await _wait_for(lambda: len(s.shown) >= 1)
        assert "missing" in s.shown[0] and "does not exist" in s.shown[0]
        uri = doc_uri("m.py")
        s.open(uri, GOOD_TEXT)
        assert await s.inline(uri, *GOOD_CURSOR) == []
        rng = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}
        with pytest.raises(JsonRpcException) as failed:
            await s.request("parafill/explain", {"textDocument": {"uri": uri}, "range": rng})
        assert failed.value.code == -32803
        assert (await s.stats())["model"]["state"] == "failed"

        corrupt = tmp_path / "corrupt"
        corrupt.mkdir()
        (corrupt / "config.json").write_text("{not json")
        (corrupt / "tokenizer.json").write_bytes(b"\x00\x01")
        settings = types.DidChangeConfigurationParams(settings={"parafill": {"model": str(corrupt)}})
        s.client.workspace_did_change_configuration(settings)
        await _wait_for(lambda: len(s.shown) >= 2)
        assert "corrupt" in s.shown[1] and "config.json" in s.shown[1]
        assert await s.inline(uri, *GOOD_CURSOR) == []

        settings = types.DidChangeConfigurationParams(settings={"parafill": {"model": str(tiny_model_dir)}})
        s.client.workspace_did_change_configuration(settings)
        await _still_serving(s, uri)
        assert (await s.stats())["model"]["state"] == "ready"
        assert "cannot load model" in "\n".join(s.stderr)

        # a separate explain model: its own engine and prefix cache
        other = tmp_path / "explain-model"
        shutil.copytree(tiny_model_dir, other)
        settings = types.DidChangeConfigurationParams(settings={"parafill": {"explainModel": str(other)}})
        s.client.workspace_did_change_configuration(settings)
        answer = await s.request("parafill/explain", {"textDocument": {"uri": uri}, "range": rng})
        model = (await s.stats())["model"]
        assert answer["text"] and model["explain_folder"] == str(other) and "explain_cache" in model
        assert model["explain_cache"]["inserted_pages"] > 0
    finally:
        await s.stop()
