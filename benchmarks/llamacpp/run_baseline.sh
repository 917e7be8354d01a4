#!/usr/bin/env bash
# The full `parafill bench` with llama.cpp beside our decoders (installs llama-cpp-python first if needed).
# Writes benchmarks/results/bench_cpu.json and the PNGs in benchmarks/results/bench_cpu/.
#
#   benchmarks/llamacpp/run_baseline.sh [extra parafill bench arguments]
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${VENV:-.venv}"
if ! "$VENV/bin/python" -c "import llama_cpp, gguf, httpx" 2>/dev/null; then
    benchmarks/llamacpp/install.sh "$VENV"
fi
"$VENV/bin/python" benchmarks/llamacpp/convert.py --dtype f32 --out /tmp/parafill-default-f32.gguf
exec "$VENV/bin/python" -m lsp_server.cli bench \
    --json benchmarks/results/bench_cpu.json --plots benchmarks/results/bench_cpu "$@"
