"""The routes served by a remote OpenAI-compatible server (decoder/remote) instead of the embedded engine.

Only when `remoteUrl` is set, and only for the routes `remoteRoutes` names: nothing leaves the machine
otherwise. Explain streams the answer as it arrives (the same `$/progress` path as the local AR decoder);
an inline completion is cut by the same stop rules and rule chain as a local one. Cancellation,
superseding and the time budget close the HTTP stream, so the server stops generating for us.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from decoder.remote import RemoteConfig, RemoteError, RemoteResult, stream_chat, stream_completion
from decoder.remote.client import chat_body, completion_body
from lsp_server.documents import for_model
from lsp_server.explain import ExplainAnswer, ExplainError
from lsp_server.inline import (
    InlineAnswer,
    InlineRequest,
    Surroundings,
    answer_for,
    budget_from,
    candidate_for,
    stop_rule_for,
)
from lsp_server.postprocess import Candidate
from lsp_server.settings import Settings

log = logging.getLogger("parafill.remote")

ROUTE = "remote"


def remote_config(settings: Settings) -> RemoteConfig | None:
    if not settings.remote_url:
        return None
    seconds = settings.remote_timeout_ms / 1000
    return RemoteConfig(
        settings.remote_url,
        model=settings.remote_model,
        api_key_env=settings.remote_api_key_env,
        connect_timeout_s=seconds,
        read_timeout_s=seconds,
    )


def serves(settings: Settings, kind: str) -> bool:
    """Whether the remote server answers `kind` ("inline" or "explain") under these settings."""
    return bool(settings.remote_url) and settings.remote_routes in (kind, "both")


def _fill(template: str, **parts: str) -> str:
    """`{name}` placeholders replaced literally (code is full of braces: no str.format), in one pass: the code
    put in for one placeholder may itself contain `{suffix}` (an f-string), which must stay as it is."""
    pattern = "|".join(re.escape("{" + name + "}") for name in parts)
    return re.sub(pattern, lambda m: parts[m.group(0)[1:-1]], template) if parts else template


def run_remote_explain(
    settings: Settings,
    code: str,
    interrupt: Callable[[], str | None] | None = None,
    on_text: Callable[[str], None] | None = None,
) -> ExplainAnswer:
    from decoder.prompts import EXPLAIN_INSTRUCTION

    config = _config(settings, ExplainError)
    truncated = len(code) > settings.explain_max_chars
    code = code[: settings.explain_max_chars]
    deadline = time.monotonic() + settings.explain_time_budget_ms / 1000
    try:
        if settings.remote_explain_api == "chat":
            content = f"{EXPLAIN_INSTRUCTION}\n\n```python\n{code}\n```"
            body = chat_body(config, [{"role": "user", "content": content}], settings.explain_max_tokens)
            result = stream_chat(config, body, on_text=on_text, interrupt=interrupt, deadline=deadline)
        else:
            prompt = _fill(settings.remote_explain_template, code=code)
            body = completion_body(config, prompt, settings.explain_max_tokens)
            result = stream_completion(config, body, on_text=on_text, interrupt=interrupt, deadline=deadline)
    except RemoteError as exc:
        raise ExplainError(str(exc)) from exc
    answer = ExplainAnswer(
        text=result.text,
        route=ROUTE,
        stop_reason=_stop_reason(result),
        **_numbers(result),
        truncated_input=truncated,
    )
    answer.extra["remote"] = result.to_json()
    return answer


def run_remote_inline(
    req: InlineRequest,
    geo: Surroundings,
    settings: Settings,
    interrupt: Callable[[], str | None] | None = None,
) -> tuple[InlineAnswer, Candidate | None]:
    """One inline completion from the remote server: the window on the character budget (no local
    tokenizer), FIM by `remoteFimTemplate` or the `suffix` field, then the local stop rules and chain."""
    from lsp_server.context import build_window

    doc, shape = req.document, geo.shape
    try:
        config = _config(settings, RemoteError)
    except RemoteError as exc:
        log.warning("inline: %s", exc)
        return answer_for(geo, None, "none", f"remote: {exc}"), None
    window = build_window(doc.text, doc.line_starts, geo.anchor, geo.cursor_end, budget_from(settings))
    prefix, suffix = window.prefix(doc.text) + for_model(geo.lead), window.suffix(doc.text)
    max_tokens = settings.max_tokens_block if shape.multiline else settings.max_tokens_line
    if settings.remote_fim_template:
        body = completion_body(config, _fill(settings.remote_fim_template, prefix=prefix, suffix=suffix), max_tokens)
    else:
        body = completion_body(config, prefix, max_tokens, suffix=suffix)
    rule = stop_rule_for(shape, settings)
    deadline = time.monotonic() + settings.time_budget_ms / 1000
    try:
        result = stream_completion(config, body, interrupt=interrupt, stop_at=rule, deadline=deadline)
    except RemoteError as exc:
        log.warning("inline: %s", exc)
        return answer_for(geo, None, "none", f"remote: {exc}"), None
    candidate = candidate_for(doc, geo, settings, prefix, window, result.text)
    answer = answer_for(
        geo,
        candidate,
        ROUTE,
        _stop_reason(result),
        **_numbers(result),
        raw_text=result.text,
        window=(window.start, window.end),
    )
    return answer, candidate


def _config(settings: Settings, error: type[Exception]) -> RemoteConfig:
    try:
        config = remote_config(settings)
    except RemoteError as exc:
        raise error(str(exc)) from exc
    if config is None:
        raise error("no remote server is configured (remoteUrl)")
    return config


def _numbers(result: RemoteResult) -> dict[str, Any]:
    """An answer's numbers from the server's usage record (streamed chunks when it sends none)."""
    return {
        "latency_ms": result.latency_ms,
        "prompt_tokens": int(result.usage.get("prompt_tokens") or 0),
        "tokens": int(result.usage.get("completion_tokens") or result.chunks),
    }


def _stop_reason(result: RemoteResult) -> str:
    """The decoders' vocabulary: a server's "stop" is a stop token, "length" the span limit."""
    return {"stop": "stop_token"}.get(result.stop_reason, result.stop_reason)
