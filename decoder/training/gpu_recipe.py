"""One-shot GPU training recipe: corpus -> train (AR then joint block diffusion) -> eval -> model folder.

Made for a CUDA machine with no internet and its own Python (torch, triton, transformers and their
dependencies: tokenizers, safetensors, numpy). It uses the repository's shipped tokenizer (the model must
share it with every other model of the project), builds its corpus from the Python source installed on
that machine (or uses a prepared corpus folder), keeps the shipped model's held-out files out of training,
and writes everything that must come back to --out (at most 8 files of <= 15 MiB: the model folder is a
tar split into parts; `cat model.tar.part* | tar -x` restores it). Sizes whose weights could not come back
are refused before any work. Whatever fails after the warm-up, the latest export still comes back.

    python -m decoder.training.gpu_recipe --out "$OUT"            # on the GPU
    python -m decoder.training.gpu_recipe --out /tmp/x --tiny     # CPU smoke test of the whole path
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import sys
import tarfile
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from decoder.machine import cpu_name
from decoder.model import CausalLM
from decoder.tokenizer import TextTokenizer
from decoder.training.config import TrainConfig
from decoder.training.distill import DistillSetConfig, build_distill_set
from decoder.training.objective import ar_loss, block_diffusion_loss
from decoder.training.prepare import build_corpus
from decoder.training.sizes import SIZES, model_config
from decoder.training.trainer import MASK_ID, Trainer

REPO = Path(__file__).resolve().parents[2]
Log = Callable[[str], None]
PART_BYTES = 15 * 1024 * 1024
# The model must come back in at most 3 parts (with gpu_run.json, recipe.log, train.log and the kernel
# benchmark: 7 of the 8 files a device call returns), and ship into a working tree that must stay well
# under the 64 MiB a device call carries: fp16 weights up to 45 MiB (20m: 36 MiB; 40m: 75 MiB, refused).
MAX_WEIGHTS_MIB = 45.0
# Deadline planning (rough, not yet measured on a GPU), in seconds: the distillation's set and compile warm-up on
# top of its training minutes, the main run's work outside its step time, packing the model folder.
DISTILL_OVERHEAD_S = 90.0
FIT_OVERHEAD_S = 30.0  # the main run's evals (every 2 minutes), exports and final checkpoint: not step time
PACK_S = 20.0
PEAK_BF16_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12}


def peak_flops(device_name: str) -> float | None:
    for key, val in PEAK_BF16_FLOPS.items():
        if key in device_name:
            return val
    return None


def flops_per_token(cfg: Any, seq_len: int, stage: str, masked_share: float = 0.6) -> float:
    """Training FLOPs per x_0 token (forward + backward = 3x forward): matmuls + attention scores.

    AR: one causal pass over L tokens. Joint: the backbone runs over 2L tokens, attention is denser (noisy
    rows see a block plus the clean past), the LM head runs on the clean stream plus the scored masks."""
    d, n_layers, V = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    hd = cfg.head_dim
    attn_w = d * hd * (cfg.num_attention_heads * 2 + cfg.num_key_value_heads * 2)
    mlp_w = 3 * d * cfg.intermediate_size
    body = n_layers * (attn_w + mlp_w)
    if stage == "ar":
        attn = n_layers * 2 * 2 * seq_len / 2 * cfg.num_attention_heads * hd  # QK^T and AV, causal half
        return 3 * (2 * body + 2 * d * V + attn)
    attn = n_layers * 2 * 2 * (2 * seq_len) / 2 * cfg.num_attention_heads * hd
    return 3 * (2 * 2 * body + 2 * d * V * (1 + masked_share) + attn)


def fp16_weights_mib(size: str, vocab_size: int) -> float:
    """The exported weights' size for `size` (counted on the meta device: nothing is allocated)."""
    with torch.device("meta"):
        model = CausalLM(model_config(size, vocab_size))
    return model.num_parameters() * 2 / 2**20


def heldout_sha(model_dir: Path) -> tuple[frozenset[str], frozenset[str]]:
    """(sha256s, modules) of the shipped model's held-out files: they must not be trained on here."""
    path = model_dir / "heldout.json"
    if not path.is_file():
        return frozenset(), frozenset()
    entries = json.loads(path.read_text())["files"]
    return frozenset(e["sha256"] for e in entries), frozenset(e["module"] for e in entries)


