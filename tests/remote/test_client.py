"""The OpenAI-compatible client against a fake server on 127.0.0.1: streaming, key handling, errors,
timeouts, and that cancelling closes the HTTP stream (the server sees its writes fail)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

pytest.importorskip("httpx")

from decoder.remote import RemoteConfig, RemoteError, stream_chat, stream_completion
from decoder.remote.client import chat_body, completion_body
from tests.remote.fake_openai import FakeOpenAI

KEY_ENV = "PARAFILL_TEST_REMOTE_KEY"
SECRET = "sk-test-0123456789-never-log-me"


@pytest.fixture
def fake():
    with FakeOpenAI(pieces=[f"w{i} " for i in range(20)], delay_s=0.005) as server:
        yield server


def config(fake: FakeOpenAI, **kw) -> RemoteConfig:
    return RemoteConfig(fake.url, model="tiny", api_key_env=KEY_ENV, **kw)


def test_completion_streams_pieces_in_order(fake):
    pieces: list[str] = []
    res = stream_completion(
        config(fake), completion_body(config(fake), "def f(", 8, suffix="):"), on_text=pieces.append
    )
    assert res.text == "".join(f"w{i} " for i in range(8)) and pieces == [f"w{i} " for i in range(8)]
    assert res.finish_reason == "length" and res.chunks == 8 and not res.closed_early
    seen = fake.last()
    assert seen.path == "/v1/completions" and seen.finished
    assert seen.body == {
        "prompt": "def f(",
        "suffix": "):",
        "max_tokens": 8,
        "temperature": 0.0,
        "model": "tiny",
        "stream": True,
    }


def test_chat_streams_content(fake):
    messages = [{"role": "user", "content": "explain"}]
    res = stream_chat(config(fake), chat_body(config(fake), messages, 100))
    assert res.text == "".join(fake.pieces) and res.finish_reason == "stop"
    assert fake.last().path == "/v1/chat/completions" and fake.last().body["messages"] == messages


def test_api_key_from_environment_is_sent_and_never_logged(fake, monkeypatch, caplog):
    monkeypatch.setenv(KEY_ENV, SECRET)
    caplog.set_level(logging.DEBUG)
    cfg = config(fake)
    stream_completion(cfg, completion_body(cfg, "x", 2))
    assert fake.last().authorization == f"Bearer {SECRET}"
    described = str(cfg.describe()) + repr(cfg)
    assert SECRET not in described and cfg.describe()["api_key_set"] is True
    assert SECRET not in caplog.text
    fake.status = 401
    with pytest.raises(RemoteError) as info:
        stream_completion(cfg, completion_body(cfg, "x", 2))
    assert SECRET not in str(info.value)


def test_no_key_no_authorization_header(fake, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    stream_completion(config(fake), completion_body(config(fake), "x", 2))
    assert fake.last().authorization is None


def test_url_credentials_are_not_shown():
    cfg = RemoteConfig("https://user:pw@example.invalid/v1?token=abc")
    assert cfg.safe_url == "https://example.invalid/v1" and "pw" not in repr(cfg)
    with pytest.raises(RemoteError):
        RemoteConfig("ftp://example.invalid/v1")


def test_cancel_closes_the_stream():
    with FakeOpenAI(delay_s=0.02) as fake:  # 200 pieces, 4 s in all
        got: list[str] = []
        flag = threading.Event()

        def on_text(piece: str) -> None:
            got.append(piece)
            if len(got) == 3:
                flag.set()

        cfg = config(fake)
        started = time.monotonic()
        res = stream_completion(
            cfg,
            completion_body(cfg, "x", 1000),
            on_text=on_text,
            interrupt=lambda: "cancelled" if flag.is_set() else None,
        )
        assert res.stop_reason == "cancelled" and res.closed_early
        assert time.monotonic() - started < 1.5
        assert 3 <= len(got) < 10
        seen = fake.last(timeout=5)
        assert seen.client_closed and not seen.finished and seen.sent < 40


def test_deadline_ends_with_time_budget_and_closes():
    with FakeOpenAI(delay_s=0.02) as fake:
        cfg = config(fake)
        res = stream_completion(cfg, completion_body(cfg, "x", 1000), deadline=time.monotonic() + 0.2)
        assert res.stop_reason == "time_budget" and res.text
        assert fake.last(timeout=5).client_closed


def test_stop_rule_cuts_the_text_and_closes():
    with FakeOpenAI(pieces=["a", "b\nc", *["d"] * 300], delay_s=0.01) as fake:
        cfg = config(fake)
        streamed: list[str] = []
        res = stream_completion(
            cfg,
            completion_body(cfg, "x", 1000),
            on_text=streamed.append,
            stop_at=lambda t: t.find("\n") if "\n" in t else None,
        )
        assert res.text == "ab" and res.stop_reason == "stop_rule" and "".join(streamed) == "ab"
        assert fake.last(timeout=5).client_closed


def test_http_error_and_error_body():
    with FakeOpenAI() as fake:
        fake.status = 503
        with pytest.raises(RemoteError, match=r"HTTP 503.*overloaded"):
            stream_completion(config(fake), completion_body(config(fake), "x", 2))


def test_connection_refused_is_a_remote_error():
    cfg = RemoteConfig("http://127.0.0.1:9/v1", connect_timeout_s=1.0)
    with pytest.raises(RemoteError, match=r"127\.0\.0\.1:9"):
        stream_completion(cfg, completion_body(cfg, "x", 2))


def test_read_timeout():
    with FakeOpenAI() as fake:
        fake.stall_s = 5.0
        cfg = config(fake, read_timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(RemoteError, match="read timeout"):
            stream_completion(cfg, completion_body(cfg, "x", 2))
        assert time.monotonic() - started < 3.0  # gave up long before the server's first byte


def test_cancel_while_waiting_for_the_first_byte():
    with FakeOpenAI() as fake:
        fake.stall_s = 5.0
        cfg = config(fake)
        started = time.monotonic()
        res = stream_completion(
            cfg,
            completion_body(cfg, "x", 2),
            interrupt=lambda: "cancelled" if time.monotonic() - started > 0.1 else None,
        )
        assert res.stop_reason == "cancelled" and time.monotonic() - started < 3.0  # not after the first byte


def test_server_ignoring_stream_answers_json():
    with FakeOpenAI(pieces=["hello ", "world"]) as fake:
        fake.stream_json = True
        got: list[str] = []
        res = stream_chat(
            config(fake), chat_body(config(fake), [{"role": "user", "content": "x"}], 10), on_text=got.append
        )
        assert res.text == "hello world" and got == ["hello world"]


async def test_callable_from_a_running_event_loop(fake):
    res = stream_completion(config(fake), completion_body(config(fake), "x", 3))
    assert res.text == "w0 w1 w2 "
