#!/usr/bin/env bash
# Run the whole test suite: lint, pytest (CPU only; Triton kernels under TRITON_INTERPRET=1), then the
# VS Code client's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,onnx
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m pytest -q "$@"
# The VS Code client: build, lint and package the extension, then its protocol and end-to-end tests
# (a real VS Code in code-server + headless Chromium).
bash scripts/test_vscode.sh
