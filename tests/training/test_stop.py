"""A training run told to stop (SIGTERM, as when a session ends) saves a checkpoint and resumes from it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _train(corpus: Path, run: Path, *extra: str) -> list[str]:
    return [
        *(sys.executable, "-m", "decoder.training.cli", "train", "--corpus", str(corpus), "--run", str(run)),
        *("--size", "tiny", "--seq-len", "64", "--batch-size", "8", "--eval-windows", "4", "--threads", "1"),
        *("--checkpoint-every-minutes", "1000", "--eval-every-minutes", "1000", "--no-progress", *extra),
    ]


def test_sigterm_saves_a_checkpoint_that_resume_continues(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = subprocess.Popen(
        _train(tiny_corpus, run, "--max-steps", "1000000"), cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        log = run / "train.log"
        deadline = time.monotonic() + 120
        while not (log.is_file() and "step 50 " in log.read_text()):  # steps are running
            assert proc.poll() is None and time.monotonic() < deadline, "training did not get going"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0
    state = json.loads((run / "checkpoint" / "state.json").read_text())
    assert state["step"] >= 50 and "stopped by SIGTERM" in (run / "train.log").read_text()
    assert json.loads(out[out.rindex("\n{\n") + 1 :])["stopped"] == "SIGTERM"  # the result, printed last

    resumed = subprocess.run(
        _train(tiny_corpus, run, "--resume", "--max-steps", str(state["step"] + 3)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from {run / 'checkpoint'} at step {state['step']}" in (run / "train.log").read_text()
    assert json.loads((run / "checkpoint" / "state.json").read_text())["step"] == state["step"] + 3
