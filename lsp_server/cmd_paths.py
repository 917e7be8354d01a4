"""Output paths the commands write at the end of a long run, checked before the run: a path that cannot be
written would otherwise lose the results after all the work. Light (no torch): `report` uses it too."""

from __future__ import annotations

import os
from pathlib import Path

from lsp_server.errors import UserError


def check_output_file(path: str | Path | None, flag: str) -> None:
    """`path` (None: not asked for; '-': stdout) must be a writable file, its folder made if missing."""
    if path is None or str(path) == "-":
        return
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder: give a file name")
    _make_folder(path.parent, flag, path)
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UserError(f"{flag} {path} is not writable")


def check_output_folder(path: str | Path | None, flag: str) -> None:
    """`path` (None: not asked for) must be a writable folder; it is made if missing."""
    if path is None:
        return
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is not a folder")
    _make_folder(path, flag, path)
    if not os.access(path, os.W_OK):
        raise UserError(f"{flag} {path} is not writable")


def _make_folder(folder: Path, flag: str, path: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file where a folder should be, no permission...
        raise UserError(f"{flag} {path}: cannot make the folder {folder}: {exc.strerror or exc}") from None
