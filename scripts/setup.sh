#!/usr/bin/env bash
# Create .venv (once) and install parafill with what the given extras need. Idempotent and quiet.
# torch is pinned to 2.13.0: on this kind of machine pip takes the CPU build from local disk; an
# unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
stamp=".venv/.parafill-installed${extras:+-$extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q torch==2.13.0
  .venv/bin/pip install -q -e ".${extras:+[$extras]}"
  touch "$stamp"
fi
