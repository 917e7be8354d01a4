"""The engines behind the completion service (one model for both routes, or a separate explain model, as
`decoder.engines.ModelRoutes`): loaded in the background, reloaded when their settings change.

A missing or corrupt model folder is not fatal: the holder remembers the error, requests that need the
model get `ModelUnavailable` (inline answers nothing, explain answers an error), and a settings change
that names another folder tries again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lsp_server.errors import UserError
from lsp_server.settings import Settings

if TYPE_CHECKING:
    from decoder.engine import Engine
    from decoder.engines import ModelRoutes

log = logging.getLogger("parafill.model")


class ModelUnavailable(Exception):
    """No model to run: not loaded yet, loading failed, or completions are disabled."""


class EngineHolder:
    def __init__(self, on_load_error: Callable[[str], None] | None = None) -> None:
        self._cond = threading.Condition()
        self._routes: ModelRoutes | None = None
        self._error: str | None = None
        self._key: tuple | None = None  # engine settings of the current (or loading) engine
        self._loading = False
        self._generation = 0  # bumped per load; a finished load that is no longer current is dropped
        self._info: dict[str, Any] = {}
        self._on_load_error = on_load_error

    # -- loading --------------------------------------------------------------------------------------

    def request(self, settings: Settings) -> bool:
        """Start loading in a background thread unless this engine is already loaded or loading.
        Returns True when a load was started."""
        with self._cond:
            if settings.engine_key == self._key:
                return False
            self._generation += 1
            generation, self._key, self._loading = self._generation, settings.engine_key, True
            self._routes, self._error = None, None
        threading.Thread(
            target=self._load, args=(settings, generation), name="parafill-model-load", daemon=True
        ).start()
        return True

    def load_now(self, settings: Settings) -> ModelRoutes:
        """Load in this thread (the CLI); raises UserError with the reason on failure."""
        with self._cond:
            self._generation += 1
            generation, self._key, self._loading = self._generation, settings.engine_key, True
        self._load(settings, generation, report=False)
        try:
            return self.get(timeout=0)
        except ModelUnavailable as exc:
            raise UserError(str(exc)) from None

    def _load(self, settings: Settings, generation: int, report: bool = True) -> None:
        from lsp_server.model_loading import open_routes  # imports torch: kept off the server's start-up path

        started = time.perf_counter()
        routes, error = None, None
        where = settings.model or "the default model folder"
        try:
            routes = open_routes(
                settings.model,
                settings.explain_model,
                settings.device,
                settings.dtype,
                cache_bytes=settings.cache_mb << 20,
                backend=settings.backend,
            )
        except UserError as exc:
            error = str(exc)
        except Exception as exc:  # anything else a broken checkpoint can raise: report it, keep serving
            log.exception("unexpected error loading %s", where)
            error = f"cannot load model from {where}: {type(exc).__name__}: {exc}"
        with self._cond:
            if generation != self._generation:
                return  # settings changed while loading: a newer load owns the state
            self._routes, self._error, self._loading = routes, error, False
            if routes is not None:
                self._info = _describe(routes, settings, time.perf_counter() - started)
            self._cond.notify_all()
        if not report:
            return
        if error is not None:
            log.error("%s", error)
            if self._on_load_error is not None:
                self._on_load_error(error)
        else:
            log.info("model loaded from %s in %.1f s", where, time.perf_counter() - started)

    # -- use ------------------------------------------------------------------------------------------

    def get(self, timeout: float = 0.0, interrupt: Callable[[], str | None] | None = None) -> ModelRoutes:
        """The loaded engines, waiting up to `timeout` seconds for a load in progress (less if `interrupt`
        says the request is no longer wanted: a superseded request must not hold a worker)."""
        give_up = time.monotonic() + timeout
        with self._cond:
            while self._loading and (left := give_up - time.monotonic()) > 0:
                if interrupt is not None and interrupt():
                    raise ModelUnavailable("the request was cancelled while the model was loading")
                self._cond.wait(min(left, 0.1))
            if self._routes is not None:
                return self._routes
            if self._loading:
                raise ModelUnavailable("the model is still loading")
            raise ModelUnavailable(self._error or "no model has been requested")

    def status(self) -> dict[str, Any]:
        with self._cond:
            routes = self._routes
            state = "loading" if self._loading else "ready" if routes else "failed" if self._error else "idle"
            out: dict[str, Any] = {"state": state, "error": self._error}
            if routes is not None:
                out.update(self._info)
                out["cache"] = _cache_stats(routes.inline)
                if not routes.shared:
                    out["explain_cache"] = _cache_stats(routes.explain)
            return out

    def clear_caches(self) -> bool:
        with self._cond:
            routes = self._routes
        if routes is None:
            return False
        for engine in {id(e): e for e in (routes.inline, routes.explain)}.values():
            engine.clear_prefix_cache()
        return True


def _describe(routes: ModelRoutes, settings: Settings, load_s: float) -> dict[str, Any]:
    from decoder.defaults import default_model_dir

    engine = routes.inline
    cfg = engine.model.config
    return {
        "folder": str(settings.model or default_model_dir()),
        "explain_folder": settings.explain_model,
        "routes": routes.describe(),
        "device": str(engine.device),
        "dtype": str(engine.dtype).removeprefix("torch."),
        "parameters": engine.model.num_parameters(),
        "vocab_size": cfg.vocab_size,
        "max_positions": cfg.max_position_embeddings,
        "has_mask_token": engine.mask_token_id is not None,
        "load_seconds": round(load_s, 3),
    }


def _cache_stats(engine: Engine) -> dict[str, Any]:
    cache = engine.cache
    with engine.lock:  # the tree changes under requests running in worker threads
        s, pages, used = cache.stats, cache.cached_pages, cache.bytes_used
    return {
        "enabled": engine.options.use_prefix_cache,
        "lookups": s.lookups,
        "hits": s.hits,
        "hit_rate": round(s.hit_rate, 4),
        "token_hit_rate": round(s.token_hit_rate, 4),
        "matched_tokens": s.matched_tokens,
        "inserted_pages": s.inserted_pages,
        "evicted_pages": s.evicted_pages,
        "cached_pages": pages,
        "page_tokens": cache.page_size,
        "bytes_used": used,
        "byte_budget": cache.byte_budget,
        "bytes_per_token": engine.kv_bytes_per_token(),
        "capacity_tokens": cache.byte_budget // engine.kv_bytes_per_token(),  # what the budget holds at this dtype
    }
