#!/usr/bin/env bash
# Serve the default model through llama.cpp's OpenAI-compatible server on 127.0.0.1 (for the remote backend).
#
# One thread (and one batch thread): on a busy 2-core machine more threads made it 10-100x slower.
#   benchmarks/llamacpp/serve.sh [PORT]      then, in the editor's settings:
#   "parafill.remoteUrl": "http://127.0.0.1:PORT/v1", "parafill.remoteExplainApi": "completions",
#   "parafill.remoteFimTemplate": "<|fim_suffix|>{suffix}<|fim_prefix|>{prefix}<|fim_middle|>"
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${VENV:-.venv}"
PORT="${1:-8181}"
"$VENV/bin/python" benchmarks/llamacpp/convert.py --dtype f16 --out /tmp/parafill-default-f16.gguf --no-parity >/dev/null
exec "$VENV/bin/python" -m llama_cpp.server --model /tmp/parafill-default-f16.gguf \
    --host 127.0.0.1 --port "$PORT" --n_threads 1 --n_threads_batch 1 --n_ctx 4096 --model_alias parafill-default
