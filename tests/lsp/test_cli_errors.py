"""The command line under bad input and a hostile environment: one line on stderr, the right exit code, never
a traceback. Output that cannot be written, addresses that cannot be listened on, Ctrl-C, and paths that
would lose the results at the end of a run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lsp_server.cli import main
from tests.lsp.session import REPO, SAMPLE

PY = [sys.executable, "-m", "lsp_server.cli"]
REPORT = REPO / "benchmarks" / "results" / "eval_default_cpu.json"  # `report compare` prints it without a model


def run_cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run([*PY, *args], stderr=subprocess.PIPE, text=True, timeout=120, cwd=REPO, **kwargs)


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Run the CLI with stdout a pipe whose reader is already gone (as `| head -c 1` once it has read)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return run_cli(*args, stdout=write_end)
    finally:
        os.close(write_end)


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr and len(lines) == 1, stderr
    assert lines[0].startswith("parafill: error: "), stderr
    return lines[0]


# -- output that cannot be written ---------------------------------------------------------------------


def test_a_closed_pipe_stops_quietly_with_the_sigpipe_code():
    proc = run_into_closed_pipe("report", "compare", str(REPORT), str(REPORT))
    assert proc.returncode == 128 + signal.SIGPIPE and proc.stderr == ""


def test_a_closed_pipe_during_a_streamed_explain(tiny_model_dir):
    proc = run_into_closed_pipe("explain", f"{SAMPLE}:17-19", "--model", str(tiny_model_dir), "--max-tokens", "8")
    assert proc.returncode == 128 + signal.SIGPIPE and "Traceback" not in proc.stderr and "Error" not in proc.stderr


def test_a_full_disk_on_stdout_is_one_line_and_exit_1():
    with open("/dev/full", "w") as full:
        proc = run_cli("report", "compare", str(REPORT), str(REPORT), stdout=full)
    assert proc.returncode == 1
    assert "cannot write the output: No space left on device" in one_error_line(proc.stderr)


def test_a_closed_stdout_is_one_line_and_exit_1():
    proc = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *PY, "report", "compare", str(REPORT), str(REPORT)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 1 and "standard output is closed" in one_error_line(proc.stderr)


# -- start-up ------------------------------------------------------------------------------------------


def test_help_does_not_import_torch():
    code = (
        "import sys\nfrom lsp_server.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "complete" in proc.stdout and "serve" in proc.stdout  # every command is still listed


@pytest.mark.parametrize("delay_s", [0.3, 0.5, 0.65, 0.8, 1.0, 1.2, 1.6])
def test_ctrl_c_while_starting_is_exit_130_without_a_traceback(tiny_model_dir, delay_s):
    # Past the interpreter's start-up, at several points of the imports of torch and the model load: a Ctrl-C
    # inside some of them used to end the process by SIGINT (-2) after the message, not with 130, and once (CI)
    # in exit 2 with a RecursionError from a half-imported numpy.linalg, reported as a model that cannot load.
    child = subprocess.Popen(
        [*PY, "complete", f"{SAMPLE}:1:1", "--model", str(tiny_model_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    time.sleep(delay_s)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130 and "Traceback" not in err and err.strip() == "parafill: interrupted", err


def test_the_ctrl_c_handler_of_a_read_only_command_is_put_back_after_it(tmp_path, capsys):
    from lsp_server.cli import main

    before = signal.getsignal(signal.SIGINT)
    blob = tmp_path / "blob.py"
    blob.write_bytes(b"x = 1\n\x00\x01")
    assert main(["complete", f"{blob}:1:1"]) == 2  # refused: binary
    assert "binary" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before


def test_serve_on_a_taken_port_or_an_unknown_host_is_one_line_and_exit_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli("serve", "--tcp", f"127.0.0.1:{port}")
        assert proc.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}: " in one_error_line(proc.stderr)
    proc = run_cli("serve", "--tcp", "nosuch.invalid:4000")
    assert proc.returncode == 2 and "cannot listen on nosuch.invalid:4000" in one_error_line(proc.stderr)


# -- paths that would lose the results at the end ------------------------------------------------------


def test_eval_refuses_a_folder_as_json_before_loading_the_model(tmp_path):
    # The model folder does not exist either: naming --json proves the check comes first.
    proc = run_cli("eval", "--model", str(tmp_path / "no-model"), "--json", str(tmp_path))
    assert proc.returncode == 2 and "--json" in one_error_line(proc.stderr) and "is a folder" in proc.stderr


# -- bad input: one line, exit 2, the flag or the problem named -------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    paths = {
        "ok": folder / "ok.py",
        "nul": folder / "nul.py",
        "empty": folder / "empty.py",
        "bom": folder / "bom.py",
        "tasks": folder / "tasks.jsonl",
    }
    paths["ok"].write_text("x = 1\ny = 2\n")
    paths["nul"].write_bytes(b"x = 1\x00\n")
    paths["empty"].write_text("")
    paths["bom"].write_bytes(b"\xef\xbb\xbfx = 1\n")
    paths["tasks"].write_text("[1, 2]\n")
    (folder / "dir.py").mkdir()
    (folder / "no-source").mkdir()
    return {**paths, "dir": folder / "dir.py", "no-source": folder / "no-source", "root": folder}


CASES = {
    "report compare of a folder": (["report", "compare", "{dir}", str(REPORT)], "cannot read the report"),
    "report merge into a folder": (["report", "merge", str(REPORT), "--json", "{dir}"], "--json {dir} is a folder"),
    "bench --spans not numbers": (["bench", "--spans", "abc"], "--spans takes comma-separated whole numbers"),
    "bench --replot missing": (["bench", "--replot", "{root}/nope.json", "--plots", "{root}/p"], "no report at"),
    "bench --replot not JSON": (["bench", "--replot", "{ok}", "--plots", "{root}/p"], "is not a JSON report"),
    "bench --json a folder": (["bench", "--json", "{dir}"], "--json {dir} is a folder"),
    "eval --tasks missing": (["eval", "--tasks", "{root}/nope.jsonl"], "cannot read --tasks"),
    "eval --tasks not tasks": (["eval", "--tasks", "{tasks}"], "is not a JSONL file of tasks"),
    "eval --plot a folder": (["eval", "--plot", "{dir}"], "--plot {dir} is a folder"),
    "corpus --out a file": (["corpus", "--out", "{ok}", "--no-default-roots"], "--out {ok} is not a folder"),
    "corpus --max-mb negative": (["corpus", "--out", "{root}/c", "--max-mb", "-1"], "--max-mb -1: give a positive"),
    "complete --device unknown": (["complete", "{ok}:2:1", "--device", "tpu"], "--device 'tpu' is not a device"),
    "complete --model a file": (["complete", "{ok}:2:1", "--model", "{ok}"], "--model {ok} is not a folder"),
    "complete --max-tokens 0": (["complete", "{ok}:2:1", "--max-tokens", "0"], "--max-tokens 0: expected a value in"),
    "complete a binary file": (["complete", "{nul}:1:1"], "refusing {nul}: looks binary"),
    "complete an empty file": (["complete", "{empty}:1:1"], "{empty} holds no code to complete"),
    "complete past a BOM": (["complete", "{bom}:1:7"], "column 7 is outside line 1 (1..6)"),
    "explain a bad range": (["explain", "{ok}:1-"], "malformed line range in '{ok}:1-'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_naming_the_problem(case, files, capsys):
    args, expected = CASES[case]
    assert main([a.format(**files) for a in args]) == 2
    assert expected.format(**files) in one_error_line(capsys.readouterr().err)


def test_a_corpus_without_source_is_refused_and_so_is_training_on_it(files, tmp_path, capsys):
    corpus = tmp_path / "corpus"
    assert main(["corpus", "--out", str(corpus), "--no-default-roots", "--folder", str(files["no-source"])]) == 2
    assert "found no Python source" in capsys.readouterr().err
    assert main(["train", "--corpus", str(corpus), "--run", str(tmp_path / "run"), "--max-steps", "1"]) == 2
    assert "too small to train on: 0 train and 0 validation tokens" in one_error_line(capsys.readouterr().err)


def test_explain_of_more_code_than_fits_says_so(tiny_model_dir, tmp_path):
    big = tmp_path / "big.py"
    big.write_text("".join(f"value_{i} = {i}\n" for i in range(800)))  # past explain_max_chars (8000)
    proc = run_cli("explain", str(big), "--model", str(tiny_model_dir), "--max-tokens", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["truncated_input"]
    assert "parafill: note: the code is too long for one prompt: only its start was explained" in proc.stderr
