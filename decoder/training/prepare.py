"""Build a training corpus folder: manifest, tokenizer (trained or given) and token shards.

Output folder layout:
  manifest.json      every file that went in (source, path, module, sha256, bytes, split) + summary
  val_files.jsonl    the held-out files' texts (named evaluation set)
  tokenizer.json, tokenizer_config.json
  train.bin, val.bin, explain_train.bin, explain_val.bin   uint16 token streams
  shards.json        token/byte/doc counts per shard and the tokenizer's hash
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

from tokenizers import Tokenizer

from decoder.training import corpus as C
from decoder.training.tokenizer_train import END_OF_TEXT, SPECIAL_IDS, save_tokenizer, train_tokenizer


def tokenizer_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def build_corpus(
    out_dir: str | Path,
    *,
    roots: list[tuple[str, Path]] | None = None,
    wheel_dirs: list[Path] = (),  # type: ignore[assignment]
    folders: list[Path] = (),  # type: ignore[assignment]
    tokenizer_path: str | Path | None = None,
    vocab_size: int = 8192,
    tokenizer_sample_bytes: int = 40_000_000,
    holdout: frozenset[str] = frozenset(),
    heldout_modules: frozenset[str] = frozenset(),
    max_bytes: int | None = None,
    sample_bytes: int | None = None,
    heldout_sha: frozenset[str] = frozenset(),
    explain_max_files: int | None = None,
    log=print,
) -> dict:
    """Collect, dedupe, split, (train tokenizer), tokenize. Returns shards.json's content."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    roots = C.default_roots() if roots is None else roots
    installed = C.installed_projects(roots) if wheel_dirs else frozenset()  # only wheels need it
    wheels = C.select_wheels(wheel_dirs, installed)
    if wheels.found:
        log(
            f"wheels: {wheels.found} found, {len(wheels.used)} read ({wheels.older_versions_skipped} older versions "
            f"and {wheels.installed_skipped} of installed projects skipped)"
        )
    files = C.collect(roots, wheels.used, folders)
    if max_bytes is not None:
        files = _take_bytes(files, max_bytes)
    corpus = C.deduplicate_and_split(files, holdout, heldout_sha, heldout_modules)
    summary = C.write_manifest(corpus, out, wheels)
    log(
        f"corpus: {summary['files']} files, {summary['duplicates_skipped']} duplicates and "
        f"{summary['near_copies_of_val_skipped']} near-copies of validation files skipped, "
        f"splits {json.dumps({k: v['files'] for k, v in summary['splits'].items()})} ({time.time() - t0:.0f}s)"
    )
    train = corpus.split("train")
    val = corpus.split("val")
    if sample_bytes is not None and sum(len(f.text) for f in train) > sample_bytes:
        train = _sample_train(train, sample_bytes)
        summary = C.write_manifest(corpus, out, wheels)
        log(f"sampled {len(train)} train files ({sum(len(f.text) for f in train) / 1e6:.0f} MB) of the corpus")
    if not val and len(train) > 1:
        train, val = _hold_out_one_module(train)
        summary = C.write_manifest(corpus, out, wheels)
        log(f"no module hashed into validation: holding out {val[0].module}")
    # Shard order: by content hash, a deterministic shuffle, so any prefix of the stream mixes sources.
    train.sort(key=lambda f: f.sha256)
    tok_file = out / "tokenizer.json"
    tok = _tokenizer_for(train, tokenizer_path, vocab_size, tokenizer_sample_bytes, log)
    save_tokenizer(tok, out)
    eot = tok.token_to_id(END_OF_TEXT)
    if eot != SPECIAL_IDS[END_OF_TEXT]:
        raise ValueError(f"tokenizer's {END_OF_TEXT} has id {eot}, expected {SPECIAL_IDS[END_OF_TEXT]}")
    t2 = time.time()
    shards = {
        "train": C.write_shard(tok, [f.text for f in train], out / "train.bin", eot),
        "val": C.write_shard(tok, [f.text for f in val], out / "val.bin", eot),
    }
    log(
        f"tokenized: train {shards['train']['tokens']:,} tokens, val {shards['val']['tokens']:,} "
        f"({time.time() - t2:.0f}s)"
    )
    for name, split_files in (("explain_train", train[:explain_max_files]), ("explain_val", val)):
        examples = C.explain_examples([f.text for f in split_files])
        # Explain examples carry their own special tokens, so encode them with special-token parsing.
        shards[name] = _write_examples(tok, examples, out / f"{name}.bin")
    log(f"explain pairs: train {shards['explain_train']['docs']}, val {shards['explain_val']['docs']}")
    meta = {
        "shards": shards,
        "vocab_size": tok.get_vocab_size(),
        "tokenizer_sha256": tokenizer_digest(tok_file),
        "summary": summary,
        "build_seconds": round(time.time() - t0, 1),
    }
    (out / "shards.json").write_text(json.dumps(meta, indent=2) + "\n")
    # Said last, and only once shards.json (what `parafill train` checks for) is written.
    log(f"corpus ready in {out} ({meta['build_seconds']:.0f}s): parafill train --corpus {out}")
    return meta


