"""Where the shipped default model lives (overridable with PARAFILL_MODEL)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def default_model_dir() -> Path:
    return Path(os.environ.get("PARAFILL_MODEL") or REPO_ROOT / "models" / "default")
