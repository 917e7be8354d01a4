"""The GPU recipe's whole path (corpus from this interpreter's stdlib, train, eval, pack) on CPU, tiny."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from decoder.checkpoint import load_model
from decoder.compute_dtype import resolve_compute_dtype
from decoder.tokenizer import TextTokenizer
from decoder.training.gpu_recipe import (
    MAX_WEIGHTS_MIB,
    flops_per_token,
    fp16_weights_mib,
    main,
    pack_model,
    peak_flops,
    training_minutes,
)
from decoder.training.sizes import model_config
from decoder.training.trainer import Trainer

REPO = Path(__file__).resolve().parents[2]


def test_gpu_script_runs_end_to_end_on_cpu(tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    cmd = [
        "bash",
        str(REPO / "scripts" / "gpu_train.sh"),
        "--tiny",
        "--tokenizer",
        str(tiny_corpus),
        "--work",
        str(tmp_path / "work"),
        "--max-steps",
        "4",
        "--max-corpus-mb",
        "0.3",
        "--certainty-weight",
        "0.5",
        "--distill-minutes",
        "1",
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    numbers = json.loads((out / "gpu_run.json").read_text())
    assert numbers["steps"] == 4 and numbers["tokens_seen"] == 4 * 8 * 64
    assert set(numbers["stages"]) == {"ar", "joint"}
    assert numbers["train_config"]["dtype"] == resolve_compute_dtype("auto", "cpu")  # what ran, not "auto"
    distill = numbers["distill"]  # asked for: 2 fine-tune steps on the tiny path, then the export
    assert distill["steps"] == 2 and distill["config"]["distill_set"] and distill["metrics"]["val_ar_bpb"] > 0
    assert distill["config"]["certainty_weight"] == 0.5
    assert numbers["metrics"]["val_ar_bpb"] > 0 and numbers["corpus"]["shards"]["train"]["tokens"] > 0
    parts = sorted(out.glob("model.tar.part*"))
    assert parts and all(p.stat().st_size <= 15 * 1024 * 1024 for p in parts)
    assert len(list(out.iterdir())) <= 8
    assert numbers["error"] is None and sorted(numbers["model_parts"]) == [p.name for p in parts]
    assert all(hashlib.sha256(p.read_bytes()).hexdigest() == numbers["model_parts"][p.name] for p in parts)
    blob = tmp_path / "model.tar"
    blob.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(blob) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    model_dir = tmp_path / "unpacked" / "model"
    assert load_model(model_dir).config.mask_token_id == 5
    shipped = json.loads((model_dir / "training.json").read_text())  # the distilled model, the run its lineage
    assert shipped["runs_total"] == 2 and shipped["stage_tokens"].keys() <= {"joint", "distill"}
    assert shipped["tokens_seen_total"] == numbers["tokens_seen"] + distill["tokens"]
    # Same tokenizer as the one it was given: the GPU model must share the shipped tokenizer.
    assert (model_dir / "tokenizer.json").read_text() == (tiny_corpus / "tokenizer.json").read_text()
    assert TextTokenizer.from_folder(model_dir).special.mask == 5


def test_flops_estimate_is_sane() -> None:
    cfg = model_config("20m", 8192)
    ar = flops_per_token(cfg, 512, "ar")
    assert 6 * 15e6 < ar < 6 * 30e6  # about 6 x (non-embedding params + LM head)
    assert 1.8 * ar < flops_per_token(cfg, 512, "joint") < 2.6 * ar
    assert peak_flops("NVIDIA H200") == 989e12 and peak_flops("CPU") is None


def test_the_training_budget_shrinks_to_pack_the_model_before_the_deadline() -> None:
    assert training_minutes(5.0, elapsed_s=60, deadline_s=None, reserve_s=120) == 5.0  # no deadline
    assert training_minutes(5.0, elapsed_s=60, deadline_s=540, reserve_s=120) == 5.0  # fits: 360 s left
    assert training_minutes(5.0, elapsed_s=180, deadline_s=540, reserve_s=120) == 4.0  # a slow corpus build
    assert training_minutes(5.0, elapsed_s=500, deadline_s=540, reserve_s=120) == 0.5  # still trains a little
    assert training_minutes(None, elapsed_s=500, deadline_s=540, reserve_s=120) is None  # step-bounded run


def test_past_the_deadline_distillation_is_skipped_and_the_model_still_packed(tiny_corpus: Path, tmp_path: Path):
    out = tmp_path / "out"
    argv = ["--out", str(out), "--tiny", "--tokenizer", str(tiny_corpus), "--work", str(tmp_path / "work")]
    assert (
        main([*argv, "--max-steps", "2", "--max-corpus-mb", "0.3", "--deadline-seconds", "1", "--distill-minutes", "1"])
        == 0
    )
    numbers = json.loads((out / "gpu_run.json").read_text())
    assert numbers["distill"] is None and numbers["steps"] == 2
    assert "distillation skipped" in (out / "recipe.log").read_text()
    assert sorted(out.glob("model.tar.part*"))


def test_sizes_whose_weights_cannot_come_back_are_refused_before_any_work(tiny_corpus: Path, tmp_path: Path):
    assert fp16_weights_mib("20m", 8192) < MAX_WEIGHTS_MIB < fp16_weights_mib("40m", 8192)
    out, work = tmp_path / "out", tmp_path / "work"
    assert main(["--out", str(out), "--size", "40m", "--tokenizer", str(tiny_corpus), "--work", str(work)]) == 2
    assert "could not come back" in (out / "recipe.log").read_text() and not any(work.iterdir())


def test_a_run_that_fails_mid_training_still_brings_back_a_model(
    tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Out of memory or a kernel fault cannot be caused on demand here: step 3 raises in their place.
    real_step = Trainer.train_step

    def failing_step(self: Trainer) -> dict[str, float]:
        if self.step == 3:
            raise RuntimeError("injected fault: CUDA out of memory")
        return real_step(self)

    monkeypatch.setattr(Trainer, "train_step", failing_step)
    out = tmp_path / "out"
    argv = ["--out", str(out), "--tiny", "--tokenizer", str(tiny_corpus), "--work", str(tmp_path / "work")]
    assert main([*argv, "--max-steps", "6", "--max-corpus-mb", "0.3"]) == 1
    numbers = json.loads((out / "gpu_run.json").read_text())
    assert "injected fault" in numbers["error"] and numbers["steps"] == 3
    blob = b"".join(p.read_bytes() for p in sorted(out.glob("model.tar.part*")))
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert json.loads((tmp_path / "unpacked" / "model" / "training.json").read_text())["steps"] == 3
    assert "exported the weights at step 3 after the failure" in (out / "recipe.log").read_text()


def test_packing_again_replaces_every_part_and_removes_leftovers(tmp_path: Path):
    folder, out = tmp_path / "model", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    (folder / "weights.bin").write_bytes(os.urandom(20 * 1024 * 1024))  # incompressible: two parts
    first = pack_model(folder, out)
    assert sorted(first) == ["model.tar.part0", "model.tar.part1"]
    (folder / "weights.bin").write_bytes(b"small")
    second = pack_model(folder, out)
    assert sorted(second) == ["model.tar.part0"] and sorted(p.name for p in out.iterdir()) == ["model.tar.part0"]
    assert hashlib.sha256((out / "model.tar.part0").read_bytes()).hexdigest() == second["model.tar.part0"]
