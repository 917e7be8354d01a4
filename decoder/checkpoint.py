"""Load and save model weights in Hugging Face layout, through safetensors only (never pickle)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from decoder.config import ModelConfig, ModelConfigError
from decoder.model import CausalLM


class CheckpointError(RuntimeError):
    """A model folder that cannot be turned into a working model (missing, corrupt or mismatched)."""


def weight_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"cannot read {index}: {exc}") from exc
        if not isinstance(weight_map, dict) or not all(isinstance(n, str) for n in weight_map.values()):
            raise CheckpointError(f"cannot read {index}: weight_map must map tensor names to file names")
        names = sorted(set(weight_map.values()))
        files = [folder / n for n in names]
    else:
        files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors weights in {folder} (pickled .bin weights are not loaded)")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CheckpointError(f"weight shards listed in the index are missing: {', '.join(missing)}")
    return files


def read_config(folder: Path) -> ModelConfig:
    """config.json of a model folder; a missing folder or a bad config is a CheckpointError (one error type
    for callers that open checkpoints)."""
    if not folder.is_dir():
        raise CheckpointError(f"model folder {folder} does not exist")
    try:
        return ModelConfig.from_folder(folder)
    except ModelConfigError as exc:
        raise CheckpointError(str(exc)) from exc


def load_model(folder: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> CausalLM:
    folder = Path(folder)
    cfg = read_config(folder)
    state: dict[str, torch.Tensor] = {}
    for path in weight_files(folder):
        try:
            state.update(load_file(str(path), device="cpu"))
        except (SafetensorError, OSError, ValueError) as exc:
            raise CheckpointError(f"corrupt weights file {path}: {exc}") from exc
    # Buffers some exporters write (RoPE tables): recomputed from config.json, never read.
    for name in [n for n in state if n.endswith("rotary_emb.inv_freq")]:
        del state[name]
    with torch.device("meta"):
        model = CausalLM(cfg)
    expected = dict(model.state_dict())
    if cfg.tie_word_embeddings:
        state.pop("lm_head.weight", None)
        expected.pop("lm_head.weight", None)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"weights in {folder} do not match config.json: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise CheckpointError(
                f"{name}: shape {tuple(tensor.shape)} in file, {tuple(expected[name].shape)} expected"
            )
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False, assign=True)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.to(device).eval()


def save_model(model: CausalLM, folder: str | Path, dtype: torch.dtype = torch.float16) -> None:
    """Write config.json and model.safetensors (weights only: no optimizer state)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    cfg = model.config.to_hf_dict()
    cfg["dtype"] = str(dtype).removeprefix("torch.")
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
