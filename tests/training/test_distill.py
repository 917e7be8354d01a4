"""Self-distillation rows: real prompts cut where completions happen, then the model's own greedy tokens;
the trainer mixes them into the joint stage and scores next-token loss only on the real prompt."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from decoder.checkpoint import load_model
from decoder.model import CausalLM
from decoder.training import objective as O
from decoder.training.distill import (
    NEVER_GENERATED,
    DistillRows,
    DistillSetConfig,
    build_distill_set,
    greedy_continue,
)
from decoder.training.examples import EOT, FIM_MIDDLE
from decoder.training.sizes import model_config
from decoder.training.trainer import MASK_ID, Trainer, init_weights
from lsp_server.cli import main as parafill
from tests.training.test_train import tiny_cfg


def random_model(vocab: int = 400, seed: int = 0) -> CausalLM:
    torch.manual_seed(seed)
    model = CausalLM(model_config("tiny", vocab, max_positions=256))
    init_weights(model)
    return model.eval()


def greedy_without_cache(model: CausalLM, prompts: torch.Tensor, n_new: int) -> torch.Tensor:
    x = prompts
    bias = torch.zeros(model.config.vocab_size)
    bias[NEVER_GENERATED] = float("-inf")
    with torch.no_grad():
        for _ in range(n_new):
            pos = torch.arange(x.shape[1]).expand(x.shape[0], -1)
            nxt = (model.logits(model(x, pos)[:, -1]) + bias).argmax(-1, keepdim=True)
            x = torch.cat((x, nxt), dim=1)
    return x[:, prompts.shape[1] :]


def test_greedy_continue_matches_greedy_decoding_without_a_cache() -> None:
    model = random_model()
    prompts = torch.randint(8, 400, (3, 20))
    cached = greedy_continue(model, prompts, 12, NEVER_GENERATED)
    assert torch.equal(cached, greedy_without_cache(model, prompts, 12))
    assert not set(cached.flatten().tolist()) & set(NEVER_GENERATED)


@pytest.fixture(scope="module")
def tiny_export(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("distill")
    Trainer(tiny_cfg(tiny_corpus, tmp / "run", max_steps=2, export_dir=str(tmp / "export"))).fit()
    return tmp / "export"


def test_distill_set_is_real_prompts_then_the_models_greedy_tokens(
    tiny_corpus: Path, tiny_export: Path, tmp_path: Path
):
    cfg = DistillSetConfig(
        model=str(tiny_export), corpus=str(tiny_corpus), out=str(tmp_path / "set"), rows=10, prompt_len=48, gen_len=16
    )
    cfg.batch_size, cfg.fim_rate, cfg.dtype = 4, 1.0, "fp32"
    out = build_distill_set(cfg, log=lambda _m: None)
    rows = np.load(out / "rows.npy")
    assert rows.shape == (10, 64)
    meta = json.loads((out / "distill.json").read_text())
    assert meta["prompt_len"] == 48 and meta["seq_len"] == 64
    prompts = torch.from_numpy(rows[:, :48].astype(np.int64))
    model = load_model(tiny_export, dtype=torch.float32).eval()
    assert torch.equal(torch.from_numpy(rows[:, 48:].astype(np.int64)), greedy_without_cache(model, prompts, 16))
    # FIM prompts end inside the middle: after <|fim_middle|> comes no end-of-text (the cursor is before it).
    fim = [r for r in rows[:, :48] if FIM_MIDDLE in r]
    assert fim, "with fim_rate 1 the tiny corpus's documents give FIM prompts"
    for r in fim:
        after = r[int(np.flatnonzero(r == FIM_MIDDLE)[-1]) + 1 :]
        assert EOT not in after


def test_distill_rows_refuse_misaligned_blocks_and_score_ar_on_the_prompt(tiny_corpus, tiny_export, tmp_path):
    cfg = DistillSetConfig(model=str(tiny_export), corpus=str(tiny_corpus), out=str(tmp_path / "s"), rows=4)
    cfg.prompt_len, cfg.gen_len, cfg.batch_size = 40, 24, 4
    build_distill_set(cfg, log=lambda _m: None)
    with pytest.raises(ValueError, match="not a multiple of block sizes"):
        DistillRows(tmp_path / "s", 64, (4, 16))
    with pytest.raises(ValueError, match="training rows 128"):
        DistillRows(tmp_path / "s", 128, (4, 8))
    x, ar_scored = DistillRows(tmp_path / "s", 64, (4, 8)).batch(3, np.random.default_rng(0))
    assert x.shape == (3, 64) and ar_scored.shape == (3, 63)
    assert ar_scored[:, :39].all() and not ar_scored[:, 39:].any()


def test_next_token_loss_counts_only_the_scored_outputs() -> None:
    model = random_model()
    x0 = torch.randint(8, 400, (2, 32))
    x1 = x0.clone()
    x1[:, 20:] = torch.randint(8, 400, (2, 12))  # differs only after the scored part
    scored = torch.zeros(2, 31, dtype=torch.bool)
    scored[:, :19] = True  # outputs 0..18 predict tokens 1..19

    def ar(x: torch.Tensor, ar_scored: torch.Tensor | None) -> float:
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            return float(O.block_diffusion_loss(model, x, 8, MASK_ID, g, ar_scored=ar_scored).ar)

    assert ar(x0, scored) == pytest.approx(ar(x1, scored), abs=1e-6)
    assert ar(x0, None) != pytest.approx(ar(x1, None), abs=1e-3)
    assert ar(x0, torch.ones(2, 31, dtype=torch.bool)) == pytest.approx(ar(x0, None), abs=1e-6)


def test_certainty_entropy_sharpens_only_the_right_predictions() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.5, 0.2]], requires_grad=True)
    targets = torch.tensor([0, 2, 0])  # rows 0 and 2 are right, row 1 is a wrong guess
    h = O.certainty_entropy(logits, targets, temperature=0.5)
    by_hand = [float(-(p * p.log()).sum()) for p in (logits.detach()[[0, 2]] / 0.5).softmax(-1)]
    assert float(h.detach()) == pytest.approx(sum(by_hand) / 2, rel=1e-6)
    h.backward()
    assert logits.grad is not None and not logits.grad[1].any()  # a wrong guess is not made surer
    sharper = (logits - 0.1 * logits.grad).detach()
    assert (sharper.softmax(-1).max(-1).values[[0, 2]] > logits.softmax(-1).max(-1).values[[0, 2]]).all()
    assert float(O.certainty_entropy(logits.detach(), torch.tensor([1, 0, 1]))) == 0.0  # none right: no term


def test_block_loss_adds_the_weighted_certainty_term() -> None:
    model = random_model()
    with torch.no_grad():
        model.model.norm.weight.zero_()  # every output's logits are 0: argmax is token 0, entropy is ln(vocab)
    x0 = torch.zeros(2, 32, dtype=torch.long)  # so every masked prediction is right

    def loss(weight: float) -> O.LossOut:
        noise = torch.Generator().manual_seed(0)
        with torch.no_grad():
            return O.block_diffusion_loss(model, x0, 8, MASK_ID, noise, certainty_weight=weight)

    plain, forced = loss(0.0), loss(2.0)
    assert plain.certainty is None and forced.certainty is not None
    assert float(forced.certainty) == pytest.approx(math.log(400), rel=1e-5)
    assert float(forced.loss) == pytest.approx(float(plain.loss) + 2.0 * math.log(400), rel=1e-5)


def test_trainer_mixes_distill_batches_into_the_joint_stage(tiny_corpus, tiny_export, tmp_path):
    cfg = DistillSetConfig(model=str(tiny_export), corpus=str(tiny_corpus), out=str(tmp_path / "set"), rows=32)
    cfg.prompt_len, cfg.gen_len, cfg.batch_size = 32, 32, 16
    build_distill_set(cfg, log=lambda _m: None)
    trainer = Trainer(
        tiny_cfg(
            tiny_corpus,
            tmp_path / "run",
            max_steps=50,
            ar_fraction=0.0,
            distill_set=str(tmp_path / "set"),
            certainty_weight=0.5,
        )
    )
    outs = [trainer.train_step() for _ in range(40)]
    kinds = [o["kind"] for o in outs]
    assert 8 <= kinds.count("distill") <= 32 and set(kinds) == {"joint", "distill"}
    distill = [o["masked"] for o in outs if o["kind"] == "distill"]
    assert sum(distill[:4]) / 4 > sum(distill[-4:]) / 4  # the masked stream learns the greedy continuations
    # certainty forcing on distill batches only (real text's targets are not the model's own choices)
    assert all((o["kind"] == "distill") != math.isnan(o["certainty"]) for o in outs)
    trainer.fit()  # 10 more steps: the loop books distill steps as their own stage
    assert trainer.stage_stats["distill"]["steps"] >= 1
    trainer.export(tmp_path / "export")
    card = (tmp_path / "export" / "README.md").read_text()
    assert "self-distillation (this run)" in card and str(tmp_path / "set") in card
    assert "certainty forcing on those batches: weight 0.5" in card


def test_cli_refuses_missing_model_and_missing_distill_set(tiny_corpus: Path, tmp_path: Path, capsys) -> None:
    code = parafill(["distill-set", "--model", str(tmp_path / "nope"), "--corpus", str(tiny_corpus), "--out", "x"])
    assert code == 2 and "no config.json" in capsys.readouterr().err
    args = ["train", "--corpus", str(tiny_corpus), "--run", str(tmp_path / "r"), "--max-steps", "1"]
    assert parafill([*args, "--distill-set", str(tmp_path / "none")]) == 2
    assert "no distill.json" in capsys.readouterr().err
