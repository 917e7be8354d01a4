#!/usr/bin/env bash
# Run the whole test suite: lint, then pytest (CPU only; Triton kernels under TRITON_INTERPRET=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,onnx
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
# VS Code client: build, lint, package, protocol test and end-to-end test in code-server (a few minutes).
[ "${PARAFILL_SKIP_VSCODE:-0}" = 1 ] || bash scripts/test_vscode.sh
