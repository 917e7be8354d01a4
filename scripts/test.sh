#!/usr/bin/env bash
# Run the whole test suite: lint, then pytest (CPU only; Triton kernels under TRITON_INTERPRET=1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,onnx
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
# The VS Code client's tests (bash scripts/test_vscode.sh: a real VS Code in code-server) are not run here
# yet: 3 of 16 failed in a clean-clone CI run with the retrained default model; see issue 6.
