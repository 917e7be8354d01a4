"""`parafill` command line: one subcommand per job, each a thin layer over the library."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, NoReturn

from lsp_server.errors import UserError


class Command(NamedTuple):
    help: str
    module: str  # in lsp_server; imported only when the command runs (most import torch)
    add_arguments: str = "add_arguments"
    run: str = "run"
    # Ctrl-C exits at once (130) instead of raising KeyboardInterrupt wherever the main thread is: for the
    # commands that only read and print. Raised inside an import (torch's take seconds), KeyboardInterrupt can
    # leave a module half-made: in 1 CI run the next `numpy.linalg` recursed until a RecursionError, taken for a
    # model that cannot load (exit 2). Commands with something to unwind (bench stops llama.cpp servers,
    # training saves a checkpoint) keep KeyboardInterrupt.
    exit_on_interrupt: bool = False


# Only the chosen command's module is imported: `parafill --help` stays fast, and Ctrl-C during the
# imports is handled by main like anywhere else.
SUBCOMMANDS: dict[str, Command] = {
    "generate": Command("generate text from a prompt (block diffusion or AR)", "cmd_generate", exit_on_interrupt=True),
    "serve": Command("run the language server (stdio, or --tcp)", "cmd_serve"),
    "complete": Command("inline completion at FILE:LINE:COL (as the server)", "cmd_complete", exit_on_interrupt=True),
    "explain": Command("explain FILE[:START-END] (as the server)", "cmd_explain", exit_on_interrupt=True),
    "eval": Command("completion quality on held-out Python files, AR vs block diffusion", "cmd_eval"),
    "report": Command("compare two models' eval reports task by task, or merge reports of one model", "cmd_report"),
    "bench": Command(
        "latency vs span (block, AR, llama.cpp), quality vs threshold, prefix cache, LSP p50/p99", "cmd_bench"
    ),
    "corpus": Command(
        "build a tokenized corpus of Python source for training", "cmd_train", "add_corpus", "run_corpus_command"
    ),
    "train": Command(
        "train or fine-tune a model (AR, then block diffusion)", "cmd_train", "add_train", "run_train_command"
    ),
    "distill-set": Command(
        "self-distillation rows for parallel decoding: real prompts + the model's greedy continuations",
        "cmd_train",
        "add_distill",
        "run_distill_command",
    ),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one clear line, exit 2 (argparse prints usage too)
        print(f"parafill: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _command_function(name: str, function: str) -> Callable:
    module = importlib.import_module(f"lsp_server.{SUBCOMMANDS[name].module}")
    return getattr(module, function)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand is listed; only `command`'s arguments are defined (the others are never parsed)."""
    parser = _Parser(prog="parafill", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, entry in SUBCOMMANDS.items():
        command_parser = sub.add_parser(name, help=entry.help, description=entry.help)
        if name == command:
            _command_function(name, entry.add_arguments)(command_parser)
    return parser


def _command_word(argv: list[str]) -> str | None:
    # The top-level parser has no options but --help: the first other word names the command.
    return next((word for word in argv if not word.startswith("-")), None)


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser(_command_word(argv)).parse_args(argv)


def _check_common(args: argparse.Namespace) -> None:
    """Arguments several commands share, checked before any model loads."""
    for name in ("model", "explain_model"):
        folder = getattr(args, name, None)
        if isinstance(folder, str) and Path(folder).exists() and not Path(folder).is_dir():
            raise UserError(f"--{name.replace('_', '-')} {folder} is not a folder")
    device = getattr(args, "device", None)
    if isinstance(device, str):  # the commands that take --device import torch anyway
        import torch

        try:
            torch.device(device)
        except (RuntimeError, ValueError):
            raise UserError(f"--device {device!r} is not a device name (cpu, cuda, cuda:N, mps, ...)") from None


def _run(argv: list[str]) -> int:
    args = _parse(argv)
    _check_common(args)
    return _command_function(args.command, SUBCOMMANDS[args.command].run)(args)


def _exit_on_interrupt(signum: int, frame: object) -> NoReturn:
    _exit_at_once(128 + signal.SIGINT, "parafill: interrupted")


@contextlib.contextmanager
def _interrupt_handling(command: str | None) -> Iterator[None]:
    """For an `exit_on_interrupt` command, SIGINT exits at once while it runs (set before its module is
    imported); the handler before is put back after (tests call `main` in-process)."""
    entry = SUBCOMMANDS.get(command or "")
    if entry is None or not entry.exit_on_interrupt or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _exit_on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _discard_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of what is still buffered cannot
    fail a second time (and print its own 'Exception ignored' lines)."""
    if sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor behind stdout (tests capture it): nothing to flush later
        pass


def _stdout_broken() -> bool:
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        return False
    except OSError:
        return True


def _exit_at_once(code: int, message: str) -> NoReturn:
    """Say `message` on stderr and exit with `code` now. After some Ctrl-Cs during torch's imports the
    interpreter, though `main` caught the interrupt, killed itself with SIGINT at exit (status -2 to a parent,
    not 130; our reading: CPython had marked the interrupt unhandled while C code ran Python source): os._exit
    skips that step. Safe in a signal handler: a flush that interrupts a write of the same stream raises
    RuntimeError (reentrant call), and the message goes straight to the file descriptor."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError, RuntimeError):
            pass
    with contextlib.suppress(OSError):
        os.write(2, f"{message}\n".encode())
    os._exit(code)


def _fail(message: str, code: int) -> int:
    print(f"parafill: error: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere to put the answer
        return _fail("standard output is closed", 1)
    argv = sys.argv[1:] if argv is None else argv
    try:
        with _interrupt_handling(_command_word(argv)):
            try:
                return _run(argv)
            finally:  # --help's text too: a full disk or a closed pipe shows here, not as noise at interpreter exit
                sys.stdout.flush()
    except UserError as exc:
        return _fail(str(exc), 2)
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as a SIGPIPE death would
        _discard_stdout()
        return 128 + 13
    except KeyboardInterrupt:
        _exit_at_once(128 + signal.SIGINT, "parafill: interrupted")
    except OSError as exc:  # the system refused a write or a read: say which, without a traceback
        if exc.filename is None or _stdout_broken():  # no file named: the output stream refused a write
            _discard_stdout()
            return _fail(f"cannot write the output: {exc.strerror or exc}", 1)
        return _fail(str(exc), 1)


if __name__ == "__main__":
    raise SystemExit(main())
