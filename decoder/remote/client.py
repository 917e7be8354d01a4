"""Streaming client for OpenAI-compatible `/v1/completions` and `/v1/chat/completions` (httpx, SSE).

The caller is synchronous (the server's worker threads, the CLI): each request runs on a private event
loop in the calling thread. While the response streams, the loop polls the caller's interrupt every
`poll_s` seconds; on an interrupt, a deadline or a stop rule it cancels the read and leaves the stream's
context, which closes the HTTP connection, so the server stops generating for us.

Secrets: the API key is read from the environment variable the config names when a request is sent, and
goes only into that request's Authorization header. It is never stored, logged or put in an error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from decoder.remote.sse import sse_data

log = logging.getLogger("parafill.remote")

Interrupt = Callable[[], "str | None"]
StopRule = Callable[[str], "int | None"]  # text so far -> length to keep if generation should stop here


class RemoteError(RuntimeError):
    """The remote server could not be reached or answered an error (the message never holds the key)."""


@dataclass(frozen=True)
class RemoteConfig:
    url: str  # the API base, e.g. http://127.0.0.1:8000/v1 (endpoints are appended to it)
    model: str | None = None  # the `model` field of each request (None: left out; one-model servers)
    api_key_env: str | None = "PARAFILL_REMOTE_API_KEY"  # environment variable holding the key
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0  # the longest wait for the next piece of a response

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise RemoteError(f"remote URL must be http:// or https:// with a host, not {self.safe_url!r}")

    @property
    def safe_url(self) -> str:
        """The URL without user info or query (what logs and errors show)."""
        parts = urlsplit(self.url)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    def endpoint(self, path: str) -> str:
        return self.url.rstrip("/") + "/" + path.lstrip("/")

    def _api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        return os.environ.get(self.api_key_env) or None

    def headers(self) -> dict[str, str]:
        out = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if (key := self._api_key()) is not None:
            out["Authorization"] = f"Bearer {key}"
        return out

    def describe(self) -> dict[str, Any]:
        """For stats and logs: where requests go, and whether a key is set (never the key)."""
        return {
            "url": self.safe_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "api_key_set": self._api_key() is not None,
            "connect_timeout_s": self.connect_timeout_s,
            "read_timeout_s": self.read_timeout_s,
        }

    def __repr__(self) -> str:
        return f"RemoteConfig({self.safe_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"


@dataclass
class RemoteResult:
    text: str
    stop_reason: str  # "stop", "length" (the server's finish_reason), "stop_rule", "cancelled", "time_budget", ...
    finish_reason: str | None = None
    chunks: int = 0  # stream events that carried text
    latency_ms: float = 0.0
    first_text_ms: float | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    closed_early: bool = False  # the client closed the stream before the server finished

    def to_json(self) -> dict[str, Any]:
        return {
            "stop_reason": self.stop_reason,
            "finish_reason": self.finish_reason,
            "chunks": self.chunks,
            "latency_ms": round(self.latency_ms, 3),
            "first_text_ms": None if self.first_text_ms is None else round(self.first_text_ms, 3),
            "usage": self.usage,
            "closed_early": self.closed_early,
        }


def completion_body(
    config: RemoteConfig,
    prompt: str,
    max_tokens: int,
    suffix: str | None = None,
    temperature: float = 0.0,
    stop: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": max_tokens, "temperature": temperature}
    if suffix is not None:
        body["suffix"] = suffix
    if stop:
        body["stop"] = stop
    return _with_model(config, body, extra)


def chat_body(
    config: RemoteConfig,
    messages: list[dict[str, str]],
    max_tokens: int,
    temperature: float = 0.0,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return _with_model(config, {"messages": messages, "max_tokens": max_tokens, "temperature": temperature}, extra)


def _with_model(config: RemoteConfig, body: dict[str, Any], extra: dict[str, Any] | None) -> dict[str, Any]:
    if config.model:
        body["model"] = config.model
    return body | (extra or {}) | {"stream": True}


def stream_completion(config: RemoteConfig, body: dict[str, Any], **kw: Any) -> RemoteResult:
    """POST `/completions` (body from `completion_body`) and stream the text; see `stream`."""
    return stream(config, "completions", body, **kw)


def stream_chat(config: RemoteConfig, body: dict[str, Any], **kw: Any) -> RemoteResult:
    """POST `/chat/completions` (body from `chat_body`) and stream the answer's content; see `stream`."""
    return stream(config, "chat/completions", body, **kw)


def stream(
    config: RemoteConfig,
    path: str,
    body: dict[str, Any],
    on_text: Callable[[str], None] | None = None,
    interrupt: Interrupt | None = None,
    stop_at: StopRule | None = None,
    deadline: float | None = None,
    poll_s: float = 0.01,
) -> RemoteResult:
    """Send one streaming request and collect its text.

    on_text: called with each new piece of text (in this thread). interrupt: polled while waiting; a reason
    ("cancelled", ...) ends the request. stop_at: given the text so far, the length to keep when the answer
    should end there. deadline: time.monotonic() value after which the request ends with "time_budget".
    Whatever ends the request early closes the HTTP stream. Raises RemoteError on transport or server errors.
    """
    job = _Job(config, path, body, on_text, interrupt, stop_at, deadline, poll_s)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(job.run())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="parafill-remote") as pool:
        return pool.submit(asyncio.run, job.run()).result()  # a loop runs here: use a thread of our own


