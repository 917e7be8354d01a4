#!/usr/bin/env bash
# GPU run (issue 10): train the default model on one CUDA GPU, then benchmark the kernels there.
# Usage (repository root, on the device machine):  OUT=/path/to/out scripts/gpu_train.sh [recipe args]
# CPU smoke test of the same path:                   OUT=/tmp/x scripts/gpu_train.sh --tiny
# Everything that must come back lands in $OUT: gpu_run.json, recipe.log, train.log, model.tar.part*,
# bench_denoise.json. Restore the model folder with: cat "$OUT"/model.tar.part* | tar -x
# Time plan for one 600 s device call: corpus build, 5 min training (--minutes), a 1 min self-distillation
# fine-tune (--distill-minutes; 0 skips it), compile warm-ups, the kernel benchmark. None of it measured on a
# GPU yet: give a smaller --minutes when the call's limit is tighter.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT to the output folder}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
"$PY" -m decoder.training.gpu_recipe --out "$OUT" "$@"
# Kernel benchmark (skipped in the CPU smoke test; failures must not lose the trained model).
if [[ " $* " != *" --tiny "* ]] && [[ -f benchmarks/bench_denoise.py ]]; then
    timeout 240 "$PY" benchmarks/bench_denoise.py --json "$OUT/bench_denoise.json" || echo "bench_denoise failed: $?"
fi
ls -la "$OUT"
