"""Copy an exported model folder into the repository's shipped default (models/default).

Only inference files travel: config.json, model.safetensors (fp16), tokenizer files, the model card and
training.json, plus heldout.json (the validation files it never saw: `parafill eval` material, and the GPU
recipe keeps them out of its own corpus). No optimizer state, no checkpoint.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from decoder.training.corpus import heldout_entries

SHIPPED = (
    *("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"),
    *("README.md", "training.json", "training_curve.png"),
)


def ship(export_dir: str | Path, dest: str | Path, corpus_dir: str | Path | None = None, max_mb: float = 30.0) -> Path:
    src, dest = Path(export_dir), Path(dest)
    size = (src / "model.safetensors").stat().st_size / 1e6
    if size > max_mb:
        raise ValueError(f"{src}/model.safetensors is {size:.1f} MB, over the {max_mb} MB limit for the repo")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in SHIPPED:
        if (src / name).is_file():
            shutil.copy2(src / name, tmp / name)
    if corpus_dir is not None:
        entries = [
            {k: e[k] for k in ("source", "path", "module", "sha256", "bytes")} for e in heldout_entries(corpus_dir)
        ]
        (tmp / "heldout.json").write_text(json.dumps({"split": "val", "files": entries}, indent=1) + "\n")
    elif (dest / "heldout.json").is_file():
        shutil.copy2(dest / "heldout.json", tmp / "heldout.json")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("export_dir")
    p.add_argument("--dest", default="models/default")
    p.add_argument("--corpus", default=None, help="corpus folder whose validation split goes into heldout.json")
    a = p.parse_args()
    print(ship(a.export_dir, a.dest, a.corpus))
