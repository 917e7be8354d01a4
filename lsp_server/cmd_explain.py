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
    match = _LINES.match(value)
    if match is None or Path(value).exists():
        return Path(value), None, None
    start = int(match["start"])
    return Path(match["path"]), start, int(match["end"] or start)


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
