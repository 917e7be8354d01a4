"""ONNX Runtime backend for the engine: the model's forward pass exported once to ONNX (cached next to
the checkpoint), run by ONNX Runtime on the CUDA execution provider when onnxruntime-gpu offers it, else
on the CPU one. Importing this package does not import onnxruntime; opening a runner does.

- export.py: the graph (a query block with past keys/values in, hidden states and the block's keys/values
  out) and its numerical self-check against the PyTorch model;
- cache.py: where exports live and when they are rebuilt (config, weights, code, torch version);
- session.py: execution-provider choice and session options;
- runner.py: `OnnxRunner`, the engine's `ForwardRunner` over an ONNX Runtime session.
"""

from decoder.onnx_backend.errors import BackendUnavailableError, OnnxBackendError
from decoder.onnx_backend.runner import OnnxRunner

__all__ = ["BackendUnavailableError", "OnnxBackendError", "OnnxRunner"]
