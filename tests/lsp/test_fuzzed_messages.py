"""Hundreds of mutated LSP messages on a real server pipe: fields replaced by values of the wrong type, out of
range, lone surrogates, huge strings, or removed. Every request must get exactly one answer, a result or an
invalid-params error (never an internal error: that is an exception nobody expected), every frame on stdout must
parse, and the server must still complete normally afterwards."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

from tests.lsp.test_raw_pipe import RawClient

URI = "file:///fuzz/a.py"
TEXT = "import os\n\ndef f(x):\n    return x + 1\n\nclass A:\n    def g(self):\n        pass\n"
SEED, MESSAGES = 1, 300
# Answers a fuzzed request may get: a result, invalid params, or cancelled (a fuzzed $/cancelRequest may hit it).
ALLOWED_ERRORS = {-32602, -32800}


def _pos(line: int, character: int) -> dict[str, int]:
    return {"line": line, "character": character}


def _range(a: int, b: int, c: int, d: int) -> dict[str, Any]:
    return {"start": _pos(a, b), "end": _pos(c, d)}


OPEN = {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": TEXT}}
# (method, valid params, is a request)
TEMPLATES: list[tuple[str, dict[str, Any], bool]] = [
    ("textDocument/didOpen", OPEN, False),
    (
        "textDocument/didChange",
        {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"range": _range(1, 0, 1, 0), "text": "x\n"}]},
        False,
    ),
    ("textDocument/didChange", {"textDocument": {"uri": URI, "version": 3}, "contentChanges": [{"text": TEXT}]}, False),
    ("textDocument/didClose", {"textDocument": {"uri": URI}}, False),
    (
        "textDocument/inlineCompletion",
        {"textDocument": {"uri": URI}, "position": _pos(3, 12), "context": {"triggerKind": 2}},
        True,
    ),
    (
        "textDocument/inlineCompletion",
        {
            "textDocument": {"uri": URI},
            "position": _pos(7, 8),
            "context": {"triggerKind": 1, "selectedCompletionInfo": {"range": _range(7, 4, 7, 8), "text": "pass"}},
        },
        True,
    ),
    ("parafill/explain", {"textDocument": {"uri": URI}, "range": _range(2, 0, 4, 0)}, True),
    ("workspace/executeCommand", {"command": "parafill.explain", "arguments": [URI, _range(2, 0, 4, 0)]}, True),
    ("parafill/stats", {}, True),
    ("parafill/clearCache", {}, True),
    ("workspace/didChangeConfiguration", {"settings": {"parafill": {"threshold": 0.7, "maxTokensLine": 8}}}, False),
    ("$/cancelRequest", {"id": 105}, False),
    ("$/setTrace", {"value": "verbose"}, False),
]
ODD_VALUES: list[Any] = [
    *(None, True, False, 0, -1, 2**40, -(2**40), 1.5, 1e308),
    *("", "x" * 5000, "\ud800", "\x00", "😀" * 50, "file:///", URI, "untitled:1", "http://x"),
    *([], {}, [1, 2], {"a": 1}),
]


def _paths(obj: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += _paths(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out += _paths(value, (*path, i))
    return out


def mutate(params: dict[str, Any], rng: random.Random) -> Any:
    """1-3 fields replaced by an odd value or removed; sometimes the whole params."""
    params = copy.deepcopy(params)
    paths = _paths(params)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths)
        if not path:
            return rng.choice(ODD_VALUES)
        parent = params
        try:
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and rng.random() < 0.2:
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = rng.choice(ODD_VALUES)
        except (KeyError, IndexError, TypeError):  # an earlier mutation changed the shape above this path
            pass
    return params


async def test_mutated_messages_get_answers_or_invalid_params_and_the_server_keeps_serving(tiny_model_dir):
    rng = random.Random(SEED)
    c = await RawClient.start()
    try:
        options = {"model": str(tiny_model_dir), "maxTokensLine": 8, "maxTokensBlock": 16, "timeBudgetMs": 5000}
        c.send({"id": 0, "method": "initialize", "params": {"capabilities": {}, "initializationOptions": options}})
        assert "result" in await c.response(0)
        c.send({"method": "initialized", "params": {}})
        c.send({"method": "textDocument/didOpen", "params": OPEN})
        requests: dict[int, tuple[str, Any]] = {}
        for i in range(MESSAGES):
            method, params, is_request = rng.choice(TEMPLATES)
            fuzzed = mutate(params, rng) if rng.random() < 0.8 else params
            msg_id = 100 + i
            body = {"jsonrpc": "2.0", "method": method, "params": fuzzed} | ({"id": msg_id} if is_request else {})
            c.frame(json.dumps(body).encode("utf-8", "surrogatepass"))  # a lone surrogate as raw bytes
            if is_request:
                requests[msg_id] = (method, fuzzed)

        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < len(requests):
            message = await c.read(120)
            if "method" in message:  # a notification (log), or a request of the server's: answered empty
                if "id" in message:
                    c.send({"id": message["id"], "result": None})
                continue
            assert message["id"] in requests and message["id"] not in answers, message
            answers[message["id"]] = message
        for msg_id, answer in answers.items():
            if "error" in answer:
                method, params = requests[msg_id]
                assert answer["error"]["code"] in ALLOWED_ERRORS, (method, json.dumps(params)[:500], answer["error"])
        assert sum("result" in a for a in answers.values()) > len(answers) // 4  # the valid ones got answers

        other = "file:///fuzz/b.py"
        c.send({"method": "textDocument/didOpen", "params": {"textDocument": {**OPEN["textDocument"], "uri": other}}})
        c.send(
            {
                "id": 1,
                "method": "textDocument/inlineCompletion",
                "params": TEMPLATES[4][1] | {"textDocument": {"uri": other}},
            }
        )
        final = await c.response(1)
        assert final.get("result"), final
        assert c.proc.returncode is None
    finally:
        c.proc.kill()
        await c.proc.wait()
