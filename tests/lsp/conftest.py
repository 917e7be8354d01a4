"""Fixtures: a running `parafill serve` with the tiny model, stopped (shutdown + exit) after use.

Starting a server costs seconds (Python, torch), so most test modules share one per module
(`shared`, with `pytestmark = pytest.mark.asyncio(loop_scope="module")`); tests that need a fresh
process (other initialize options, shutdown) start their own with `Session().start(...)`.
"""

from __future__ import annotations

import pytest_asyncio

from tests.lsp.session import Session, tiny_options


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(tiny_model_dir):
    s = await Session().start(tiny_options(tiny_model_dir))
    try:
        yield s
    finally:
        await s.stop()
