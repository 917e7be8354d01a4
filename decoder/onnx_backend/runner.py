"""`OnnxRunner`: the engine's forward pass on an ONNX Runtime session, without copies.

Each layer's KV buffer is token-major storage [1, capacity, kv_heads, head_dim]; the engine and the prefix
cache see it through a [1, kv_heads, capacity, head_dim] view, exactly like the torch runner's buffers.
Because the past is a contiguous prefix of the storage, a pass binds it as the graph's input in place and
binds the graph's new keys/values straight into the storage after it (I/O binding): nothing is copied on
the way in or out. The LM head stays in PyTorch (the engine's `logits`), so both backends share it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from decoder.model import CausalLM, LayerKV
from decoder.onnx_backend import cache
from decoder.onnx_backend.errors import OnnxBackendError
from decoder.onnx_backend.session import CUDA_EP, open_session, preferred_provider

log = logging.getLogger("parafill.onnx")

_ELEMENT_TYPES = {torch.float32: np.float32, torch.int64: np.int64, torch.bool: np.bool_}


class OnnxRunner:
    def __init__(self, session, model: CausalLM, description: str, export_record: dict) -> None:
        self.session = session
        self.config = model.config
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.description = description
        self.export_record = export_record

    @classmethod
    def open(cls, model: CausalLM, folder: str | Path | None, threads: int = 1) -> OnnxRunner:
        """Export (or reuse the cached export of) `model`, checked from the checkpoint `folder`, and open
        a session on the preferred execution provider."""
        param = next(model.parameters())
        device = str(param.device)
        choice = preferred_provider(device)  # first: it raises when onnxruntime is missing
        if param.dtype != torch.float32:
            raise OnnxBackendError(f"the onnx backend runs fp32 weights, not {str(param.dtype).removeprefix('torch.')}")
        target = "cuda" if choice.provider == CUDA_EP else "cpu"
        path, record = cache.cached_export(model, Path(folder) if folder is not None else None, target)
        session, choice = open_session(path, threads, device, choice)
        how = "reused" if record.get("reused") else f"exported in {record.get('export_seconds', '?')} s"
        description = f"onnxruntime {choice.provider}, {threads} thread(s): {choice.reason}; graph {path} ({how})"
        log.info("backend onnx: %s", description)
        return cls(session, model, description, record)

    def new_kv(self, capacity: int) -> list[LayerKV]:
        cfg = self.config
        shape = (1, capacity, cfg.num_key_value_heads, cfg.head_dim)

        def heads_first_view() -> Tensor:
            return torch.empty(shape, dtype=self.dtype, device=self.device).transpose(1, 2)

        return [LayerKV(heads_first_view(), heads_first_view()) for _ in range(cfg.num_hidden_layers)]

    def forward(
        self, kv: list[LayerKV], input_ids: Tensor, positions: Tensor, mask: Tensor | None, past: int
    ) -> Tensor:
        query = input_ids.shape[1]
        if mask is None:
            if past:
                raise ValueError("a pass over cached keys needs an explicit attention mask")
            block_mask = torch.ones(query, query, dtype=torch.bool, device=input_ids.device).tril()
        else:
            if past and not bool(mask[:, :past].all()):
                raise ValueError("the onnx graph lets every query see all past tokens; this mask does not")
            block_mask = mask[:, past:].contiguous()
        binding = self.session.io_binding()
        self._bind(binding.bind_input, "input_ids", input_ids.contiguous())
        self._bind(binding.bind_input, "positions", positions.contiguous())
        self._bind(binding.bind_input, "block_mask", block_mask)
        hidden = torch.empty(1, query, self.config.hidden_size, dtype=self.dtype, device=self.device)
        self._bind(binding.bind_output, "hidden", hidden)
        for i, layer in enumerate(kv):
            for kind, buffer in (("key", layer.keys), ("value", layer.values)):
                storage = buffer.transpose(1, 2)  # back to token-major: [1, capacity, kv_heads, head_dim]
                if not storage.is_contiguous():
                    raise ValueError("KV buffers must come from OnnxRunner.new_kv")
                self._bind(binding.bind_input, f"past_{kind}_{i}", storage[:, :past])
                self._bind(binding.bind_output, f"new_{kind}_{i}", storage[:, past : past + query])
        if self.device.type == "cuda":  # ORT runs on its own stream: let torch's writes (ids, cached KV) land
            torch.cuda.current_stream(self.device).synchronize()
        self.session.run_with_iobinding(binding)
        return hidden

    @staticmethod
    def _bind(bind, name: str, tensor: Tensor) -> None:
        bind(
            name,
            "cuda" if tensor.is_cuda else "cpu",
            tensor.device.index or 0,
            _ELEMENT_TYPES[tensor.dtype],
            tuple(tensor.shape),
            tensor.data_ptr(),
        )
