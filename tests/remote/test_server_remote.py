"""The language server with a remote backend: explain (chat or completions) and inline completion from a
fake OpenAI-compatible server on 127.0.0.1, over a real stdio pipe. Checks streaming as $/progress, that a
cancelled explain closes the HTTP stream, that the key from the environment is sent and never shown, and
that with both routes remote no local model is loaded."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled

pytest.importorskip("httpx")

from tests.lsp.session import SAMPLE, Session, doc_uri, tiny_options
from tests.remote.fake_openai import FakeOpenAI

pytestmark = pytest.mark.asyncio(loop_scope="module")

KEY_ENV = "PARAFILL_TEST_SERVER_KEY"
SECRET = "sk-server-test-secret-42"


@pytest.fixture(scope="module")
def fake():
    with FakeOpenAI(pieces=[f"part{i} " for i in range(12)], delay_s=0.005) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(fake, tiny_model_dir):
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, SECRET)  # the server process inherits it
    options = tiny_options(tiny_model_dir, remoteUrl=fake.url, remoteModel="fake-model", remoteApiKeyEnv=KEY_ENV)
    s = await Session().start(options)
    try:
        yield s
    finally:
        await s.stop()
        mp.undo()


async def configure(s: Session, **settings) -> None:
    s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"parafill": settings}))
    await s.stats()  # a round trip: the change is applied


def _explain_params(uri: str, token: str) -> dict:
    rng = {"start": {"line": 16, "character": 0}, "end": {"line": 19, "character": 0}}
    return {"textDocument": {"uri": uri}, "range": rng, "workDoneToken": token}


async def test_explain_streams_from_the_remote_chat_endpoint(session, fake):
    uri = doc_uri("remote_explain.py")
    session.open(uri, SAMPLE.read_text())
    answer = await session.request("parafill/explain", _explain_params(uri, "remote-1"))
    assert answer["route"] == "remote" and answer["text"] == "".join(fake.pieces)
    assert answer["forward_passes"] == 0 and answer["stop_reason"] == "stop_token"
    assert answer["remote"]["finish_reason"] == "stop" and answer["remote"]["chunks"] == len(fake.pieces)
    events = [v for t, v in session.progress if t == "remote-1"]
    streamed = "".join(e.get("message", "") for e in events if e["kind"] == "report")
    assert streamed == answer["text"] and sum(e["kind"] == "report" for e in events) >= 2
    seen = fake.last()
    assert seen.path == "/v1/chat/completions" and seen.body["model"] == "fake-model" and seen.body["stream"]
    code = "\n".join(SAMPLE.read_text().split("\n")[16:19])
    assert code in seen.body["messages"][0]["content"]
    assert seen.authorization == f"Bearer {SECRET}"
    stats = await session.stats()
    assert stats["remote"]["api_key_set"] and stats["remote"]["url"] == fake.url
    assert stats["forward_passes"] == 0  # the local model did no explain work
    assert SECRET not in str(stats) + "\n".join(session.stderr + session.log_messages)


async def test_explain_through_completions_with_the_template(session, fake):
    await configure(session, remoteExplainApi="completions")
    uri = doc_uri("remote_explain2.py")
    session.open(uri, SAMPLE.read_text())
    answer = await session.request("parafill/explain", _explain_params(uri, "remote-2"))
    assert answer["route"] == "remote"
    seen = fake.last()
    assert seen.path == "/v1/completions"
    assert seen.body["prompt"].startswith("<|explain_code|>") and seen.body["prompt"].endswith("<|explain_text|>")
    await configure(session, remoteExplainApi="chat")


async def test_cancelled_explain_closes_the_http_stream(session, fake):
    fake.pieces, fake.delay_s = [f"slow{i} " for i in range(300)], 0.02
    try:
        uri = doc_uri("remote_cancel.py")
        session.open(uri, SAMPLE.read_text())
        msg_id = session.next_id()
        pending = session.send("parafill/explain", _explain_params(uri, "remote-c"), msg_id)
        for _ in range(1000):
            if any(v["kind"] == "report" for t, v in session.progress if t == "remote-c"):
                break
            await asyncio.sleep(0.01)
        session.cancel(msg_id)
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wait_for(pending, 30)
        seen = await asyncio.to_thread(fake.last, 10)
        assert seen.client_closed and not seen.finished and seen.sent < 100
        assert [v["kind"] for t, v in session.progress if t == "remote-c"][-1] == "end"
    finally:
        fake.pieces, fake.delay_s = [f"part{i} " for i in range(12)], 0.005


async def test_remote_error_answers_request_failed(session, fake):
    fake.status = 500
    try:
        uri = doc_uri("remote_error.py")
        session.open(uri, SAMPLE.read_text())
        with pytest.raises(JsonRpcException, match="500") as failed:
            await session.request("parafill/explain", _explain_params(uri, "remote-e"))
        assert failed.value.code == -32803  # RequestFailed, not an internal error
    finally:
        fake.status = 200


async def test_inline_stays_local_unless_routed(session, fake):
    uri = doc_uri("remote_inline_local.py")
    text = "def add(a, b):\n    return a + b\n\n\nx = add(1, 2)\n"
    session.open(uri, text)
    before = len(fake.seen)
    await session.inline(uri, 4, len("x = add(1, 2)"))
    assert len(fake.seen) == before
    assert (await session.stats())["last"]["inline"]["route"] in ("block", "ar")


async def test_both_routes_remote_needs_no_local_model(fake):
    fake.pieces = ["total = ", "a + b", "\n", "print(total)\n"]
    options = {"model": "/nonexistent/model", "remoteUrl": fake.url, "remoteRoutes": "both"}
    options |= {"remoteFimTemplate": "<PRE>{prefix}<SUF>{suffix}<MID>"}
    s = await Session().start(options)
    try:
        uri = doc_uri("remote_inline.py")
        text = "def add(a, b):\n    \n"
        s.open(uri, text)
        items = await s.inline(uri, 1, 4)
        assert items and items[0].insert_text == "total = a + b"  # the block rule cuts at print(...)
        seen = fake.last()
        assert seen.path == "/v1/completions" and seen.body["prompt"].startswith("<PRE>def add(a, b):\n    <SUF>")
        stats = await s.stats()
        assert stats["model"]["state"] == "idle" and stats["inline_remote"] == 1
        assert stats["last"]["inline"]["route"] == "remote"
        assert not any("cannot load" in m for m in s.shown)
    finally:
        await s.stop()
        fake.pieces = [f"part{i} " for i in range(12)]
