"""Raw bytes on the server's stdin: malformed JSON-RPC, requests before initialize and after shutdown.
Everything on stdout must parse as LSP frames; the server keeps answering normal requests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.lsp.session import REPO, SERVER


class RawClient:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.stderr: list[str] = []

    @classmethod
    async def start(cls) -> RawClient:
        proc = await asyncio.create_subprocess_exec(
            *SERVER,
            cwd=str(REPO),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        client = cls(proc)
        client._drain = asyncio.create_task(client._read_stderr())
        return client

    async def _read_stderr(self) -> None:
        while line := await self.proc.stderr.readline():
            self.stderr.append(line.decode("utf-8", "replace").rstrip())

    def raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)

    def frame(self, body: bytes) -> None:
        self.raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send(self, message: dict[str, Any]) -> None:
        self.frame(json.dumps({"jsonrpc": "2.0"} | message).encode())

    async def read(self, timeout: float = 60) -> dict[str, Any]:
        """The next frame on stdout; fails on anything that is not a well-formed LSP frame."""
        header = await asyncio.wait_for(self.proc.stdout.readuntil(b"\r\n\r\n"), timeout)
        fields = dict(line.split(": ", 1) for line in header.decode("ascii").strip().split("\r\n"))
        body = await asyncio.wait_for(self.proc.stdout.readexactly(int(fields["Content-Length"])), timeout)
        return json.loads(body)

    async def response(self, msg_id: Any, timeout: float = 60) -> dict[str, Any]:
        """Skip notifications (log messages) until the response to `msg_id`."""
        while True:
            message = await self.read(timeout)
            if "method" not in message and message.get("id") == msg_id:
                return message


async def test_malformed_messages_before_initialize_and_after_shutdown(tiny_model_dir):
    c = await RawClient.start()
    try:
        # before initialize: a request is refused with -32002, a notification is dropped
        c.send({"id": 1, "method": "textDocument/inlineCompletion", "params": {}})
        assert (await c.response(1))["error"]["code"] == -32002
        c.send({"method": "textDocument/didOpen", "params": {}})

        # an initialize with invalid params is answered -32602 and does not count: a corrected one follows
        c.send({"id": 20, "method": "initialize", "params": {"processId": "nope", "capabilities": {}}})
        assert (await c.response(20))["error"]["code"] == -32602
        c.send({"id": 2, "method": "initialize", "params": {"capabilities": {}, "initializationOptions": {}}})
        assert "capabilities" in (await c.response(2))["result"]
        c.send({"method": "initialized", "params": {}})

        c.frame(b"{this is not json")  # parse error: -32700 with a null id
        assert (await c.response(None))["error"]["code"] == -32700
        c.frame(b"\xff\xfe\x00 not utf-8")
        assert (await c.response(None))["error"]["code"] == -32700
        c.frame(b"[1, 2, 3]")  # JSON, but not a message
        c.frame(b'{"id": 3, "method": "parafill/stats"}')  # no "jsonrpc": invalid request
        assert (await c.response(3))["error"]["code"] == -32600
        c.raw(b"X-Junk: header-without-length\r\n")
        c.send({"id": 4, "method": "initialize", "params": {"capabilities": {}}})  # a second initialize
        assert (await c.response(4))["error"]["code"] == -32600
        c.send({"id": 5, "method": "textDocument/inlineCompletion", "params": {"position": "nowhere"}})
        assert (await c.response(5))["error"]["code"] == -32602
        c.send({"id": 6, "method": "$/noSuchRequest", "params": {}})
        assert (await c.response(6))["error"]["code"] == -32601
        c.send({"method": "$/cancelRequest", "params": {"id": 12345}})  # cancel of an unknown id

        # a value inside params that looks like a message is just a value
        c.send({"id": 10, "method": "parafill/stats", "params": {"x": {"jsonrpc": "2.0", "id": 3}}})
        assert "forward_passes" in (await c.response(10))["result"]
        for bad_id in ({}, [1], True, 1.5):  # ids are strings or integers: -32600 with a null id, serving on
            c.send({"id": bad_id, "method": "parafill/stats", "params": {}})
            assert (await c.response(None))["error"]["code"] == -32600

        c.send({"id": 7, "method": "parafill/stats", "params": {}})  # still serving
        assert "forward_passes" in (await c.response(7))["result"]

        c.send({"id": 8, "method": "shutdown"})
        assert (await c.response(8))["result"] is None
        c.send({"id": 9, "method": "parafill/stats", "params": {}})
        assert (await c.response(9))["error"]["code"] == -32600
        c.send({"method": "exit"})
        assert await asyncio.wait_for(c.proc.wait(), 30) == 0
        await asyncio.wait_for(c._drain, 10)
        log = "\n".join(c.stderr)
        assert "before initialize" in log and "malformed message" in log and "after shutdown" in log
        assert "Traceback" not in log
    finally:
        if c.proc.returncode is None:
            c.proc.kill()
            await c.proc.wait()
