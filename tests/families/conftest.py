"""Replicas of the published checkpoints, written once per test session on first use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.families.replicas import write_replica


@pytest.fixture(scope="session")
def replica(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = write_replica(name, tmp_path_factory.mktemp(name))
        return made[name]

    return get
