"""`parafill complete FILE:LINE:COL`: one inline completion through the server's own service, for testing
without an editor. LINE and COL are 1-based; COL counts characters (code points)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lsp_server.cmd_generate import add_model_arguments
from lsp_server.documents import Document, refusal_reason
from lsp_server.errors import UserError
from lsp_server.inline import InlineRequest
from lsp_server.positions import UTF32
from lsp_server.service import CompletionService
from lsp_server.settings import Settings, parse_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("location", help="FILE:LINE:COL, 1-based (COL counts characters)")
    add_setting_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def add_setting_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-tokens", type=int, help="span limit (single-line and multi-line)")
    parser.add_argument("--block-size", type=int)
    parser.add_argument("--threshold", type=float, help="default: the model's measured one, else its family's")
    parser.add_argument("--time-budget-ms", type=int)
    parser.add_argument(
        "--min-confidence", type=float, help="hold back a suggestion less sure than this (0-1; default 0: never)"
    )


# Settings the commands take as flags, and the flag of each (as named in errors).
_SETTING_FLAGS = {
    "explain_model": "--explain-model",
    "block_size": "--block-size",
    "threshold": "--threshold",
    "time_budget_ms": "--time-budget-ms",
    "explain_max_tokens": "--max-tokens",
    "min_confidence": "--min-confidence",
}


def settings_from(args: argparse.Namespace) -> Settings:
    raw = {"model": args.model, "device": args.device, "dtype": args.dtype, "backend": args.backend}
    flags = {"model": "--model", "device": "--device", "dtype": "--dtype", "backend": "--backend"}
    for name, flag in _SETTING_FLAGS.items():
        if getattr(args, name, None) is not None:
            raw[name], flags[name] = getattr(args, name), flag
    if getattr(args, "max_tokens", None) is not None:
        raw["max_tokens_line"] = raw["max_tokens_block"] = args.max_tokens
        flags["max_tokens_line"] = flags["max_tokens_block"] = "--max-tokens"
    for name, value in raw.items():  # one at a time: the error names the flag, not the setting behind it
        _, warnings = parse_settings({name: value})
        if warnings:
            raise UserError(f"{flags[name]} {value}: {_reason(warnings[0])}")
    settings, _ = parse_settings(raw)
    return settings


def _reason(warning: str) -> str:
    """parse_settings words its warnings for the editor ("setting 'x'=0: <reason>; keeping 32"): the reason."""
    return warning.partition(": ")[2].rpartition("; keeping")[0] or warning


def read_source(path: Path, max_bytes: int) -> str:
    try:
        text = path.read_text(encoding="utf-8-sig")  # -sig: a byte order mark is not the first column
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path} as UTF-8 text: {exc}") from exc
    if (reason := refusal_reason(text, max_bytes)) is not None:
        raise UserError(f"refusing {path}: {reason}")
    return text


def parse_location(value: str) -> tuple[Path, int, int]:
    path, _, rest = value.rpartition(":")
    path2, _, line = path.rpartition(":")
    try:
        line_no, col_no = int(line), int(rest)
    except ValueError:
        raise UserError(f"expected FILE:LINE:COL, got {value!r}") from None
    if not path2:
        raise UserError(f"expected FILE:LINE:COL, got {value!r}")
    return Path(path2), line_no, col_no


def cursor_offset(doc: Document, line_no: int, col_no: int) -> int:
    if not 1 <= line_no <= doc.line_count:
        raise UserError(f"line {line_no} is outside the file (1..{doc.line_count})")
    length = len(doc.line_text(line_no - 1))
    if not 1 <= col_no <= length + 1:
        raise UserError(f"column {col_no} is outside line {line_no} (1..{length + 1})")
    return doc.offset_at(line_no - 1, col_no - 1, UTF32)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    path, line_no, col_no = parse_location(args.location)
    text = read_source(path, settings.max_document_kb * 1024)
    if not text.strip():  # as explain: no code, nothing the model could continue
        raise UserError(f"{path} holds no code to complete")
    doc = Document(uri=path.resolve().as_uri(), text=text)
    cursor = cursor_offset(doc, line_no, col_no)
    service = CompletionService(settings)
    service.holder.load_now(settings)
    answer = service.complete(InlineRequest(doc.uri, doc, cursor))
    if args.json:
        print(json.dumps(answer.to_json() | {"file": str(path), "line": line_no, "column": col_no}))
    else:
        sys.stdout.write((answer.text or "") + "\n")
        sure = "" if answer.confidence is None else f", confidence {answer.confidence:.2f}"
        print(
            f"[{answer.decoder or answer.route}] {answer.tokens} tokens, {answer.forward_passes} forward passes, "
            f"{answer.latency_ms:.1f} ms{sure}, stop: {answer.stop_reason}",
            file=sys.stderr,
        )
    return 0
