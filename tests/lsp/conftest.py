"""Fixtures: a running `parafill serve` with the tiny model, stopped (shutdown + exit) after the test."""

from __future__ import annotations

import pytest

from tests.lsp.session import Session, tiny_options


@pytest.fixture
async def session(tiny_model_dir):
    s = await Session().start(tiny_options(tiny_model_dir))
    try:
        yield s
    finally:
        await s.stop()
