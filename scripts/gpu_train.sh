#!/usr/bin/env bash
# GPU run (issue 10): train the default model on one CUDA GPU, then benchmark the kernels there.
# Usage (repository root, on the device machine):  OUT=/path/to/out scripts/gpu_train.sh [recipe args]
# CPU smoke test of the same path:                   OUT=/tmp/x scripts/gpu_train.sh --tiny
# Everything that must come back lands in $OUT: gpu_run.json, recipe.log, train.log, model.tar.part*,
# bench_denoise.json. Restore the model folder with: cat "$OUT"/model.tar.part* | tar -x
# Time plan for one device call of CALL_S seconds (default 600, the most one call may run): corpus build, up to
# 5 min training (--minutes), a 1 min self-distillation fine-tune (--distill-minutes; 0 skips it), compile
# warm-ups, then the kernel benchmark in what is left. None of it measured on a GPU yet, so the recipe gets a
# deadline (CALL_S - 60 s): training shrinks and distillation is skipped as needed to pack the model in time.
# Give the device call a timeout_s of at least CALL_S.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT to the output folder}"
PY="${PYTHON:-python3}"
CALL_S="${CALL_S:-600}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
"$PY" -m decoder.training.gpu_recipe --out "$OUT" --deadline-seconds "$((CALL_S - 60))" "$@"
# Kernel benchmark in the time left, at most 240 s (skipped in the CPU smoke test; failures must not lose the
# trained model, which is packed by now).
left=$((CALL_S - SECONDS - 10))
if [[ " $* " != *" --tiny "* ]] && [[ -f benchmarks/bench_denoise.py ]] && ((left > 30)); then
    timeout "$((left < 240 ? left : 240))" "$PY" benchmarks/bench_denoise.py --json "$OUT/bench_denoise.json" \
        || echo "bench_denoise failed: $?"
else
    echo "bench_denoise skipped (${left}s left)"
fi
ls -la "$OUT"
