"""`parafill complete` and `parafill explain`: the server's code path from the command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from lsp_server.cli import main
from tests.lsp.session import REPO, SAMPLE

PY = [sys.executable, "-m", "lsp_server.cli"]
LINE = SAMPLE.read_text().splitlines().index("        return self.price * self.quantity") + 1


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PY, *args], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_complete_json_reports_the_route_and_the_cost(tiny_model_dir):
    proc = run_cli("complete", f"{SAMPLE}:{LINE}:42", "--model", str(tiny_model_dir), "--max-tokens", "16", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("text", "route", "forward_passes", "latency_ms", "cached_prompt_tokens", "tokens", "stop_reason"):
        assert key in out
    assert out["route"] == "block" and out["text"] and 1 <= out["forward_passes"] <= 17
    assert len(out["commit_steps"]) == out["tokens"] and out["line"] == LINE and out["column"] == 42
    assert 0 < out["confidence"] < 1
    assert out["decoder"] == "block B=8 t=0.9 lookup 8"  # no measured threshold: the family's
    args = ("complete", f"{SAMPLE}:{LINE}:42", "--model", str(tiny_model_dir), "--max-tokens", "16", "--json")
    gated = json.loads(run_cli(*args, "--min-confidence", str(out["confidence"] + 1e-3)).stdout)
    assert gated["text"] == "" and gated["stop_reason"] == "low_confidence" and gated["tokens"] == out["tokens"]
    kept = json.loads(run_cli(*args, "--min-confidence", str(out["confidence"] - 1e-3)).stdout)
    assert kept["text"] == out["text"]


def test_complete_decodes_at_the_models_measured_threshold_unless_told(tiny_model_dir, tmp_path):
    model = tmp_path / "measured"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | {"block_threshold": 0.35}))
    args = ("complete", f"{SAMPLE}:{LINE}:42", "--model", str(model), "--max-tokens", "16")
    proc = run_cli(*args)
    assert proc.returncode == 0 and "[block B=8 t=0.35 lookup 8] " in proc.stderr, proc.stderr
    told = json.loads(run_cli(*args, "--threshold", "0.6", "--json").stdout)
    assert told["decoder"] == "block B=8 t=0.6 lookup 8"


def test_explain_json_and_a_missing_model(tiny_model_dir, tmp_path):
    proc = run_cli("explain", f"{SAMPLE}:17-19", "--model", str(tiny_model_dir), "--max-tokens", "12", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["route"] == "ar" and out["text"] and out["tokens"] <= 12 and out["lines"] == [17, 19]
    proc = run_cli("complete", f"{SAMPLE}:{LINE}:1", "--model", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "does not exist" in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["complete", "no-colons"],
        ["complete", "missing.py:1:1"],
        ["complete", f"{SAMPLE}:0:1"],
        ["complete", f"{SAMPLE}:{LINE}:99"],
        ["complete", f"{SAMPLE}:{LINE}:1", "--threshold", "3"],
        ["explain", f"{SAMPLE}:30-10"],
        ["explain", "missing.py"],
        ["eval", "--kinds", "line,nope"],
        ["eval", "--thresholds", "0.9,1.5"],
        ["eval", "--thresholds", "high"],
        ["eval", "--lookup", "-1"],
        ["eval", "--limit", "0"],
        ["eval", "--jobs", "0"],
    ],
)
def test_bad_file_position_or_argument_is_one_line_and_exit_2(args, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("parafill: error:") and "\n" not in err


def test_binary_file_is_refused(tmp_path, capsys):
    blob = tmp_path / "blob.py"
    blob.write_bytes(b"x = 1\n\x00\x01")
    assert main(["complete", f"{blob}:1:1"]) == 2
    assert "binary" in capsys.readouterr().err


def test_the_default_dtype_follows_the_cpu(tiny_model_dir):
    import torch

    from decoder.compute_dtype import cpu_has_native_bf16
    from lsp_server.model_loading import open_engine

    auto = torch.bfloat16 if cpu_has_native_bf16() else torch.float32
    assert open_engine(tiny_model_dir).dtype == auto
    assert open_engine(tiny_model_dir, dtype="fp32").dtype == torch.float32  # a choice is kept
    assert open_engine(tiny_model_dir, dtype="bf16").dtype == torch.bfloat16
