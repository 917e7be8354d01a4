"""Where exported graphs live and when they are rebuilt.

An export is keyed by everything that shapes it: the graph version, torch's version, the source of the
model and of the export wrapper, the dtype, config.json, and each weight file's name, size and mtime (a
content digest of gigabytes of weights would cost seconds at every start). A change to any of them gives
a new key, so the next start exports again and removes the stale export.

Layout: `<model folder>/.parafill-onnx/<key>/forward.onnx` (+ `forward.onnx.data` for weights past 2 GB,
+ `export.json`). When the model folder is read-only the root is `$XDG_CACHE_HOME/parafill/onnx/<folder
digest>/` instead; PARAFILL_ONNX_CACHE=<dir> puts it under <dir>. A model held in memory only (no folder)
is keyed by a digest of its parameters, under the user cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

import decoder.checkpoint
import decoder.config
import decoder.families
import decoder.model
import decoder.onnx_backend.export as export_module
from decoder.checkpoint import CheckpointError, weight_files
from decoder.model import CausalLM
from decoder.onnx_backend.errors import OnnxBackendError

FOLDER_CACHE = ".parafill-onnx"
KEY_LENGTH = 20
STAGING_PREFIX = "staging-"
STALE_STAGING_SECONDS = 3600

log = logging.getLogger("parafill.onnx")


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _code_parts(model: CausalLM, target: str) -> list[bytes]:
    dtype = str(next(model.parameters()).dtype)
    # The code that builds the graph from the folder: the model, the export, and how config.json is read.
    modules = (decoder.model, export_module, decoder.config, decoder.families, decoder.checkpoint)
    sources = [Path(module.__file__).read_bytes() for module in modules]
    versions = f"{export_module.GRAPH_VERSION}:{torch.__version__}:{dtype}:{target}"
    return [versions.encode(), *sources]


def export_key(model: CausalLM, folder: Path | None, target: str = "cpu") -> str:
    parts = _code_parts(model, target)
    if folder is None:
        for name, tensor in model.state_dict().items():
            parts += [
                name.encode(),
                str(tuple(tensor.shape)).encode(),
                tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes(),
            ]
    else:
        try:
            files = weight_files(folder)
        except CheckpointError as exc:
            raise OnnxBackendError(str(exc)) from exc
        parts.append((folder / "config.json").read_bytes())
        for path in files:
            stat = path.stat()
            parts.append(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return _digest(parts)[:KEY_LENGTH]


def user_cache_root() -> Path:
    base = os.environ.get("PARAFILL_ONNX_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "parafill" / "onnx"


def cache_roots(folder: Path | None) -> list[Path]:
    """Candidate roots for this model's exports, preferred first."""
    if folder is None:
        return [user_cache_root() / "in-memory"]
    named = user_cache_root() / hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    if os.environ.get("PARAFILL_ONNX_CACHE"):
        return [named]
    return [folder / FOLDER_CACHE, named]


def _staging_dir(roots: list[Path]) -> tuple[Path, Path]:
    """A fresh staging folder in the first writable root: (root, staging)."""
    errors = []
    for root in roots:
        try:
            root.mkdir(parents=True, exist_ok=True)
            ignore = root / ".gitignore"
            if root.name == FOLDER_CACHE and not ignore.exists():
                ignore.write_text("# exported ONNX graphs, rebuilt when the weights change\n*\n")
            return root, Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
        except OSError as exc:
            errors.append(f"{root}: {exc}")
            log.info("cannot write ONNX export cache at %s (%s): trying the next place", root, exc)
    raise OnnxBackendError("no writable place for the ONNX export: " + "; ".join(errors))


def _remove_stale(root: Path, keep: str, target: str) -> None:
    """Exports replaced by `keep`: the other keys for the same target (an export for the other provider, made
    by another environment sharing the folder, stays; each would otherwise re-export the other's away)."""
    for entry in root.iterdir():
        stale_key = (
            re.fullmatch(f"[0-9a-f]{{{KEY_LENGTH}}}", entry.name)
            and entry.name != keep
            and _read_record(entry).get("target", target) == target
        )
        stale_staging = (
            entry.name.startswith(STAGING_PREFIX) and time.time() - entry.stat().st_mtime > STALE_STAGING_SECONDS
        )
        if entry.is_dir() and (stale_key or stale_staging):
            shutil.rmtree(entry, ignore_errors=True)
            log.info("removed stale ONNX export %s", entry)


def cached_export(
    model: CausalLM,
    folder: Path | None,
    target: str = "cpu",
    export: Callable[[CausalLM, Path, str], dict] = export_module.export_forward,
) -> tuple[Path, dict]:
    """The exported graph of `model` for the `target` provider ("cpu" or "cuda"): reused when its key
    matches, else exported (and checked) now. Returns (the .onnx file, its export record + "reused")."""
    key = export_key(model, folder, target)
    roots = cache_roots(folder)
    for root in roots:
        graph = root / key / export_module.GRAPH_FILE
        if graph.is_file():
            record = _read_record(root / key)
            return graph, {**record, "reused": True, "path": str(graph)}
    root, staging = _staging_dir(roots)
    log.info("exporting the model to ONNX (once per weights; seconds to minutes) under %s", root)
    try:
        record = export(model, staging / export_module.GRAPH_FILE, target)
        record.update(key=key, target=target, torch=torch.__version__, created=time.strftime("%Y-%m-%dT%H:%M:%S"))
        (staging / "export.json").write_text(json.dumps(record, indent=2) + "\n")
        staging.chmod(0o755)  # mkdtemp makes it private; the export is as readable as the model folder
        try:
            staging.rename(root / key)  # atomic; another process may have published the same key first
        except OSError:
            if not (root / key / export_module.GRAPH_FILE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _remove_stale(root, keep=key, target=target)
    graph = root / key / export_module.GRAPH_FILE
    log.info("exported %s in %.1f s (%s KV)", graph, record["export_seconds"], record["kv"])
    return graph, {**record, "reused": False, "path": str(graph)}


def _read_record(folder: Path) -> dict:
    try:
        return json.loads((folder / "export.json").read_text())
    except (OSError, ValueError):
        return {}