def _sample_train(train: list[C.SourceFile], sample_bytes: int) -> list[C.SourceFile]:
    """A uniform sample (by content hash) of about `sample_bytes`, rather than the first files found: a walk in
    alphabetical order would otherwise keep `a*` packages and drop torch or transformers. The rest is marked
    unused (the manifest says so)."""
    train = sorted(train, key=lambda f: f.sha256)
    kept, seen = [], 0
    for f in train:
        if seen >= sample_bytes:
            f.split = "unused"
            continue
        seen += len(f.text)
        kept.append(f)
    return kept


def _hold_out_one_module(train: list[C.SourceFile]) -> tuple[list[C.SourceFile], list[C.SourceFile]]:
    """A small corpus may hash no module into validation: hold out one whole module rather than none."""
    module = min(f.module for f in train)
    val = [f for f in train if f.module == module]
    for f in val:
        f.split = "val"
    return [f for f in train if f.module != module], val


def _tokenizer_for(
    train: list[C.SourceFile], tokenizer_path: str | Path | None, vocab_size: int, sample_bytes: int, log
) -> Tokenizer:
    """The given tokenizer (a tokenizer.json or its folder), or one trained on a sample of the train split."""
    if tokenizer_path is not None:
        src = Path(tokenizer_path)
        return Tokenizer.from_file(str((src if src.is_dir() else src.parent) / "tokenizer.json"))
    t1 = time.time()
    tok = train_tokenizer(_sample(train, sample_bytes), vocab_size=vocab_size)
    log(f"tokenizer: vocab {tok.get_vocab_size()} trained in {time.time() - t1:.0f}s")
    return tok


def _write_examples(tok: Tokenizer, examples: list[str], path: Path) -> dict:
    import numpy as np

    n_tokens = n_bytes = 0
    with path.open("wb") as fh:
        for i in range(0, len(examples), 256):
            chunk = examples[i : i + 256]
            for enc, text in zip(tok.encode_batch(chunk, add_special_tokens=True), chunk, strict=True):
                fh.write(np.asarray(enc.ids, dtype=np.uint16).tobytes())
                n_tokens += len(enc.ids)
                n_bytes += len(text.encode("utf-8"))
    return {"file": path.name, "tokens": n_tokens, "bytes": n_bytes, "docs": len(examples)}


def _sample(files: list[C.SourceFile], max_bytes: int):
    seen = 0
    for f in files:  # already in hash order: an unbiased sample of the train split
        if seen >= max_bytes:
            return
        seen += len(f.text)
        yield f.text


def _take_bytes(files, max_bytes: int):
    seen = 0
    for f in files:
        if seen >= max_bytes:
            return
        seen += len(f.text)
        yield f


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="corpus folder to write")
    parser.add_argument(
        "--no-default-roots", action="store_true", help="skip this interpreter's stdlib and site-packages"
    )
    parser.add_argument("--wheels", action="append", default=[], type=Path, help="folder of .whl files (repeatable)")
    parser.add_argument("--folder", action="append", default=[], type=Path, help="folder of Python source (repeatable)")
    parser.add_argument(
        "--tokenizer", default=None, help="reuse this tokenizer.json (or its folder) instead of training one"
    )
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--holdout", action="append", default=[], help="module forced into the validation split")
    parser.add_argument("--max-mb", type=float, default=None, help="stop collecting after this many MB of source")
    parser.add_argument(
        "--sample-mb",
        type=float,
        default=None,
        help="train on a uniform sample of about this many MB of the train split (the rest is listed as unused)",
    )


def run_corpus(args: argparse.Namespace) -> int:
    build_corpus(
        args.out,
        roots=[] if args.no_default_roots else None,
        wheel_dirs=args.wheels,
        folders=args.folder,
        tokenizer_path=args.tokenizer,
        vocab_size=args.vocab_size,
        holdout=frozenset(args.holdout),
        max_bytes=None if args.max_mb is None else int(args.max_mb * 1e6),
        sample_bytes=None if args.sample_mb is None else int(args.sample_mb * 1e6),
    )
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="build a parafill training corpus")
    add_corpus_arguments(p)
    raise SystemExit(run_corpus(p.parse_args()))
