#!/usr/bin/env bash
# GPU run (issue 10): train the default model on one CUDA GPU, then benchmark the kernels there.
# Usage (repository root, on the device machine):  OUT=/path/to/out scripts/gpu_train.sh [recipe args]
# CPU smoke test of the same path:                   OUT=/tmp/x scripts/gpu_train.sh --tiny
# Everything that must come back lands in $OUT: gpu_run.json, recipe.log, train.log, model.tar.part*,
# bench_denoise.json. Restore the model folder with: cat "$OUT"/model.tar.part* | tar -x
# Time plan for one device call of CALL_S seconds (default 600, the most one call may run): corpus build, compile
# warm-up, up to 5 min training (--minutes), packing, then the kernel benchmark in what is left
# (--distill-minutes N adds a self-distillation fine-tune, off by default: it needs about 90 s on top of N
# minutes, which one call does not have). None of it measured on a GPU yet, so the recipe gets a deadline
# (CALL_S - 60 s from the call's start, Python's imports included): training shrinks as needed to pack the model
# in time. If training fails, the last export still comes back and the benchmark still runs; the script then
# exits with the recipe's status. Give the device call a timeout_s of at least CALL_S.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:?set OUT to the output folder}"
PY="${PYTHON:-python3}"
CALL_S="${CALL_S:-600}"
STARTED_AT="$(date +%s)"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
status=0
"$PY" -m decoder.training.gpu_recipe --out "$OUT" --started-at "$STARTED_AT" --deadline-seconds "$((CALL_S - 60))" \
    "$@" || status=$?
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
exit "$status"