def pack_model(folder: Path, out: Path) -> dict[str, str]:
    """Tar the model folder and split it into <= 15 MiB parts (the transfer limit per file); returns each part's
    sha256. Packing again (after distillation) writes every new part before it renames any, so a call killed
    meanwhile leaves the earlier set whole; parts left over from a larger earlier set are removed."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(folder, arcname="model")
    data = buf.getvalue()
    parts = {f"model.tar.part{i // PART_BYTES}": data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)}
    for name, chunk in parts.items():
        (out / f"{name}.tmp").write_bytes(chunk)
    for name in parts:
        (out / f"{name}.tmp").replace(out / name)
    for stale in out.glob("model.tar.part*"):
        if stale.name not in parts:
            stale.unlink()
    return {name: hashlib.sha256(chunk).hexdigest() for name, chunk in parts.items()}


def training_minutes(
    requested: float | None, elapsed_s: float, deadline_s: float | None, reserve_s: float
) -> float | None:
    """The main run's time budget: `requested`, cut so that `reserve_s` (distillation, packing) still fits before
    `deadline_s` (seconds since the recipe started; None: no deadline). A device call that runs past its limit is
    killed, and whatever is not packed by then is lost. At least half a minute, so a slow start still trains."""
    if deadline_s is None or requested is None:
        return requested
    return max(0.5, min(requested, (deadline_s - elapsed_s - reserve_s) / 60))


def warm_up(trainer: Trainer, log: Log) -> None:
    """Compile (if asked) and run one AR and one joint forward/backward; fall back to eager when compiling
    fails. Out of memory is not a compile failure (eager needs more memory, not less): it is raised."""
    x = trainer.batcher.batch(trainer.cfg.batch_size).to(trainer.device)
    for attempt in ("compiled", "eager"):
        try:
            t = time.perf_counter()
            with trainer.autocast():
                losses = [
                    ar_loss(trainer.fwd, x).loss,
                    block_diffusion_loss(trainer.fwd, x, 16, MASK_ID, trainer.gen).loss,
                ]
                for loss in losses:
                    loss.backward()
            trainer.opt.zero_grad(set_to_none=True)
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
            values = [float(loss.detach()) for loss in losses]
            if not all(math.isfinite(v) for v in values):
                raise FloatingPointError(f"warm-up losses {values} are not finite")
            how = attempt if trainer.cfg.compile else "eager"
            log(f"warm-up ({how}) {time.perf_counter() - t:.1f}s, losses {values}")
            return
        except torch.OutOfMemoryError:
            raise
        except Exception:
            trainer.opt.zero_grad(set_to_none=True)
            if trainer.fwd is trainer.model:
                raise
            log("torch.compile failed, continuing eager:\n" + traceback.format_exc(limit=3))
            trainer.fwd = trainer.model
            trainer.cfg.compile = False  # and the distillation fine-tune, built from this config, does not retry


def salvage_export(trainer: Trainer, export_dir: Path, log: Log) -> None:
    """After a failed run: export the weights as they are if they are finite (and the device still answers),
    else keep the last export (the end of the AR stage, if it was reached)."""
    try:
        if all(torch.isfinite(p).all() for p in trainer.model.parameters()):
            trainer.export(export_dir)
            log(f"exported the weights at step {trainer.step} after the failure")
            return
        log("the weights are not finite: keeping the last export")
    except Exception as exc:
        log(f"could not export after the failure ({type(exc).__name__}: {exc}): keeping the last export")


def distill_stage(args: argparse.Namespace, cfg: TrainConfig, export_dir: Path, log: Log) -> dict[str, Any]:
    """Self-distillation after the main run (decoder/training/distill.py): the trained model writes greedy
    continuations of training prompts, then a short joint-stage fine-tune mixes them in, so the masked stream
    learns to commit several tokens per step where greedy decoding is predictable. Overwrites `export_dir`."""
    t0 = time.time()
    gen_len = min(64, cfg.seq_len // 2)
    distill_dir = Path(cfg.run_dir).parent / "distill"
    rows = 16 if args.tiny else args.distill_rows
    build_distill_set(
        DistillSetConfig(
            model=str(export_dir),
            corpus=cfg.corpus,
            out=str(distill_dir),
            rows=rows,
            prompt_len=cfg.seq_len - gen_len,
            gen_len=gen_len,
            batch_size=8 if args.tiny else 512,
            seed=cfg.seed + 1,
            device=cfg.device,
        ),
        log=lambda m: None,
    )
    generated = time.time() - t0
    log(f"distill set: {rows:,} rows in {generated:.1f}s")
    tuned = replace(
        cfg,
        run_dir=str(Path(cfg.run_dir).parent / "run-distill"),
        init_from=str(export_dir),
        ar_fraction=0.0,
        lr=cfg.lr * 0.25,  # a fine-tune of a trained model: a quarter of the main run's peak
        warmup_steps=2 if args.tiny else 20,
        max_steps=2 if args.tiny else None,
        time_budget_minutes=None if args.tiny else args.distill_minutes,
        distill_set=str(distill_dir),
        distill_rate=0.75,
        certainty_weight=args.certainty_weight,
    )
    trainer = Trainer(tuned, log=log)
    trainer.cfg.hardware = cfg.hardware
    warm_up(trainer, log)
    result = trainer.fit()
    return {
        "generate_seconds": round(generated, 1),
        "train_seconds": round(time.time() - t0 - generated, 1),
        "tokens": trainer.tokens,
        "steps": trainer.step,
        "stages": trainer.stage_stats,
        "metrics": result,
        "config": {k: v for k, v in vars(tuned).items() if not k.startswith("_")},
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path, help="what must come back: model parts, JSON, log")
    p.add_argument("--work", type=Path, default=Path("/tmp/parafill-gpu"), help="scratch (corpus, checkpoint)")
    p.add_argument("--tiny", action="store_true", help="CPU smoke test: tiny model, tiny corpus, few steps")
    p.add_argument("--corpus", type=Path, default=None, help="use this prepared corpus folder instead of building")
    p.add_argument("--tokenizer", type=Path, default=REPO / "models" / "default", help="folder with tokenizer.json")
    p.add_argument("--size", default="20m", choices=sorted(SIZES))
    p.add_argument("--minutes", type=float, default=5.0, help="training time budget (step time; compile warm-up apart)")
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--ar-fraction", type=float, default=0.5)
    p.add_argument(
        "--distill-minutes",
        type=float,
        default=0.0,
        help="self-distillation fine-tune after the run (0, the default: none; its set and warm-up need about "
        f"{DISTILL_OVERHEAD_S:.0f} s more, which one 10-minute call does not have after a 5-minute run)",
    )
    p.add_argument("--distill-rows", type=int, default=16384, help="prompts the trained model continues greedily")
    p.add_argument(
        "--certainty-weight", type=float, default=0.0, help="certainty forcing in the distillation fine-tune (0: off)"
    )
    p.add_argument("--compile", choices=["auto", "on", "off"], default="auto")
    p.add_argument("--max-corpus-mb", type=float, default=None, help="stop reading source after this many MB")
    p.add_argument("--sample-corpus-mb", type=float, default=500.0, help="uniform sample of the train split, MB")
    p.add_argument("--source", action="append", default=[], type=Path, help="extra folder of Python source")
    p.add_argument(
        "--deadline-seconds",
        type=float,
        default=None,
        help="everything must be packed by then (seconds from --started-at): the training budget shrinks to fit, "
        "and distillation is skipped when it no longer fits",
    )
    p.add_argument(
        "--started-at",
        type=float,
        default=None,
        help="when the device call started (Unix time; default: now): the deadline counts from it, so the "
        "time Python takes to import torch counts too",
    )
    return p.parse_args(argv)


def recipe_logger(log_path: Path, t_start: float) -> Log:
    """Prints and appends to recipe.log (which comes back), each line stamped with seconds since the call began."""

    def log(msg: str) -> None:
        line = f"[{time.time() - t_start:7.1f}s] {msg}"
        print(line, flush=True)
        with log_path.open("a") as fh:
            fh.write(line + "\n")

    return log


def environment(cuda: bool) -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if cuda else f"CPU {cpu_name()}",
        "cuda": torch.version.cuda,
    }


def prepare_corpus(args: argparse.Namespace, work: Path, log: Log) -> Path:
    """The prepared corpus given, or one built from this machine's Python source, minus the shipped model's
    held-out files."""
    if args.corpus is not None:
        log(f"using prepared corpus {args.corpus}")
        return args.corpus
    corpus_dir = work / "corpus"
    sha, modules = heldout_sha(args.tokenizer)
    max_mb = args.max_corpus_mb if args.max_corpus_mb is not None else (0.5 if args.tiny else None)
    build_corpus(
        corpus_dir,
        roots=None,
        folders=args.source,
        tokenizer_path=args.tokenizer,
        heldout_modules=modules,  # exactly these split units: "attrs" is attrs/__init__.py, not all of attrs
        heldout_sha=sha,
        max_bytes=None if max_mb is None else int(max_mb * 1e6),
        sample_bytes=int(args.sample_corpus_mb * 1e6),
        explain_max_files=100 if args.tiny else 2000,
        log=log,
    )
    return corpus_dir


def train_config(args: argparse.Namespace, corpus_dir: Path, work: Path, cuda: bool) -> TrainConfig:
    """The main run: the asked-for size and budget on the GPU; a tiny model for a few steps with --tiny."""
    if args.tiny:
        size, seq_len, batch, minutes, max_steps = "tiny", 64, 8, None, args.max_steps or 6
    else:
        size, seq_len, batch = args.size, args.seq_len, args.batch_size
        minutes, max_steps = args.minutes, args.max_steps
    return TrainConfig(
        corpus=str(corpus_dir),
        run_dir=str(work / "run"),
        size=size,
        seq_len=seq_len,
        batch_size=batch,
        lr=args.lr,
        warmup_steps=5 if args.tiny else 150,
        max_steps=max_steps,
        time_budget_minutes=minutes,
        ar_fraction=args.ar_fraction,
        eval_every_minutes=2.0,
        eval_windows=8 if args.tiny else 512,
        eval_batch=8 if args.tiny else batch,
        checkpoint_every_minutes=1e9,  # one checkpoint at the end: the run is short
        export_every_minutes=1e9,
        export_dir=str(work / "model"),
        compile=args.compile == "on" or (args.compile == "auto" and cuda),
        threads=1 if args.tiny else (2 if not cuda else None),
        device="cuda" if cuda else "cpu",
        progress=False,
    )


def distill_seconds(args: argparse.Namespace) -> float:
    """What the distillation stage needs after the main run: its set, a compile warm-up and the fine-tune (0: none
    asked for)."""
    return 0.0 if args.distill_minutes <= 0 else args.distill_minutes * 60 + DISTILL_OVERHEAD_S


def fit_budget(args: argparse.Namespace, cfg: TrainConfig, t_start: float, log: Log) -> None:
    """Shrink the main run's budget so that what follows its step time fits before the deadline: its evals,
    exports and final checkpoint, packing, and distillation (its set, a compile warm-up, the fine-tune). When not
    all of it fits, the main run comes first."""
    minutes = cfg.time_budget_minutes
    distill_reserve = distill_seconds(args)
    elapsed = time.time() - t_start
    planned = training_minutes(minutes, elapsed, args.deadline_seconds, distill_reserve + FIT_OVERHEAD_S + PACK_S)
    if planned != minutes and distill_reserve:
        planned = training_minutes(minutes, elapsed, args.deadline_seconds, FIT_OVERHEAD_S + PACK_S)
    if planned != minutes:
        log(f"training budget {minutes} -> {planned:.2f} minutes to finish by {args.deadline_seconds:.0f}s")
        cfg.time_budget_minutes = planned


def fit_or_salvage(trainer: Trainer, export_dir: Path, log: Log) -> tuple[dict[str, Any], str | None]:
    """(metrics, error): on out of memory, a kernel fault or a bug, bring back what was exported."""
    try:
        return trainer.fit(), None
    except Exception as exc:
        log("training failed:\n" + traceback.format_exc(limit=6))
        salvage_export(trainer, export_dir, log)
        return dict(trainer.metrics), f"{type(exc).__name__}: {exc}"


def stage_numbers(trainer: Trainer, seq_len: int, peak: float | None) -> dict[str, dict[str, Any]]:
    """Per stage: tokens/s, the FLOPs they stand for, and the share of the GPU's peak (MFU) where it is known."""
    stages = {}
    for stage, st in trainer.stage_stats.items():
        tps = st["tokens"] / max(st["seconds"], 1e-9)
        fpt = flops_per_token(trainer.model.config, seq_len, stage)
        stages[stage] = {
            **st,
            "tokens_per_s": round(tps, 1),
            "flops_per_token": fpt,
            "achieved_tflops": round(tps * fpt / 1e12, 2),
            "mfu": None if peak is None else round(tps * fpt / peak, 4),
        }
    return stages


