"""Depth growth: a deeper model that computes exactly what a trained one computes, so training can go on
with more capacity instead of starting again (block expansion, after LLaMA Pro).

Each new layer is a copy of the layer before it with its two residual outputs (attention o_proj, MLP
down_proj, and their biases where the architecture has them) set to zero: it adds nothing to the residual
stream until training moves those weights. The old layers keep their weights and their order.

Why: the shipped 6-layer model stopped improving on CPU (three runs in a row within noise), and a model
trained from scratch at a larger size would need more CPU hours than any one session has before it is as
good. A grown model starts as good and keeps what the CPU hours already bought.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import torch

from decoder.model import CausalLM, DecoderLayer


def new_layer_positions(old_layers: int, new_layers: int) -> list[int]:
    """For each old layer, how many new layers follow it: `new_layers - old_layers` spread evenly, the
    last old layer always followed by one (so the top of the stack grows too)."""
    if new_layers < old_layers:
        raise ValueError(f"cannot grow {old_layers} layers to {new_layers}: fewer layers is not growth")
    added = new_layers - old_layers
    after = [0] * old_layers
    for k in range(added):
        after[old_layers - 1 - (k * old_layers) // added] += 1
    return after


def zero_residual_outputs(layer: DecoderLayer) -> None:
    """Zero what the layer adds to the residual stream: it becomes the identity."""
    outputs = [layer.self_attn.o_proj, layer.mlp.down_proj]
    with torch.no_grad():
        for linear in outputs:
            linear.weight.zero_()
            if linear.bias is not None:
                linear.bias.zero_()


def grow_depth(model: CausalLM, num_layers: int) -> tuple[CausalLM, list[int]]:
    """A new model with `num_layers` decoder layers that gives the same outputs as `model` (which is left
    untouched), and the indices of the added layers in it. Each added layer copies the one before it, zeroed
    as in `zero_residual_outputs`: a copy rather than fresh weights so its norms and projections start at a
    trained scale."""
    after = new_layer_positions(len(model.model.layers), num_layers)
    grown = copy.deepcopy(model)
    layers: list[DecoderLayer] = []
    added: list[int] = []
    for layer, extra in zip(grown.model.layers, after, strict=True):
        layers.append(layer)
        for _ in range(extra):
            copied = copy.deepcopy(layer)
            zero_residual_outputs(copied)
            added.append(len(layers))
            layers.append(copied)
    grown.model.layers = torch.nn.ModuleList(layers)
    grown.config = replace(model.config, num_hidden_layers=num_layers)
    return grown, added


def added_parameter_names(model: CausalLM, added_layers: list[int]) -> set[str]:
    """The names of the parameters that belong to the added layers (for their own learning rate)."""
    prefixes = tuple(f"model.layers.{i}." for i in added_layers)
    return {name for name, _ in model.named_parameters() if name.startswith(prefixes)}
