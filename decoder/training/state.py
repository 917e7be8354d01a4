"""Resumable training checkpoints without pickle: tensors in safetensors, everything else in JSON.

A checkpoint folder holds model.safetensors (fp32 master weights), optimizer.safetensors (AdamW moments),
state.json (step, tokens, elapsed time, optimizer param groups, train config, RNG states). It is written
to a temporary folder and renamed, so an interrupted write never leaves a half checkpoint behind.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from decoder.model import CausalLM


def _optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, st in sd["state"].items():
        for key, val in st.items():
            if torch.is_tensor(val):
                tensors[f"{idx}.{key}"] = val.detach().to("cpu").contiguous()
            else:
                scalars.setdefault(str(idx), {})[key] = val
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def save_checkpoint(
    folder: str | Path,
    model: CausalLM,
    opt: torch.optim.Optimizer,
    meta: dict[str, Any],
    np_rng: np.random.Generator,
    noise: torch.Generator | None = None,
) -> None:
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(tmp / "model.safetensors"))
    opt_tensors, opt_json = _optimizer_tensors(opt)
    rng = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["torch_cuda"] = torch.cuda.get_rng_state()
    if noise is not None:  # the objective's masking noise: a resumed run draws what the run would have
        rng["noise"] = noise.get_state()
    save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
    save_file(rng, str(tmp / "rng.safetensors"))
    body = {
        **meta,
        "optimizer": opt_json,
        "numpy_rng": np_rng.bit_generator.state,
        "model_config": model.config.to_hf_dict(),
    }
    (tmp / "state.json").write_text(json.dumps(body, indent=1) + "\n")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(
    folder: str | Path,
    model: CausalLM,
    opt: torch.optim.Optimizer | None,
    np_rng: np.random.Generator | None,
    noise: torch.Generator | None = None,
) -> dict[str, Any]:
    """Restore weights (and optimizer, RNG) in place; returns state.json's content (with "noise_restored":
    whether `noise` got its saved state; checkpoints from before it was saved have none)."""
    folder = Path(folder)
    body = json.loads((folder / "state.json").read_text())
    weights = load_file(str(folder / "model.safetensors"))
    model.load_state_dict(weights, strict=not model.config.tie_word_embeddings)
    if opt is not None:
        tensors = load_file(str(folder / "optimizer.safetensors"))
        state: dict[int, dict[str, Any]] = {}
        for key, val in tensors.items():
            idx, name = key.split(".", 1)
            state.setdefault(int(idx), {})[name] = val
        for idx, extra in body["optimizer"]["scalars"].items():
            state.setdefault(int(idx), {}).update(extra)
        opt.load_state_dict({"state": state, "param_groups": body["optimizer"]["param_groups"]})
    rng = load_file(str(folder / "rng.safetensors"))
    torch.set_rng_state(rng["torch_cpu"])
    if "torch_cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["torch_cuda"])
    if np_rng is not None:
        np_rng.bit_generator.state = body["numpy_rng"]
    body["noise_restored"] = noise is not None and "noise" in rng
    if body["noise_restored"]:
        noise.set_state(rng["noise"])
    return body
