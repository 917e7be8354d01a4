"""Fixtures for the kernel tests: the Triton kernels run on CPU tensors in Triton's interpreter.

The interpreter has to be switched on (TRITON_INTERPRET=1) before triton is imported, for the whole
process. So the kernels run in one spawned worker process (tests/kernels/interp_worker.py) for this
folder, and tests call them through a proxy: the pytest process, and every other test folder, never
sees the variable. Buffers the kernels allocate are pre-filled with sentinels (NaN / -7 / True) in the
worker, so any element a kernel fails to write shows up.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from tests.kernels import interp_worker


class Interpreted:
    """Attribute access returns a function that runs `module.<name>` in the interpreter worker."""

    def __init__(self, pool: ProcessPoolExecutor, module: str, env: dict[str, str] | None = None) -> None:
        self._pool, self._module, self._env = pool, module, env or {}

    def with_env(self, module: str, **env: str) -> Interpreted:
        return Interpreted(self._pool, module, env)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            return self._pool.submit(interp_worker.call, self._module, name, args, kwargs, self._env).result()

        return run


@pytest.fixture(scope="package")
def interp_pool() -> Iterator[ProcessPoolExecutor]:
    pytest.importorskip("triton")
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no triton imported yet
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=interp_worker.init) as pool:
        yield pool


@pytest.fixture(scope="package")
def tdn(interp_pool: ProcessPoolExecutor) -> Interpreted:
    """parafill_kernels.triton_denoise, interpreted, with poisoned allocations."""
    return Interpreted(interp_pool, "parafill_kernels.triton_denoise")
