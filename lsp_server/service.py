"""The completion service: one object behind both the language server and the `complete`/`explain` CLI.

It owns the settings, the engines (through EngineHolder), the per-document typed-ahead state and the
counters `parafill/stats` reports. Its methods are synchronous and run the model in the calling thread:
the server calls them from worker threads, the CLI directly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lsp_server.doc_state import DocumentStates
from lsp_server.engine_holder import EngineHolder, ModelUnavailable
from lsp_server.explain import ExplainAnswer, run_explain
from lsp_server.inline import InlineAnswer, InlineRequest, Surroundings, answer_for, run_inline, surroundings
from lsp_server.remote import remote_config, run_remote_explain, run_remote_inline, serves
from lsp_server.settings import Settings, parse_settings

if TYPE_CHECKING:
    from decoder.engines import ModelRoutes
    from lsp_server.postprocess import Candidate

log = logging.getLogger("parafill.service")

Interrupt = Callable[[], "str | None"]
_INTERRUPTED = ("cancelled", "superseded", "shutdown")


class CompletionService:
    def __init__(
        self,
        settings: Settings | None = None,
        on_load_error: Callable[[str], None] | None = None,
        load_wait_s: float = 120.0,
    ) -> None:
        self._settings = settings or Settings()
        self.holder = EngineHolder(on_load_error)
        self.states = DocumentStates()
        self.load_wait_s = load_wait_s  # how long a request waits for a model that is still loading
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {
            "inline_requests": 0,
            "inline_model_runs": 0,
            "inline_typed_ahead": 0,
            "inline_empty": 0,
            "inline_time_budget": 0,
            "explain_requests": 0,
            "inline_remote": 0,  # inline requests sent to the remote server
            "inline_failed": 0,  # an unexpected error (out of memory, a bug): logged, answered with no items
            "cancelled": 0,
            "superseded": 0,
            "forward_passes": 0,  # summed over finished generations
            "pass_checks": 0,  # interrupt polls: one before every forward pass, counted live
            "active": 0,
        }
        self._last: dict[str, dict[str, Any]] = {}

    # -- settings and model ---------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    def update_settings(self, raw: Any, load: bool = True) -> list[str]:
        """Apply raw settings on top of the current ones; with `load`, (re)load the model if its settings
        changed (the holder compares them). Returns warnings about keys or values that were ignored."""
        new, warnings = parse_settings(raw, self._settings)
        self._settings = new
        if load and new.enable and _needs_local_model(new):
            self.holder.request(new)
        return warnings

    def start_loading(self) -> None:
        if self._settings.enable and _needs_local_model(self._settings):
            self.holder.request(self._settings)

    # -- requests -------------------------------------------------------------------------------------

    def complete(self, req: InlineRequest, interrupt: Interrupt | None = None) -> InlineAnswer:
        settings = self._settings
        self._count("inline_requests")
        geo = surroundings(req)
        if not settings.enable:  # before typed-ahead reuse: a disabled server suggests nothing at all
            return self._finish_inline(answer_for(geo, None, "none", "disabled"))
        if req.selected is None and (cand := self.states.typed_ahead(req.uri, req.document.text, req.cursor)):
            self._count("inline_typed_ahead")
            return self._finish_inline(answer_for(geo, cand, "typed_ahead", "typed_ahead"))
        if serves(settings, "inline"):
            self._count("inline_remote")
            with self._active():
                answer, candidate = run_remote_inline(req, geo, settings, interrupt)
            return self._finish_model_inline(req, geo, answer, candidate)
        try:
            routes = self._routes(interrupt)
        except ModelUnavailable as exc:
            return self._finish_inline(answer_for(geo, None, "none", f"model unavailable: {exc}"))
        self._count("inline_model_runs")
        with self._active():
            answer, candidate = run_inline(routes, req, geo, settings, self._counting(interrupt))
        return self._finish_model_inline(req, geo, answer, candidate)

    def _finish_model_inline(
        self, req: InlineRequest, geo: Surroundings, answer: InlineAnswer, candidate: Candidate | None
    ) -> InlineAnswer:
        # An interrupted run is cut short, not finished: keeping it would serve its stub by typed-ahead.
        if candidate is not None and answer.stop_reason not in _INTERRUPTED:
            self.states.remember(req.uri, req.document.text, geo.anchor, geo.cursor_end, candidate, answer.window)
        if answer.stop_reason == "time_budget":
            self._count("inline_time_budget")
        self._count("forward_passes", answer.forward_passes)
        return self._finish_inline(answer)

    def explain(self, code: str, interrupt: Interrupt | None = None, on_text: Callable[[str], None] | None = None):
        """Explain `code`; raises ModelUnavailable or ExplainError when it cannot."""
        self._count("explain_requests")
        settings = self._settings
        if serves(settings, "explain"):
            with self._active():
                answer: ExplainAnswer = run_remote_explain(settings, code, interrupt, on_text)
        else:
            routes = self._routes(interrupt)
            with self._active():
                answer = run_explain(routes, code, settings, self._counting(interrupt), on_text)
        self._count("forward_passes", answer.forward_passes)
        with self._lock:
            self._last["explain"] = answer.to_json() | {"text": answer.text[:200]}
        # One line per explanation (they are few): how it ended, e.g. "(cancelled)" or "(stop_rule)".
        log.info(
            "explain: %d tokens via %s (%s), %d passes, %.0f ms",
            answer.tokens,
            answer.route,
            answer.stop_reason,
            answer.forward_passes,
            answer.latency_ms,
        )
        return answer

    def _routes(self, interrupt: Interrupt | None) -> ModelRoutes:
        """The engines, loading them first if nothing asked for them yet (a client that never sent
        `initialized`, or inline completions turned off: `enable` only spares the eager load, and an
        explain still needs the model); waits for a load in progress."""
        self.holder.request(self._settings)  # no-op when these are loaded, loading or failed
        return self.holder.get(timeout=self.load_wait_s, interrupt=interrupt)

    def forget_document(self, uri: str) -> None:
        self.states.forget(uri)

    def note(self, counter: str) -> None:
        """Count an outcome decided outside the service (a cancelled or superseded request)."""
        self._count(counter)

    def clear_cache(self) -> bool:
        return self.holder.clear_caches()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = dict(self._counters)
            out["last"] = {k: dict(v) for k, v in self._last.items()}
        out["documents_with_state"] = len(self.states)
        out["model"] = self.holder.status()
        out["remote"] = _remote_status(self._settings)
        return out

    # -- internals ------------------------------------------------------------------------------------

    def _finish_inline(self, answer: InlineAnswer) -> InlineAnswer:
        if answer.text is None:
            self._count("inline_empty")
        record = answer.to_json()
        record["text"] = record["text"][:200]
        record["time"] = time.time()
        with self._lock:
            self._last["inline"] = record
        log.debug(  # %.60r: formatted (and cut) only when DEBUG is on
            "inline: %.60r via %s (%s), %d passes, %.0f ms, raw %.60r",
            answer.text,
            answer.route,
            answer.stop_reason,
            answer.forward_passes,
            answer.latency_ms,
            answer.raw_text,
        )
        return answer

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counters[name] += n

    def _counting(self, interrupt: Interrupt | None) -> Interrupt:
        def check() -> str | None:
            self._count("pass_checks")
            return interrupt() if interrupt is not None else None

        return check

    @contextmanager
    def _active(self) -> Iterator[None]:
        self._count("active")
        try:
            yield
        finally:
            self._count("active", -1)


def _needs_local_model(settings: Settings) -> bool:
    """False when the remote server answers both routes: then no local model is loaded."""
    return not (serves(settings, "inline") and serves(settings, "explain"))


def _remote_status(settings: Settings) -> dict[str, Any] | None:
    """Where remote requests go and for which routes (never the API key); None when not configured."""
    try:
        config = remote_config(settings)
    except Exception as exc:  # an unusable URL: say so in stats, requests report it too
        return {"error": str(exc), "routes": settings.remote_routes}
    if config is None:
        return None
    return config.describe() | {"routes": settings.remote_routes, "explain_api": settings.remote_explain_api}
