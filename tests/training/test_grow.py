"""Depth growth: the grown model computes what the trained one did, and training moves its added layers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from decoder.checkpoint import load_model
from decoder.config import ModelConfig
from decoder.model import CausalLM
from decoder.training.grow import added_parameter_names, grow_depth, new_layer_positions
from decoder.training.trainer import Trainer, init_weights
from tests.training.test_train import tiny_cfg


def random_model(**config: object) -> CausalLM:
    cfg = ModelConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        **config,
    )
    torch.manual_seed(0)
    model = CausalLM(cfg)
    init_weights(model)
    with torch.no_grad():  # biases too, so that zeroing them is what makes the added layers silent
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.1)
    return model.eval()


def test_added_layers_are_spread_and_the_top_always_grows() -> None:
    assert new_layer_positions(6, 12) == [1, 1, 1, 1, 1, 1]
    assert new_layer_positions(6, 9) == [0, 1, 0, 1, 0, 1]
    assert new_layer_positions(6, 7) == [0, 0, 0, 0, 0, 1]
    assert new_layer_positions(3, 9) == [2, 2, 2]
    assert new_layer_positions(4, 4) == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="fewer layers"):
        new_layer_positions(6, 5)


@pytest.mark.parametrize(
    "config",
    [
        dict(model_type="qwen2"),
        dict(model_type="llama", attention_bias=True, attention_out_bias=True, mlp_bias=True),
        dict(model_type="qwen3", qk_norm=True, attention_bias=False),
    ],
    ids=["qwen2", "llama-with-output-biases", "qwen3"],
)
def test_the_grown_model_computes_exactly_what_the_trained_one_did(config: dict) -> None:
    model = random_model(**config)
    before = {name: p.clone() for name, p in model.state_dict().items()}
    grown, added = grow_depth(model, 7)
    assert grown.config.num_hidden_layers == len(grown.model.layers) == 7 and added == [1, 3, 5, 6]
    assert model.config.num_hidden_layers == 3 and all(torch.equal(before[n], p) for n, p in model.state_dict().items())
    ids = torch.randint(0, 97, (2, 19))
    positions = torch.arange(19).expand(2, 19)
    with torch.no_grad():
        assert torch.equal(model.logits(model(ids, positions)), grown.logits(grown(ids, positions)))
    # The old layers keep their order: grown layer 2 is old layer 1, grown layer 4 old layer 2.
    assert torch.equal(grown.model.layers[2].mlp.up_proj.weight, model.model.layers[1].mlp.up_proj.weight)
    assert torch.equal(grown.model.layers[4].mlp.up_proj.weight, model.model.layers[2].mlp.up_proj.weight)
    # Tied embeddings stay tied in the copy.
    assert grown.lm_head.weight is grown.model.embed_tokens.weight
    assert added_parameter_names(grown, added) == {
        name for name, _ in grown.named_parameters() if name.split(".")[2] in {"1", "3", "5", "6"}
    }


def test_training_a_grown_model_moves_its_added_layers_at_their_own_rate(tiny_corpus: Path, tmp_path: Path) -> None:
    first = tmp_path / "first"
    Trainer(tiny_cfg(tiny_corpus, tmp_path / "a", max_steps=2, export_dir=str(first))).fit()
    grown_dir = tmp_path / "grown"
    cfg = tiny_cfg(
        tiny_corpus,
        tmp_path / "b",
        max_steps=4,
        lr=1e-3,
        init_from=str(first),
        grow_layers=4,
        export_dir=str(grown_dir),
    )
    trainer = Trainer(cfg)
    scales = sorted({g["lr_scale"] for g in trainer.opt.param_groups})
    assert scales == [1.0, cfg.grown_lr_scale]
    # Before the first step the grown model answers as the one it grew from.
    ids = torch.randint(8, 400, (1, 12))
    positions = torch.arange(12)[None]
    with torch.no_grad():
        assert torch.equal(
            trainer.model.logits(trainer.model(ids, positions)), (m := load_model(first)).logits(m(ids, positions))
        )
    trainer.fit()
    grown = load_model(grown_dir)
    assert grown.config.num_hidden_layers == 4
    for i in (1, 3):  # the added layers: their residual outputs have left zero
        assert grown.model.layers[i].self_attn.o_proj.weight.abs().sum() > 0
        assert grown.model.layers[i].mlp.down_proj.weight.abs().sum() > 0
    lrs = {g["lr_scale"]: g["lr"] for g in trainer.opt.param_groups}
    assert lrs[cfg.grown_lr_scale] == pytest.approx(lrs[1.0] * cfg.grown_lr_scale)
    assert "grown to 4 layers" in (grown_dir / "README.md").read_text()
    assert json.loads((grown_dir / "training.json").read_text())["train_config"]["grow_layers"] == 4


def test_growth_without_a_model_or_to_fewer_layers_is_one_clear_line(tiny_corpus: Path, tmp_path: Path) -> None:
    first = tmp_path / "first"
    Trainer(tiny_cfg(tiny_corpus, tmp_path / "a", max_steps=1, export_dir=str(first))).fit()
    base = [sys.executable, "-m", "lsp_server.cli", "train", "--corpus", str(tiny_corpus), "--size", "tiny"]
    base += ["--seq-len", "64", "--max-steps", "1", "--no-progress"]
    no_model = subprocess.run(
        [*base, "--run", str(tmp_path / "x"), "--grow-layers", "4"], capture_output=True, text=True
    )
    assert no_model.returncode == 2 and "give --init-from" in no_model.stderr
    fewer = subprocess.run(
        [*base, "--run", str(tmp_path / "y"), "--init-from", str(first), "--grow-layers", "1"],
        capture_output=True,
        text=True,
    )
    assert fewer.returncode == 2 and "has 2 layers; give at least that" in fewer.stderr
    assert len(fewer.stderr.strip().splitlines()) == 1
