#!/usr/bin/env bash
# Install the llama.cpp baseline into the project venv: gguf (the converter's writer), httpx (the remote
# backend's client) and llama-cpp-python with its OpenAI-compatible server, built from the PyPI sdist.
# The build takes ~7.5 min on 2 cores (more on a busy machine); pip caches the wheel, so a re-run is instant.
# Nothing is fetched outside the package registry. Kept out of CI: too slow for every run.
#
#   benchmarks/llamacpp/install.sh [VENV]        (default: .venv)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${1:-.venv}"
"$VENV/bin/pip" install "gguf>=0.17" "httpx>=0.27"
# -march=native is the default; set CMAKE_ARGS="-DGGML_NATIVE=OFF" for a wheel that runs on other CPUs.
nice -n 10 "$VENV/bin/pip" install "llama-cpp-python[server]>=0.3"
"$VENV/bin/python" -c "import llama_cpp; print('llama_cpp', llama_cpp.__version__)"