class _Job:
    def __init__(
        self,
        config: RemoteConfig,
        path: str,
        body: dict[str, Any],
        on_text: Callable[[str], None] | None,
        interrupt: Interrupt | None,
        stop_at: StopRule | None,
        deadline: float | None,
        poll_s: float,
    ) -> None:
        self.config, self.path, self.body = config, path, body
        self.on_text, self.interrupt, self.stop_at, self.deadline, self.poll_s = (
            on_text,
            interrupt,
            stop_at,
            deadline,
            poll_s,
        )
        self.chat = path.rstrip("/").endswith("chat/completions")
        self.result = RemoteResult(text="", stop_reason="stop")
        self.started = time.perf_counter()

    def _why_stop(self) -> str | None:
        reason = self.interrupt() if self.interrupt is not None else None
        if reason is None and self.deadline is not None and time.monotonic() >= self.deadline:
            reason = "time_budget"
        return reason

    async def run(self) -> RemoteResult:
        import httpx  # only when a remote backend is configured and used

        if (reason := self._why_stop()) is not None:
            self.result.stop_reason = reason
            return self.result
        cfg = self.config
        timeout = httpx.Timeout(cfg.read_timeout_s, connect=cfg.connect_timeout_s)
        log.debug("remote request to %s (%s)", cfg.safe_url, self.path)
        async with httpx.AsyncClient(timeout=timeout) as client:
            reader = asyncio.create_task(self._read(client))
            while True:
                done, _ = await asyncio.wait({reader}, timeout=self.poll_s)
                if done:
                    break
                if (reason := self._why_stop()) is not None:
                    reader.cancel()  # leaving the stream's context closes the connection
                    with contextlib.suppress(asyncio.CancelledError):
                        await reader
                    self.result.stop_reason, self.result.closed_early = reason, True
                    break
            if reader.done() and not reader.cancelled() and (exc := reader.exception()) is not None:
                raise self._error(exc) from exc
        self.result.latency_ms = (time.perf_counter() - self.started) * 1000
        return self.result

    def _error(self, exc: BaseException) -> RemoteError:
        import httpx

        where = f"{self.config.safe_url} ({self.path})"
        if isinstance(exc, RemoteError):
            return exc
        if isinstance(exc, httpx.TimeoutException):
            kind = "connect" if isinstance(exc, httpx.ConnectTimeout) else "read"
            return RemoteError(f"remote server {where}: {kind} timeout")
        if isinstance(exc, httpx.HTTPError):
            return RemoteError(f"remote server {where}: {type(exc).__name__}: {exc}")
        if isinstance(exc, (ValueError, KeyError, TypeError, IndexError)):
            return RemoteError(f"remote server {where} sent a malformed answer: {type(exc).__name__}: {exc}")
        return RemoteError(f"remote server {where}: {type(exc).__name__}: {exc}")

    async def _read(self, client: Any) -> None:
        url = self.config.endpoint(self.path)
        async with client.stream("POST", url, json=self.body, headers=self.config.headers()) as response:
            if response.status_code != 200:
                detail = (await response.aread())[:300].decode("utf-8", "replace").strip()
                status = response.status_code
                raise RemoteError(f"remote server {self.config.safe_url} answered HTTP {status}: {detail}")
            if response.headers.get("content-type", "").startswith("application/json"):  # ignored "stream"
                self._take(json.loads(await response.aread()))
                return
            async for data in sse_data(response.aiter_lines()):
                if data.strip() == "[DONE]":
                    return
                if self._take(json.loads(data)):
                    self.result.closed_early = True
                    return  # a stop rule fired: leaving the context closes the stream

    def _take(self, payload: dict[str, Any]) -> bool:
        """Apply one response object (a stream chunk or a whole answer); True when a stop rule fired."""
        if payload.get("error"):
            error = payload["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise RemoteError(f"remote server {self.config.safe_url} reported an error: {message}")
        if isinstance(payload.get("usage"), dict):
            self.result.usage = payload["usage"]
        choices = payload.get("choices") or []
        if not choices:
            return False
        choice = choices[0]
        if self.chat:
            part = choice.get("delta") or choice.get("message") or {}
            piece = part.get("content") or ""
        else:
            piece = choice.get("text") or ""
        if choice.get("finish_reason"):
            self.result.finish_reason = self.result.stop_reason = str(choice["finish_reason"])
        return bool(piece) and self._append(piece)

    def _append(self, piece: str) -> bool:
        result = self.result
        if result.first_text_ms is None:
            result.first_text_ms = (time.perf_counter() - self.started) * 1000
        result.chunks += 1
        text = result.text + piece
        cut = self.stop_at(text) if self.stop_at is not None else None
        if cut is not None:
            text, result.stop_reason = text[:cut], "stop_rule"
        if len(text) > len(result.text) and self.on_text is not None:
            self.on_text(text[len(result.text) :])
        result.text = text
        return cut is not None
