"""`parafill serve`: the language server over stdio (default) or TCP."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import BinaryIO

from lsp_server.cmd_generate import add_model_arguments
from lsp_server.errors import UserError
from lsp_server.logs import setup_logging
from lsp_server.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--explain-model", help="a separate model folder for explain (its own engine and cache)")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    transport.add_argument("--tcp", metavar="[HOST:]PORT", help="listen on TCP (host 127.0.0.1 unless given)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def parse_tcp(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise UserError(f"--tcp expects [HOST:]PORT, got {value!r}") from None
    if not 0 <= number <= 65535:
        raise UserError(f"--tcp port {number} is out of range")
    return host.strip("[]") or "127.0.0.1", number


def check_listen(host: str, port: int) -> None:
    """Fail before the model loads when the address cannot be listened on: a port in use, a host that
    does not resolve or is not this machine's. (A race with another process is caught again in run.)"""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
            probe.bind(address)
    except OSError as exc:
        raise listen_error(host, port, exc) from None


def listen_error(host: str, port: int, exc: OSError) -> UserError:
    return UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


def protocol_stdout() -> BinaryIO:
    """Keep a private handle on stdout for the protocol and send everything else written there (a stray
    print, a C library) to stderr instead: one byte of noise on stdout breaks the client."""
    fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return os.fdopen(fd, "wb")


def run(args: argparse.Namespace) -> int:
    from lsp_server.server import create_server  # after argument errors are reported

    address = parse_tcp(args.tcp) if args.tcp else None
    if address is not None:
        check_listen(*address)
    setup_logging(args.log_level)
    settings = Settings(
        model=args.model,
        explain_model=args.explain_model,
        device=args.device,
        dtype=args.dtype,
        backend=args.backend,
    )
    server = create_server(settings)
    if address is not None:
        try:
            server.start_tcp(*address)
        except OSError as exc:  # taken since check_listen: the bind is the only OSError that gets out
            raise listen_error(*address, exc) from None
    else:
        server.start_io(sys.stdin.buffer, protocol_stdout())
    server.exit_now()  # the client went away without `exit` (end of input): same exit path
    return 1