def write_outputs(numbers: dict[str, Any], out: Path, export_dir: Path, cfg: TrainConfig, t_start: float) -> None:
    """gpu_run.json, the packed model and the training log's tail into --out: all that comes back."""
    numbers["seconds"]["total"] = round(time.time() - t_start, 1)
    if export_dir.is_dir():
        numbers["model_parts"] = pack_model(export_dir, out)
    (out / "gpu_run.json").write_text(json.dumps(numbers, indent=1, default=str) + "\n")
    train_log = Path(cfg.run_dir) / "train.log"
    if train_log.is_file():
        (out / "train.log").write_bytes(train_log.read_bytes()[-4_000_000:])


def distill_if_time(
    args: argparse.Namespace,
    cfg: TrainConfig,
    export_dir: Path,
    numbers: dict[str, Any],
    t_start: float,
    log: Log,
) -> None:
    """The distillation fine-tune, when asked for and when it fits before the deadline; repacks its model. The
    main run's model is packed already: a failure here keeps it and says why."""
    if args.distill_minutes <= 0:
        return
    reserve = distill_seconds(args) + PACK_S
    left = None if args.deadline_seconds is None else args.deadline_seconds - (time.time() - t_start)
    if left is not None and left < reserve:
        log(f"distillation skipped: {left:.0f}s left before the deadline, it needs {reserve:.0f}s")
        return
    try:
        numbers["distill"] = distill_stage(args, cfg, export_dir, log)
        write_outputs(numbers, args.out, export_dir, cfg, t_start)
    except Exception as exc:
        numbers["distill_error"] = f"{type(exc).__name__}: {exc}"
        log("distillation failed, the main run's model stays:\n" + traceback.format_exc(limit=6))
        (args.out / "gpu_run.json").write_text(json.dumps(numbers, indent=1, default=str) + "\n")


