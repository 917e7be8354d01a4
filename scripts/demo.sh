#!/usr/bin/env bash
# The main job on the shipped default model: an inline completion at a position in a sample file, as the
# language server would answer it (block diffusion). Prints the completion, then the route, tokens,
# forward passes and time. Any `parafill complete` option can follow, e.g. --json or --threshold 0.7.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/parafill complete examples/sample.py:14:9 "$@"
