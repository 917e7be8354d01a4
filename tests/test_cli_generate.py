"""`parafill generate` as a real subprocess: JSON fields, and one clear line + exit 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

PY = [sys.executable, "-m", "lsp_server.cli"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PY, *args], capture_output=True, text=True, timeout=120)


def test_generate_json_reports_the_commit_trace(tiny_model_dir):
    proc = run_cli(
        "generate",
        "--model",
        str(tiny_model_dir),
        "--prompt",
        "def add(a, b):",
        "--mode",
        "block",
        "--max-new-tokens",
        "16",
        "--block-size",
        "8",
        "--threshold",
        "0.5",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in (
        "text",
        "token_ids",
        "forward_passes",
        "commit_steps",
        "latency_ms",
        "prompt_tokens",
        "cached_prompt_tokens",
    ):
        assert key in out
    assert len(out["commit_steps"]) == len(out["token_ids"]) <= 16
    assert all(1 <= s <= out["forward_passes"] for s in out["commit_steps"])
    assert out["cached_prompt_tokens"] == 0 and out["prompt_tokens"] > 0


def test_generate_plain_text_and_no_cache(tiny_model_dir, tmp_path):
    prompt = tmp_path / "p.py"
    prompt.write_text("class Stack:\n    def pop(self):\n")
    proc = run_cli(
        "generate",
        "--model",
        str(tiny_model_dir),
        "--prompt-file",
        str(prompt),
        "--mode",
        "ar",
        "--max-new-tokens",
        "4",
        "--no-cache",
    )
    assert proc.returncode == 0, proc.stderr
    assert "[ar] " in proc.stderr


def test_bad_arguments_and_bad_model_folder_exit_2_with_one_line(tiny_model_dir, tmp_path):
    cases = [
        ("generate", "--model", str(tmp_path / "missing"), "--prompt", "x"),
        ("generate", "--model", str(tiny_model_dir), "--prompt", "x", "--mode", "sideways"),
        ("generate", "--model", str(tiny_model_dir), "--prompt", "x", "--max-new-tokens", "0"),
        ("generate", "--model", str(tiny_model_dir), "--prompt-file", str(tmp_path / "nope.py")),
        ("generate", "--model", str(tiny_model_dir)),
    ]
    for args in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("parafill: error:"), (args, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_a_prompt_past_the_model_context_is_refused_not_decoded(tiny_model_dir, tmp_path):
    # The tiny model's context is 512 positions; positions past it were never trained.
    prompt = tmp_path / "long.py"
    prompt.write_text("value = compute(value)\n" * 200)
    proc = run_cli("generate", "--model", str(tiny_model_dir), "--prompt-file", str(prompt), "--max-new-tokens", "4")
    assert proc.returncode == 2, proc.stderr
    assert "past the model's context of 512 tokens" in proc.stderr and "Traceback" not in proc.stderr
    # The same prompt cut to fit decodes.
    prompt.write_text("value = compute(value)\n" * 4)
    proc = run_cli("generate", "--model", str(tiny_model_dir), "--prompt-file", str(prompt), "--max-new-tokens", "4")
    assert proc.returncode == 0, proc.stderr


def test_train_and_corpus_refuse_bad_folders_with_one_line(tmp_path):
    cases = [
        ("train", "--corpus", str(tmp_path / "none"), "--run", str(tmp_path / "run"), "--max-steps", "1"),
        ("train", "--corpus", str(tmp_path), "--run", str(tmp_path / "run")),
        ("corpus", "--out", str(tmp_path / "c"), "--no-default-roots", "--folder", str(tmp_path / "missing")),
    ]
    for args in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("parafill: error:") and "Traceback" not in proc.stderr