def summary(numbers: dict[str, Any]) -> str:
    result, distill = numbers["metrics"], numbers["distill"]
    return (
        f"done: {numbers['tokens_seen']:,} tokens, val_ar_bpb {result.get('val_ar_bpb', float('nan')):.4f}, "
        f"val_masked_bpb {result.get('val_masked_bpb', float('nan')):.4f}; "
        + ", ".join(f"{k} {v['tokens_per_s']:,.0f} tok/s mfu {v['mfu']}" for k, v in numbers["stages"].items())
        + ("" if distill is None else f"; after distillation val_ar_bpb {distill['metrics'].get('val_ar_bpb'):.4f}")
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.time() if args.started_at is None else args.started_at
    log = recipe_logger(out / "recipe.log", t_start)

    cuda = torch.cuda.is_available() and not args.tiny
    env = environment(cuda)
    log(f"environment {json.dumps(env)}")
    size_name = "tiny" if args.tiny else args.size
    weights_mib = fp16_weights_mib(size_name, TextTokenizer.from_folder(args.tokenizer).vocab_size)
    if weights_mib > MAX_WEIGHTS_MIB:
        log(
            f"size {size_name}: {weights_mib:.0f} MiB of fp16 weights could not come back (limit {MAX_WEIGHTS_MIB:.0f})"
        )
        return 2
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    t0 = time.time()
    corpus_dir = prepare_corpus(args, work, log)
    corpus_seconds = time.time() - t0

    trainer = Trainer(train_config(args, corpus_dir, work, cuda), log=log)
    cfg = trainer.cfg  # the config as resolved (dtype) and adjusted below: what the numbers and distillation use
    if cuda:
        cfg.hardware = env["device"]
    export_dir = Path(cfg.export_dir)
    warm_up(trainer, log)
    fit_budget(args, cfg, t_start, log)
    t1 = time.time()
    result, error = fit_or_salvage(trainer, export_dir, log)
    train_seconds = time.time() - t1

    # The numbers, and the model packed at once: a call killed during distillation still brings it back.
    peak = peak_flops(env["device"]) if cuda else None
    numbers = {
        "environment": env,
        "model": {"size": cfg.size, "parameters": trainer.model.num_parameters(), **trainer.model.config.to_hf_dict()},
        "train_config": {k: v for k, v in vars(cfg).items() if not k.startswith("_")},
        "tokens_seen": trainer.tokens,
        "steps": trainer.step,
        "stages": stage_numbers(trainer, cfg.seq_len, peak),
        "metrics": result,
        "history": trainer.history,
        "error": error,
        "distill": None,  # the shipped folder is the distilled model when this is not None
        "seconds": {"corpus": round(corpus_seconds, 1), "train": round(train_seconds, 1)},
        "corpus": json.loads((Path(corpus_dir) / "shards.json").read_text()),
        "peak_bf16_flops": peak,
        "unpack": "cat model.tar.part* | tar -x   # -> model/ (HF folder)",
    }
    write_outputs(numbers, out, export_dir, cfg, t_start)
    if error is not None:
        log(f"failed: {error}; " + ("the last export came back" if export_dir.is_dir() else "no model to bring back"))
        return 1
    distill_if_time(args, cfg, export_dir, numbers, t_start, log)
    log(summary(numbers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
