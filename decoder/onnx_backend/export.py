"""The engine's forward pass as an ONNX graph, exported with `torch.onnx.export(..., dynamo=True)`.

One graph serves the causal prefill (no past, a causal block mask), the AR step (one token) and the
block step (a noisy block, optionally behind tokens being committed), with dynamic batch, query and past
lengths:

    inputs   input_ids, positions   int64 [batch, query]
             block_mask             bool  [query, query]  who may attend to whom within this pass
             past_key_i, past_value_i       [batch, past, kv_heads, head_dim]  one per layer
    outputs  hidden                         [batch, query, hidden]  final hidden states (before the LM head)
             new_key_i, new_value_i         [batch, query, kv_heads, head_dim]  this pass's keys and values

Every query sees all past tokens (committed tokens are visible to everyone, see decoder/masks.py), so the
graph builds the full mask itself from `block_mask`. Keys and values are token-major ([past, kv_heads,
head_dim] per sequence) so that a sequence's past is one contiguous prefix of its buffer and the runner
can hand it to ONNX Runtime without a copy.

The graph runs the model's own `CausalLM.forward`: no attention math is repeated here. Its KV buffers
are stood in for by `_AppendOnlyKV`, which turns the model's "write this pass at [past, past + T), read
[:past + T]" into a concatenation. Should the model ever touch its buffers differently, the export falls
back to real buffers (a concatenation with zeros and a scatter: correct, a little slower). Either way the
exported graph is checked against the PyTorch model before it is used.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from decoder.model import CausalLM, LayerKV
from decoder.onnx_backend.errors import INSTALL_HINT, BackendUnavailableError, OnnxBackendError

# Bump when the graph's inputs, outputs or meaning change: cached exports are then rebuilt.
GRAPH_VERSION = "1"
# ONNX opset per execution provider. Opset 23 has RMSNormalization and Attention, which the exporter
# emits for our norm and SDPA: ~330 nodes instead of ~560 for 6 layers, 10-20% faster on ORT's CPU
# provider, same outputs to 1e-6. The CUDA provider keeps the exporter's default opset (plain MatMul /
# Softmax / ReduceMean), which every onnxruntime-gpu version runs on the GPU.
OPSETS: dict[str, int | None] = {"cpu": 23, "cuda": None}
GRAPH_FILE = "forward.onnx"
# Example shapes for the export: batch >= 2 (a batch of 1 would be fixed in the graph) and query/past
# lengths that differ from each other and from the batch, so no dimension is taken for another.
EXAMPLE_BATCH, EXAMPLE_QUERY, EXAMPLE_PAST = 2, 5, 7
SELF_CHECK_TOLERANCE = 1e-3  # relative to the largest output magnitude; fp32 agrees to ~1e-6

log = logging.getLogger("parafill.onnx")


def input_names(n_layers: int) -> list[str]:
    keys = [f"past_key_{i}" for i in range(n_layers)]
    values = [f"past_value_{i}" for i in range(n_layers)]
    return ["input_ids", "positions", "block_mask", *keys, *values]


def output_names(n_layers: int) -> list[str]:
    keys = [f"new_key_{i}" for i in range(n_layers)]
    values = [f"new_value_{i}" for i in range(n_layers)]
    return ["hidden", *keys, *values]


class _AppendOnlyKV:
    """Stands in for one layer's key (or value) buffer: the model writes this pass's entries after the
    past ones and reads everything back, which is a concatenation; no buffer, no scatter."""

    def __init__(self, past: Tensor) -> None:
        self.past = past  # [batch, kv_heads, past, head_dim]
        self.new: Tensor | None = None

    def __setitem__(self, index: object, value: Tensor) -> None:
        if self.new is not None:
            raise TypeError("the model wrote its KV buffer twice in one pass")
        self.new = value

    def __getitem__(self, index: object) -> Tensor:
        if self.new is None:
            raise TypeError("the model read its KV buffer before writing this pass's entries")
        return torch.cat((self.past, self.new), dim=2)


class ForwardGraph(nn.Module):
    """What gets exported: the model's forward over a query block, past keys/values in, new ones out."""

    def __init__(self, model: CausalLM, append_only: bool = True) -> None:
        super().__init__()
        self.model = model
        self.append_only = append_only

    def forward(
        self,
        input_ids: Tensor,
        positions: Tensor,
        block_mask: Tensor,
        past_keys: list[Tensor],
        past_values: list[Tensor],
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        query = input_ids.shape[1]
        past = past_keys[0].shape[1]
        mask = torch.cat((block_mask.new_ones(query, past), block_mask), dim=1)
        heads_first = [(k.transpose(1, 2), v.transpose(1, 2)) for k, v in zip(past_keys, past_values, strict=True)]
        if self.append_only:
            kv = [LayerKV(_AppendOnlyKV(k), _AppendOnlyKV(v)) for k, v in heads_first]  # type: ignore[arg-type]
        else:
            kv = [LayerKV(self._buffer(k, query), self._buffer(v, query)) for k, v in heads_first]
        hidden = self.model(input_ids, positions, attn_mask=mask, kv=kv, kv_start=past)
        new_keys = [self._new_entries(layer.keys, past) for layer in kv]
        new_values = [self._new_entries(layer.values, past) for layer in kv]
        return hidden, new_keys, new_values

    @staticmethod
    def _buffer(past: Tensor, query: int) -> Tensor:
        batch, heads, _, dim = past.shape
        return torch.cat((past, past.new_zeros(batch, heads, query, dim)), dim=2)

    @staticmethod
    def _new_entries(buffer: Tensor | _AppendOnlyKV, past: int) -> Tensor:
        new = buffer.new if isinstance(buffer, _AppendOnlyKV) else buffer[:, :, past:]
        if new is None:
            raise TypeError("the model did not write its KV buffer")
        return new.transpose(1, 2)  # back to token-major


def example_inputs(model: CausalLM, batch: int, query: int, past: int, causal: bool, seed: int = 0) -> tuple:
    cfg = model.config
    param = next(model.parameters())
    gen = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, cfg.vocab_size, (batch, query), generator=gen)
    positions = torch.arange(past, past + query).expand(batch, query).contiguous()
    block_mask = torch.ones(query, query, dtype=torch.bool)
    if causal:
        block_mask = block_mask.tril()
    else:  # two tokens being committed, then a noisy block
        block_mask[:2, 2:] = False
        block_mask[:2, :2] = block_mask[:2, :2].tril()
    shape = (batch, past, cfg.num_key_value_heads, cfg.head_dim)

    def kv() -> list[Tensor]:
        return [torch.randn(shape, generator=gen).to(param.dtype) for _ in range(cfg.num_hidden_layers)]

    to = param.device
    return input_ids.to(to), positions.to(to), block_mask.to(to), [t.to(to) for t in kv()], [t.to(to) for t in kv()]


