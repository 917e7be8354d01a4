"""`parafill serve --tcp` over a real socket: one client is served; a second connection while it is served
is closed at once instead of taking over the first client's answers."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from tests.lsp.session import REPO, SERVER


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TcpClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int, timeout: float = 60) -> TcpClient:
        """Connect, retrying while the server starts listening."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                return cls(*await asyncio.open_connection("127.0.0.1", port))
            except OSError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.2)

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0"} | message).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def response(self, msg_id: int, timeout: float = 60) -> dict[str, Any]:
        while True:
            header = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), timeout)
            length = int(dict(line.split(": ", 1) for line in header.decode().strip().split("\r\n"))["Content-Length"])
            message = json.loads(await asyncio.wait_for(self.reader.readexactly(length), timeout))
            if "method" not in message and message.get("id") == msg_id:
                return message


async def closed_without_answer(client: TcpClient) -> bool:
    """The server closed the connection: end of stream, or a reset (it closed with our request unread)."""
    try:
        return await asyncio.wait_for(client.reader.read(), 30) == b""
    except ConnectionResetError:
        return True


def initialize(msg_id: int, model: str) -> dict[str, Any]:
    options = {"parafill": {"model": model, "enable": False}}
    return {"id": msg_id, "method": "initialize", "params": {"capabilities": {}, "initializationOptions": options}}


async def test_one_client_at_a_time_over_tcp(tiny_model_dir):
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *SERVER, "--tcp", f"127.0.0.1:{port}", cwd=str(REPO), stderr=asyncio.subprocess.PIPE
    )
    try:
        first = await TcpClient.connect(port)
        first.send(initialize(1, str(tiny_model_dir)))
        assert "capabilities" in (await first.response(1))["result"]

        # A second client, while the first is served: closed without an answer, the first unharmed.
        second = await TcpClient.connect(port)
        second.send(initialize(1, str(tiny_model_dir)))
        assert await closed_without_answer(second)
        first.send({"id": 2, "method": "parafill/stats", "params": {}})
        assert "result" in await first.response(2)

        first.send({"id": 3, "method": "shutdown"})
        assert (await first.response(3))["result"] is None
        first.send({"method": "exit"})
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        stderr = (await proc.stderr.read()).decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
