#!/usr/bin/env bash
# The main job on the shipped default model: complete a position in a sample file with block diffusion,
# printing the span, the forward passes and the time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/parafill generate --prompt-file examples/sample_prompt.py --mode block --max-new-tokens 32 "$@"