def _require_exporter() -> None:
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as exc:
        raise BackendUnavailableError(
            f"exporting the model to ONNX needs onnx and onnxscript ({exc}): {INSTALL_HINT}"
        ) from exc


@contextlib.contextmanager
def _quiet_export():
    """torch.onnx prints progress to stdout (which is the LSP stream or a JSON answer) and warns loudly."""
    names = ("torch", "torch.onnx", "torch.export", "torch._dynamo", "torch.__trace", "onnx_ir", "onnxscript")
    noisy = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in noisy]
    try:
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for logger in noisy:
                logger.setLevel(logging.ERROR)
            yield
    finally:
        for logger, level in zip(noisy, levels, strict=True):
            logger.setLevel(level)


def export_forward(model: CausalLM, path: Path, target: str = "cpu") -> dict:
    """Export `model`'s forward for the `target` provider ("cpu" or "cuda") to `path` (an .onnx file;
    large weights go beside it) and check it against the model. Returns what to record about it."""
    _require_exporter()
    from torch.export import Dim

    n_layers = model.config.num_hidden_layers
    batch, query, past = Dim("batch"), Dim("query"), Dim("past")
    token_major = {0: batch, 1: past}
    dynamic_shapes = {
        "input_ids": {0: batch, 1: query},
        "positions": {0: batch, 1: query},
        "block_mask": {0: query, 1: query},
        "past_keys": [token_major] * n_layers,
        "past_values": [token_major] * n_layers,
    }
    args = example_inputs(model, EXAMPLE_BATCH, EXAMPLE_QUERY, EXAMPLE_PAST, causal=False)
    failures = []
    for append_only in (True, False):
        started = time.perf_counter()
        try:
            with _quiet_export(), torch.no_grad():
                program = torch.onnx.export(
                    ForwardGraph(model, append_only).eval(),
                    args,
                    dynamo=True,
                    dynamic_shapes=dynamic_shapes,
                    input_names=input_names(n_layers),
                    output_names=output_names(n_layers),
                    opset_version=OPSETS[target],
                    verbose=False,
                )
                program.save(str(path))
            error = self_check(model, path)
        except Exception as exc:  # the exporter raises many kinds; the next variant may still work
            failures.append(f"{'append-only KV' if append_only else 'KV buffers'}: {type(exc).__name__}: {exc}")
            log.warning("ONNX export variant failed, %s", failures[-1][:500])
            continue
        return {
            "target": target,
            "opset": OPSETS[target],
            "kv": "append-only" if append_only else "buffers",
            "export_seconds": round(time.perf_counter() - started, 2),
            "self_check_max_rel_error": error,
        }
    raise OnnxBackendError("cannot export the model to ONNX: " + "; ".join(f[:300] for f in failures))


def self_check(model: CausalLM, path: Path) -> float:
    """Run the exported graph on CPU against the PyTorch model (a block step behind past tokens, a causal
    prefill); raise if they disagree. Returns the largest relative error."""
    from decoder.onnx_backend.session import cpu_session

    session = cpu_session(path, threads=1)
    worst = 0.0
    for batch, query, past, causal in ((1, 4, 9, False), (1, 6, 0, True)):
        ids, positions, block_mask, keys, values = example_inputs(model, batch, query, past, causal, seed=1)
        feed = {"input_ids": ids, "positions": positions, "block_mask": block_mask}
        feed.update({f"past_key_{i}": k for i, k in enumerate(keys)})
        feed.update({f"past_value_{i}": v for i, v in enumerate(values)})
        got = session.run(None, {name: t.detach().cpu().numpy() for name, t in feed.items()})
        with torch.no_grad():
            want_hidden, want_keys, want_values = ForwardGraph(model, append_only=False)(
                ids, positions, block_mask, keys, values
            )
        for name, want, have in zip(output_names(len(keys)), [want_hidden, *want_keys, *want_values], got, strict=True):
            want = want.float().cpu()
            scale = max(1.0, float(want.abs().max()))
            error = float((torch.from_numpy(have).float() - want).abs().max()) / scale
            if not error <= SELF_CHECK_TOLERANCE:
                raise OnnxBackendError(f"exported graph disagrees with the model on {name}: relative error {error:.2e}")
            worst = max(worst, error)
    return worst
