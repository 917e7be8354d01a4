"""Files the commands read and write. Output paths are checked before a long run: a path that cannot be
written would otherwise lose the results after all the work. Light (no torch): `report` uses it too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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


def read_json_file(path: str | Path, what: str) -> Any:
    """The JSON in `path`, or one line naming `what` it should have been and why it cannot be read."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"no {what} at {path}") from None
    except OSError as exc:  # a folder, no permission...
        raise UserError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is not a JSON {what}: {exc}") from None
