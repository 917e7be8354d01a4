"""A tiny model trains on the tiny corpus, resumes exactly, and exports a folder that reloads bit-identically."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from decoder.checkpoint import load_model, save_model
from decoder.tokenizer import TextTokenizer
from decoder.training.config import TrainConfig
from decoder.training.lr_schedule import lr_at
from decoder.training.trainer import Trainer


def tiny_cfg(corpus: Path, run: Path, **kw) -> TrainConfig:
    base = dict(
        corpus=str(corpus),
        run_dir=str(run),
        size="tiny",
        seq_len=64,
        batch_size=8,
        lr=5e-3,
        warmup_steps=5,
        eval_windows=4,
        eval_batch=4,
        threads=1,
        progress=False,
        eval_every_minutes=1e9,
        checkpoint_every_minutes=1e9,
        export_every_minutes=1e9,
    )
    base.update(kw)
    return TrainConfig(**base)


def test_tiny_model_loss_falls_in_both_stages(tiny_corpus: Path, tmp_path: Path) -> None:
    trainer = Trainer(tiny_cfg(tiny_corpus, tmp_path / "run", max_steps=60, ar_fraction=0.5))
    ar, masked = [], []
    while not trainer.done():
        out = trainer.train_step()
        (ar if out["block"] == 0 else masked).append(out)
    assert sum(o["ar"] for o in ar[:5]) / 5 > sum(o["ar"] for o in ar[-5:]) / 5 + 1.0
    assert all(o["block"] in (4, 8, 16, 32) for o in masked)
    assert sum(o["masked"] for o in masked[:5]) > sum(o["masked"] for o in masked[-5:])
    metrics = trainer.evaluate()
    assert 0 < metrics["val_ar_bpb"] < 8 and 0 < metrics["val_masked_bpb"] < 8


def test_resume_restores_weights_optimizer_and_data_order(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    a = Trainer(tiny_cfg(tiny_corpus, run, max_steps=6))
    a.fit()
    b = Trainer(tiny_cfg(tiny_corpus, run, max_steps=6, resume=True))
    assert b.step == 6 and b.tokens == a.tokens
    assert b.stage_stats == a.stage_stats and sum(st["tokens"] for st in b.stage_stats.values()) == b.tokens
    for (name, pa), pb in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
        assert torch.equal(pa, pb), name
    sa, sb = a.opt.state_dict()["state"], b.opt.state_dict()["state"]
    assert all(torch.equal(sa[k]["exp_avg_sq"], sb[k]["exp_avg_sq"]) for k in sa)
    assert torch.equal(a.batcher.batch(4), b.batcher.batch(4))  # same data from here on
    assert torch.equal(a.gen.get_state(), b.gen.get_state())  # and the same masking noise
    assert "step 6" in (run / "train.log").read_text()


def test_resume_without_a_checkpoint_is_an_error_not_a_fresh_start(tiny_corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no checkpoint to resume from"):
        Trainer(tiny_cfg(tiny_corpus, tmp_path / "typo", max_steps=2, resume=True))
    run = tmp_path / "run"
    Trainer(tiny_cfg(tiny_corpus, run, max_steps=2)).fit()
    (run / "checkpoint").rename(run / "checkpoint.old")  # a save stopped between its two renames
    assert Trainer(tiny_cfg(tiny_corpus, run, max_steps=2, resume=True)).step == 2


def test_saved_model_reloads_bit_identically(tiny_corpus: Path, tmp_path: Path) -> None:
    trainer = Trainer(tiny_cfg(tiny_corpus, tmp_path / "run", max_steps=2))
    trainer.fit()
    model = trainer.model.float().eval()
    x = torch.randint(8, model.config.vocab_size, (2, 16))
    pos = torch.arange(16).expand(2, 16)
    for dtype in (torch.float32, torch.float16):
        save_model(model, tmp_path / str(dtype), dtype=dtype)
        loaded = load_model(tmp_path / str(dtype), dtype=torch.float32)
        for name, tensor in model.state_dict().items():
            assert torch.equal(loaded.state_dict()[name], tensor.to(dtype).float()), name
        if dtype == torch.float32:
            with torch.no_grad():
                assert torch.equal(loaded.logits(loaded(x, pos)), model.logits(model(x, pos)))


def test_export_is_a_complete_model_folder(tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    trainer = Trainer(tiny_cfg(tiny_corpus, tmp_path / "run", max_steps=3, export_dir=str(out)))
    trainer.fit()
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["mask_token_id"] == 5 and cfg["dtype"] == "float16"
    tok = TextTokenizer.from_folder(out)
    assert tok.special.mask == 5 and tok.special.has_fim and tok.special.explain_text == 7
    card = (out / "README.md").read_text()
    assert "tokens seen" in card and "Corpus" in card
    assert "warmup steps, then cosine" in card  # the default schedule, named as the run used it
    assert json.loads((out / "training.json").read_text())["tokens_seen"] == trainer.tokens
    assert load_model(out).config.tie_word_embeddings


def test_init_from_a_shipped_folder_continues_from_its_weights(tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    Trainer(tiny_cfg(tiny_corpus, tmp_path / "a", max_steps=2, export_dir=str(out))).fit()
    shipped = load_model(out)
    b = Trainer(tiny_cfg(tiny_corpus, tmp_path / "b", max_steps=1, init_from=str(out)))
    for name, tensor in shipped.state_dict().items():
        assert torch.equal(b.model.state_dict()[name], tensor), name
    b.fit()
    assert b.step == 1


def test_a_continued_run_reports_the_totals_of_its_lineage(tiny_corpus: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    a = Trainer(tiny_cfg(tiny_corpus, tmp_path / "a", max_steps=2, export_dir=str(first)))
    a.fit()
    b = Trainer(tiny_cfg(tiny_corpus, tmp_path / "b", max_steps=3, init_from=str(first), export_dir=str(second)))
    b.fit()
    training = json.loads((second / "training.json").read_text())
    assert training["tokens_seen"] == b.tokens  # this run
    assert training["tokens_seen_total"] == a.tokens + b.tokens and training["runs_total"] == 2
    assert training["init"]["folder"] == str(first)
    card = (second / "README.md").read_text()
    assert f"tokens seen: {a.tokens + b.tokens:,} in all, over 2 runs" in card
    # The evaluation points of both runs, tokens counted from the first, drawn as the training curve.
    points = training["history_total"]
    assert [p["run"] for p in points] == [1] * len(a.history) + [2] * len(b.history)
    assert [p["tokens"] for p in points] == [p["tokens"] for p in a.history] + [
        a.tokens + p["tokens"] for p in b.history
    ]
    assert points[-1]["tokens"] == a.tokens + b.tokens
    assert (second / "training_curve.png").read_bytes().startswith(b"\x89PNG") and "training_curve.png" in card
    # A third run counts all three.
    c = Trainer(tiny_cfg(tiny_corpus, tmp_path / "c", max_steps=1, init_from=str(second), export_dir=str(first)))
    c.fit()
    third = json.loads((first / "training.json").read_text())
    assert third["tokens_seen_total"] == a.tokens + b.tokens + c.tokens and third["runs_total"] == 3
    assert [p["run"] for p in third["history_total"]] == [p["run"] for p in points] + [3] * len(c.history)


def test_wsd_holds_the_peak_rate_then_decays_to_the_floor() -> None:
    cfg = TrainConfig(corpus="", run_dir="", lr=1e-3, warmup_steps=10, schedule="wsd", decay_fraction=0.25)
    assert lr_at(cfg, 0, 0.0) == pytest.approx(1e-4)  # warmup as before
    assert [lr_at(cfg, 50, p) for p in (0.1, 0.5, 0.75)] == [1e-3] * 3
    assert lr_at(cfg, 50, 0.875) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))  # halfway down the cosine
    assert lr_at(cfg, 50, 1.0) == pytest.approx(1e-4)
    cosine = replace(cfg, schedule="cosine")
    assert lr_at(cosine, 50, 0.5) == pytest.approx(1e-3 * 0.55)  # the default schedule is unchanged


def test_wsd_keeps_the_state_where_its_decay_begins_and_continues_from_it(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    export = tmp_path / "export"
    wsd = tiny_cfg(tiny_corpus, run, max_steps=8, ar_fraction=0, schedule="wsd", decay_fraction=0.5)
    first = Trainer(replace(wsd, export_dir=str(export)))
    first.fit()
    assert "stable, cosine decay over the last 50% of the run" in (export / "README.md").read_text()
    stable = json.loads((run / "checkpoint-stable" / "state.json").read_text())
    assert stable["step"] == 4 and first.step == 8  # kept at 4 of 8 steps, before the decay
    assert "decay begins at step 4" in (run / "train.log").read_text()
    # A longer run from the stable state: it starts at step 4, at the peak rate, and keeps its later decay point.
    longer = tiny_cfg(tiny_corpus, run, max_steps=16, ar_fraction=0, schedule="wsd", decay_fraction=0.5)
    second = Trainer(replace(longer, resume=True, resume_stable=True))
    assert second.step == 4 and second.tokens == stable["tokens"] and not second.stable_saved
    assert second.train_step()["lr"] == pytest.approx(longer.lr)
    second.fit()
    assert json.loads((run / "checkpoint-stable" / "state.json").read_text())["step"] == 8
    # A plain resume past the decay point has no stable state to keep.
    assert Trainer(replace(longer, max_steps=9, resume=True)).stable_saved


def test_resume_stable_needs_the_stable_checkpoint_of_a_wsd_run(tiny_corpus: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    Trainer(tiny_cfg(tiny_corpus, run, max_steps=2)).fit()  # cosine: no stable state
    with pytest.raises(FileNotFoundError, match="no checkpoint-stable to resume from"):
        Trainer(tiny_cfg(tiny_corpus, run, max_steps=4, resume=True, resume_stable=True))
    with pytest.raises(ValueError, match="schedule 'linear'"):
        Trainer(tiny_cfg(tiny_corpus, run, max_steps=4, schedule="linear"))


def test_a_mix_corpus_is_recorded_in_the_export_and_its_card(tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    cfg = tiny_cfg(tiny_corpus, tmp_path / "run", max_steps=2, export_dir=str(out), mix_corpus=str(tiny_corpus))
    Trainer(replace(cfg, mix_rate=0.25)).fit()
    training = json.loads((out / "training.json").read_text())
    assert training["mix_corpus"]["rate"] == 0.25
    assert training["mix_corpus"]["corpus_shards"]["train"]["tokens"] > 0
    assert "mixed in: 25% of the document rows" in (out / "README.md").read_text()


def test_a_mix_corpus_with_another_tokenizer_or_no_rate_is_refused(tiny_corpus: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    meta = json.loads((tiny_corpus / "shards.json").read_text())
    (other / "shards.json").write_text(json.dumps(meta | {"tokenizer_sha256": "0000"}))
    with pytest.raises(ValueError, match="same --tokenizer"):
        Trainer(tiny_cfg(tiny_corpus, tmp_path / "a", max_steps=1, mix_corpus=str(other), mix_rate=0.3))
    with pytest.raises(ValueError, match="--mix-rate must be"):
        Trainer(tiny_cfg(tiny_corpus, tmp_path / "b", max_steps=1, mix_corpus=str(tiny_corpus)))
    with pytest.raises(ValueError, match="needs --mix-corpus"):
        Trainer(tiny_cfg(tiny_corpus, tmp_path / "c", max_steps=1, mix_rate=0.3))


def test_eval_only_prints_the_validation_scores_of_a_model_folder(
    tiny_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lsp_server.cli import main

    out = tmp_path / "export"
    Trainer(tiny_cfg(tiny_corpus, tmp_path / "a", max_steps=3, export_dir=str(out))).fit()
    direct = Trainer(tiny_cfg(tiny_corpus, tmp_path / "b", max_steps=1, init_from=str(out))).evaluate()
    argv = ["train", "--corpus", str(tiny_corpus), "--init-from", str(out), "--eval-only"]
    assert main([*argv, "--seq-len", "64", "--eval-windows", "4", "--threads", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["windows"] == 4 and printed["model"] == str(out)
    for key in ("val_ar_bpb", "val_masked_bpb"):
        assert printed[key] == pytest.approx(direct[key], abs=1e-4)
    # without --init-from there is nothing to score; without --eval-only a run needs its folder
    assert main(["train", "--corpus", str(tiny_corpus), "--eval-only"]) == 2
    assert "--eval-only scores a model folder: give --init-from" in capsys.readouterr().err
    assert main(["train", "--corpus", str(tiny_corpus), "--max-steps", "1"]) == 2
    assert "give --run" in capsys.readouterr().err
