"""Convert a parafill / Qwen2 model folder to GGUF and check it against our engine with llama.cpp.

    .venv/bin/python benchmarks/llamacpp/convert.py [--model DIR] [--dtype f32|f16] [--out FILE] [--no-parity]

Parity (tokenization, last-position logits, 32 greedy tokens vs our AR decoder) needs llama-cpp-python
(benchmarks/llamacpp/install.sh); the conversion needs only the `gguf` package.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from decoder.bench import llamacpp  # noqa: E402
from decoder.bench.gguf_export import export_gguf  # noqa: E402
from decoder.defaults import default_model_dir  # noqa: E402
from decoder.engine import EngineOptions  # noqa: E402
from decoder.engines import open_family_engine  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: models/default)")
    parser.add_argument("--dtype", choices=("f32", "f16"), default="f32")
    parser.add_argument("--out", type=Path, default=None, help="GGUF file (default: /tmp/parafill-<name>-<dtype>.gguf)")
    parser.add_argument("--no-parity", action="store_true")
    args = parser.parse_args()
    folder = args.model or default_model_dir()
    out = args.out or Path(f"/tmp/parafill-{folder.resolve().name}-{args.dtype}.gguf")
    info = export_gguf(folder, out, args.dtype)
    print(json.dumps(info, indent=1))
    if not args.no_parity:
        if not llamacpp.available():
            print("no llama-cpp-python: no parity check (benchmarks/llamacpp/install.sh)", file=sys.stderr)
            return 0
        engine = open_family_engine(folder, EngineOptions(threads=1))
        result = llamacpp.parity(engine, out)
        print(json.dumps(result, indent=1))
        print(llamacpp.format_parity(result), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
