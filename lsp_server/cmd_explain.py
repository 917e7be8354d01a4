"""`parafill explain FILE[:START-END]`: explain lines START..END (1-based, inclusive; default the whole
file) through the server's own service. The text streams to stdout as it is decoded."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from lsp_server.cmd_complete import read_source, settings_from
from lsp_server.cmd_generate import add_model_arguments
from lsp_server.documents import Document
from lsp_server.engine_holder import ModelUnavailable
from lsp_server.errors import UserError
from lsp_server.explain import ExplainError
from lsp_server.service import CompletionService

_LINES = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--explain-model", help="a separate model folder for explain (its own engine and cache)")
    parser.add_argument("location", help="FILE or FILE:START-END (1-based, inclusive lines) or FILE:LINE")
    parser.add_argument("--max-tokens", dest="explain_max_tokens", type=int, help="length limit of the answer")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")


def parse_lines(value: str) -> tuple[Path, int | None, int | None]:
    if Path(value).exists():
        return Path(value), None, None
    match = _LINES.match(value)
    if match is not None and not _file_before_colon(match["path"]):
        start = int(match["start"])
        return Path(match["path"]), start, int(match["end"] or start)
    if _file_before_colon(value):  # `FILE:1-`, `FILE:1:2`: a file, then no range we read
        raise UserError(f"malformed line range in {value!r}: expected FILE, FILE:LINE or FILE:START-END")
    return Path(value), None, None  # read_source says that no such file exists


def _file_before_colon(value: str) -> bool:
    """Whether some text before a ':' of `value` names a file (then what follows is a bad line range)."""
    head = value
    while ":" in head:
        head = head.rpartition(":")[0]
        if Path(head).is_file():
            return True
    return False


def select_lines(doc: Document, start: int | None, end: int | None) -> str:
    if start is None or end is None:
        return doc.text
    if not 1 <= start <= end <= doc.line_count:
        raise UserError(f"lines {start}-{end} are outside the file (1..{doc.line_count}) or reversed")
    return doc.text[doc.line_starts[start - 1] : doc.line_end(end - 1)]


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    path, start, end = parse_lines(args.location)
    doc = Document(uri=path.resolve().as_uri(), text=read_source(path, settings.max_document_kb * 1024))
    code = select_lines(doc, start, end)
    if not code.strip():
        raise UserError("the selected lines hold no code to explain")
    service = CompletionService(settings)
    service.holder.load_now(settings)

    def stream(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    try:
        answer = service.explain(code, on_text=None if args.json else stream)
    except (ModelUnavailable, ExplainError) as exc:
        raise UserError(str(exc)) from exc
    if answer.truncated_input:  # said, not only in --json: otherwise the answer looks like one on the whole code
        print("parafill: note: the code is too long for one prompt: only its start was explained", file=sys.stderr)
    if args.json:
        print(json.dumps(answer.to_json() | {"file": str(path), "lines": [start, end]}))
    else:
        sys.stdout.write("\n")
        print(
            f"[{answer.route}] {answer.tokens} tokens, {answer.forward_passes} forward passes, "
            f"{answer.latency_ms:.1f} ms, stop: {answer.stop_reason}",
            file=sys.stderr,
        )
    return 0
