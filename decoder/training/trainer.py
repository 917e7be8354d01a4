"""Train loop: AdamW, the learning-rate schedule of lr_schedule.py, grad clip, bf16 autocast, periodic
validation, checkpoints, export.

A wsd run keeps its state at the start of the decay (RUN/checkpoint-stable), so a later, longer run continues the
stable phase instead of re-warming annealed weights.

Stage by progress: p < ar_fraction trains AR only (causal next-token on x_0: one L-token forward), the rest
trains the joint block-diffusion objective (a 2L-token forward: masked CE + next-token CE). This is how
Fast-dLLM v2 turns an AR model into a block-diffusion one, and on a CPU it buys about twice the tokens for the
first stage.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from decoder.checkpoint import load_model, save_model
from decoder.compute_dtype import resolve_compute_dtype
from decoder.masks import joint_training_mask
from decoder.model import CausalLM
from decoder.training import corpus as C
from decoder.training.card import lineage, model_card, totals
from decoder.training.config import TrainConfig
from decoder.training.curve import CURVE_FILE, curve_points, plot_training_curve
from decoder.training.distill import DistillRows
from decoder.training.examples import Batcher, MixConfig, byte_table, eval_windows, newline_table
from decoder.training.grow import added_parameter_names, grow_depth
from decoder.training.lr_schedule import SCHEDULES, decay_start, lr_at
from decoder.training.objective import ar_loss, block_diffusion_loss, diffusion_targets, noise
from decoder.training.sizes import model_config
from decoder.training.state import load_checkpoint, save_checkpoint
from decoder.training.step_meter import StepMeter
from decoder.training.stop_request import StopRequest
from decoder.training.threads import ThreadTuner
from decoder.training.tokenizer_train import SPECIAL_IDS, tokenizer_config

MASK_ID = SPECIAL_IDS["<|mask|>"]
STABLE_CHECKPOINT = "checkpoint-stable"


def init_weights(model: CausalLM) -> None:
    """GPT-2 style: N(0, 0.02), residual output projections scaled down by sqrt(2 * layers)."""
    n_layers = model.config.num_hidden_layers
    for name, p in model.named_parameters():
        if name.endswith("norm.weight") or "layernorm" in name:
            torch.nn.init.ones_(p)
        elif name.endswith(".bias"):
            torch.nn.init.zeros_(p)
        elif name.endswith(("o_proj.weight", "down_proj.weight")):
            torch.nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layers))
        else:
            torch.nn.init.normal_(p, 0.0, 0.02)


def make_optimizer(model: CausalLM, cfg: TrainConfig, added: frozenset[str] = frozenset()) -> torch.optim.AdamW:
    """AdamW, weight decay on matrices only. Parameters named in `added` (a grown model's new layers) get
    their own groups with `lr_scale` = cfg.grown_lr_scale; train_step multiplies each group's rate by it."""
    groups = []
    for names_added, lr_scale in ((False, 1.0), (True, cfg.grown_lr_scale)):
        params = [(n, p) for n, p in model.named_parameters() if (n in added) == names_added]
        if not params:
            continue
        decay = [p for _, p in params if p.ndim >= 2]
        no_decay = [p for _, p in params if p.ndim < 2]
        groups += [
            {"params": decay, "weight_decay": cfg.weight_decay, "lr_scale": lr_scale},
            {"params": no_decay, "weight_decay": 0.0, "lr_scale": lr_scale},
        ]
    fused = cfg.device.startswith("cuda")
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, fused=fused)


class Trainer:
    def __init__(self, cfg: TrainConfig, log: Callable[[str], None] | None = None) -> None:
        cfg = replace(cfg, dtype=resolve_compute_dtype(cfg.dtype, cfg.device))  # the card records what ran
        if cfg.schedule not in SCHEDULES:
            raise ValueError(f"schedule {cfg.schedule!r}: use one of {', '.join(SCHEDULES)}")
        if not 0 < cfg.decay_fraction <= 1:
            raise ValueError(f"decay_fraction {cfg.decay_fraction}: give a share of the run in (0, 1]")
        if cfg.resume_stable and not cfg.resume:
            raise ValueError("resume_stable continues a run: give resume as well")
        self.cfg = cfg
        self.run = Path(cfg.run_dir)
        self.run.mkdir(parents=True, exist_ok=True)
        self._log_path = self.run / "train.log"
        self._log_fn = log
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.tuner = ThreadTuner(cfg.threads or torch.get_num_threads()) if cfg.adaptive_threads else None
        torch.manual_seed(cfg.seed)
        self.device = torch.device(cfg.device)
        corpus = Path(cfg.corpus)
        self.tokenizer = Tokenizer.from_file(str(corpus / "tokenizer.json"))
        self.shards = C.read_shards_meta(corpus)
        self.newline = newline_table(self.tokenizer)
        self.bytes_of = torch.from_numpy(byte_table(self.tokenizer))
        explain = corpus / "explain_train.bin"
        self.np_rng = np.random.default_rng(cfg.seed)
        self.mix_shards = self._mix_shards(cfg)
        self.batcher = Batcher(
            C.load_shard(corpus / "train.bin"),
            cfg.seq_len,
            self.newline,
            explain=C.load_shard(explain) if explain.is_file() and explain.stat().st_size else None,
            mix=MixConfig(fim_rate=cfg.fim_rate, explain_rate=cfg.explain_rate),
            seed=cfg.seed,
            extra_docs=C.load_shard(Path(cfg.mix_corpus) / "train.bin") if cfg.mix_corpus else None,
            extra_rate=cfg.mix_rate,
        )
        self.batcher.rng = self.np_rng
        self.distill = DistillRows(cfg.distill_set, cfg.seq_len, cfg.block_sizes) if cfg.distill_set else None
        self.val = eval_windows(C.load_shard(corpus / "val.bin"), cfg.seq_len, cfg.eval_windows)
        vocab = self.tokenizer.get_vocab_size()
        # What the starting weights had been through, read now: a continued run often ships over its init folder.
        self.lineage = lineage(cfg.init_from)
        added: set[str] = set()
        if cfg.init_from:
            self.model = load_model(cfg.init_from, dtype=torch.float32)
            if self.model.config.vocab_size != vocab:
                raise ValueError(
                    f"--init-from model has vocab {self.model.config.vocab_size}, corpus tokenizer {vocab}"
                )
            if cfg.grow_layers and cfg.grow_layers != self.model.config.num_hidden_layers:
                old_layers = self.model.config.num_hidden_layers
                self.model, added_layers = grow_depth(self.model, cfg.grow_layers)
                added = added_parameter_names(self.model, added_layers)
                self.log(f"grew {old_layers} layers to {cfg.grow_layers} (new: {added_layers})")
        elif cfg.grow_layers:
            raise ValueError("--grow-layers grows the --init-from model: give --init-from")
        else:
            self.model = CausalLM(model_config(cfg.size, vocab, max_positions=max(4096, cfg.seq_len)))
            init_weights(self.model)
        self.model.to(self.device).train()
        self.opt = make_optimizer(self.model, cfg, frozenset(added))
        self.step = 0
        self.tokens = 0
        self.elapsed = 0.0
        self.metrics: dict[str, Any] = {}
        self.stage_stats: dict[str, dict[str, float]] = {}  # per stage: steps, tokens, seconds (throughput)
        self.history: list[dict[str, Any]] = []
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(cfg.seed)
        if cfg.resume:
            name = STABLE_CHECKPOINT if cfg.resume_stable else "checkpoint"
            ckpt = self.run / name
            if not ckpt.is_dir() and (self.run / f"{name}.old").is_dir():
                ckpt = self.run / f"{name}.old"  # a save stopped between its two renames
            if not ckpt.is_dir():
                raise FileNotFoundError(f"--resume: {self.run} has no {name} to resume from")
            body = load_checkpoint(ckpt, self.model, self.opt, self.np_rng, self.gen)
            if not body["noise_restored"]:
                self.gen.manual_seed(cfg.seed + body["step"])  # an older checkpoint: fresh noise, as it was then
            self.step, self.tokens, self.elapsed = body["step"], body["tokens"], body["elapsed"]
            self.metrics, self.history = body.get("metrics", {}), body.get("history", [])
            self.lineage = body.get("lineage", self.lineage)
            self.stage_stats = body.get("stage_stats", {})  # so the model card's tokens per stage cover the run
            self.log(f"resumed from {ckpt} at step {self.step}, {self.tokens:,} tokens, {self.elapsed / 60:.1f} min")
        # A wsd run keeps the state where its decay begins; one resumed past that point has nothing to keep.
        self.stable_saved = cfg.schedule != "wsd" or self.progress() >= decay_start(cfg)
        self.fwd = self.model
        if cfg.compile:
            self.fwd = torch.compile(self.model)
        self.autocast_dtype = torch.bfloat16 if cfg.dtype == "bf16" else None

    def _mix_shards(self, cfg: TrainConfig) -> dict:
        """shards.json of the mixed-in corpus, checked against the main one's tokenizer ({} without a mix)."""
        if not cfg.mix_corpus:
            if cfg.mix_rate:
                raise ValueError("--mix-rate needs --mix-corpus")
            return {}
        meta = C.read_shards_meta(cfg.mix_corpus)
        if meta.get("tokenizer_sha256") != self.shards.get("tokenizer_sha256"):
            raise ValueError(
                f"--mix-corpus {cfg.mix_corpus} was tokenized with tokenizer {meta.get('tokenizer_sha256')}, "
                f"--corpus with {self.shards.get('tokenizer_sha256')}: build both with the same --tokenizer"
            )
        if not 0.0 < cfg.mix_rate <= 1.0:
            raise ValueError(f"--mix-rate must be in (0, 1] with --mix-corpus, not {cfg.mix_rate}")
        return meta

    # ------------------------------------------------------------------------------------------ utils

    def log(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        # Opened per line, not held: a Trainer built only to evaluate (--eval-only) or dropped by a test
        # leaves no open handle behind, and a run killed mid-step keeps every line it logged.
        with self._log_path.open("a", encoding="utf-8") as log_file:
            log_file.write(line + "\n")
        if self._log_fn:
            self._log_fn(line)

    def autocast(self):
        return torch.autocast(
            self.device.type, dtype=self.autocast_dtype or torch.bfloat16, enabled=self.autocast_dtype is not None
        )

    def progress(self) -> float:
        cfg = self.cfg
        parts = []
        if cfg.max_steps:
            parts.append(self.step / cfg.max_steps)
        if cfg.time_budget_minutes:
            parts.append(self.elapsed / (cfg.time_budget_minutes * 60))
        return max(parts) if parts else 0.0

    def stage(self) -> str:
        return "ar" if self.progress() < self.cfg.ar_fraction else "joint"

    def done(self) -> bool:
        cfg = self.cfg
        if cfg.max_steps is None and cfg.time_budget_minutes is None:
            raise ValueError("give max_steps or time_budget_minutes")
        return self.progress() >= 1.0

    # ----------------------------------------------------------------------------------------- train

    def train_step(self) -> dict[str, float]:
        cfg = self.cfg
        stage = self.stage()
        lr = lr_at(cfg, self.step, self.progress())
        for g in self.opt.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        kind, ar_scored, certainty_weight = stage, None, 0.0
        if stage == "joint" and self.distill is not None and self.np_rng.random() < cfg.distill_rate:
            kind = "distill"
            x, ar_scored = self.distill.batch(cfg.batch_size, self.np_rng)
            ar_scored = ar_scored.to(self.device)
            certainty_weight = cfg.certainty_weight
        else:
            x = self.batcher.batch(cfg.batch_size)
        x = x.to(self.device, non_blocking=True)
        with self.autocast():
            if stage == "ar":
                out = ar_loss(self.fwd, x)
                block = 0
            else:
                # One block size per batch (the mask is shared by the batch); mixed across batches.
                block = int(cfg.block_sizes[int(self.np_rng.integers(len(cfg.block_sizes)))])
                out = block_diffusion_loss(
                    self.fwd, x, block, MASK_ID, self.gen, ar_scored=ar_scored, certainty_weight=certainty_weight
                )
        out.loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        self.tokens += x.numel()
        return {
            "loss": float(out.loss.detach()),
            "ar": float(out.ar),
            "masked": float(out.masked) if out.masked is not None else float("nan"),
            "certainty": float(out.certainty) if out.certainty is not None else float("nan"),
            "grad_norm": float(grad_norm),
            "lr": lr,
            "block": block,
            "kind": kind,  # ar, joint, or distill (a joint step on self-distillation rows)
        }

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Bits per byte on the validation windows: AR (clean next-token) and masked (block diffusion).

        Eager model on purpose: a compiled one would compile two more graphs (no-grad) for a few batches."""
        self.model.eval()
        gen = torch.Generator(device=self.device)
        gen.manual_seed(1234)  # the same noise every evaluation, so numbers compare across steps
        ar_nats = ar_bytes = m_nats = m_bytes = 0.0
        ar_tokens = 0
        L = self.cfg.seq_len
        bytes_of = self.bytes_of.to(self.device)
        for i in range(0, len(self.val), self.cfg.eval_batch):
            x = self.val[i : i + self.cfg.eval_batch].to(self.device)
            with self.autocast():
                pos = torch.arange(L, device=self.device).expand(x.shape[0], L)
                h = self.model(x, pos)
                logits = self.model.logits(h[:, :-1]).float()
            ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")
            ar_nats += float(ce.sum())
            ar_bytes += float(bytes_of[x[:, 1:]].sum())
            ar_tokens += ce.numel()
            block = 16 if L % 16 == 0 else L
            xt, masked = noise(x, block, MASK_ID, gen)
            pos2 = torch.arange(L, device=self.device).repeat(2).expand(x.shape[0], 2 * L)
            with self.autocast():
                mask = joint_training_mask(L, block, device=self.device)
                h2 = self.model(torch.cat((xt, x), 1), pos2, attn_mask=mask)
                sel = diffusion_targets(masked, block)
                ml = self.model.logits(h2[:, : L - 1][sel]).float()
            tgt = x[:, 1:][sel]
            m_nats += float(torch.nn.functional.cross_entropy(ml, tgt, reduction="sum"))
            m_bytes += float(bytes_of[tgt].sum())
        self.model.train()
        ln2 = math.log(2)
        return {
            "val_ar_bpb": ar_nats / ln2 / max(ar_bytes, 1),
            "val_ar_loss": ar_nats / max(ar_tokens, 1),
            "val_masked_bpb": m_nats / ln2 / max(m_bytes, 1),
        }

    # ----------------------------------------------------------------------------------------- save

    def meta(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "tokens": self.tokens,
            "elapsed": self.elapsed,
            "metrics": self.metrics,
            "history": self.history[-200:],
            "train_config": asdict(self.cfg),
            "lineage": self.lineage,
            "stage_stats": self.stage_stats,
        }

    def save_checkpoint(self) -> None:
        save_checkpoint(self.run / "checkpoint", self.model, self.opt, self.meta(), self.np_rng, self.gen)

    def export(self, folder: str | Path) -> Path:
        """HF model folder: config.json (+mask_token_id), fp16 safetensors, tokenizer, model card."""
        folder = Path(folder)
        tmp = folder.with_name(folder.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        save_model(self.model, tmp, dtype=torch.float16)
        self.tokenizer.save(str(tmp / "tokenizer.json"))
        (tmp / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
        training = {
            "tokens_seen": self.tokens,
            "steps": self.step,
            "stage": self.stage(),  # "ar": exported before the block-diffusion stage began
            "stage_tokens": {k: v["tokens"] for k, v in self.stage_stats.items()},
            "train_minutes": round(self.elapsed / 60, 1),
            "hardware": self.hardware(),
            "metrics": self.metrics,
            "train_config": asdict(self.cfg),
            "corpus": self.shards.get("summary", {}),
            "corpus_shards": self.shards.get("shards", {}),
            "tokenizer_sha256": self.shards.get("tokenizer_sha256"),
        }
        if self.mix_shards:
            training["mix_corpus"] = {
                "rate": self.cfg.mix_rate,
                "corpus": self.mix_shards.get("summary", {}),
                "corpus_shards": self.mix_shards.get("shards", {}),
            }
        training["history"] = self.history
        training |= totals(training, self.lineage)
        (tmp / "training.json").write_text(json.dumps(training, indent=1) + "\n")
        plot_training_curve(curve_points(training), tmp / CURVE_FILE)
        (tmp / "README.md").write_text(model_card(self.model, training))
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        tmp.rename(folder)
        return folder

    def hardware(self) -> str:
        if self.device.type == "cuda":
            return torch.cuda.get_device_name(self.device)
        threads = torch.get_num_threads()
        return f"CPU {self.cfg.hardware}, {threads} thread{'s' if threads > 1 else ''}"

    # ------------------------------------------------------------------------------------------ loop

    def fit(self) -> dict[str, Any]:
        with StopRequest() as stop:
            return self._fit(stop)

    def _fit(self, stop: StopRequest) -> dict[str, Any]:
        cfg = self.cfg
        n_params = self.model.num_parameters()
        # --size shapes fresh runs only; a continued (or grown) run has its init model's shape.
        shape = f"{self.model.config.num_hidden_layers} layers" if cfg.init_from else cfg.size
        self.log(f"model {shape}: {n_params / 1e6:.2f}M parameters; config {json.dumps(asdict(cfg))}")
        bar = None
        if cfg.progress:
            from tqdm import tqdm

            bar = tqdm(total=cfg.max_steps, initial=self.step, dynamic_ncols=True, mininterval=2.0)
        meter = StepMeter()
        due = Schedule(self.elapsed)
        stage = self.stage()
        while not self.done():
            if stop.signal is not None:  # between steps: the checkpoint is whole and `--resume` loses nothing
                if bar is not None:
                    bar.close()
                self.save_checkpoint()
                self.log(f"stopped by {stop.signal} at step {self.step}: checkpoint saved, continue with --resume")
                return {"step": self.step, "tokens": self.tokens, "elapsed": self.elapsed, "stopped": stop.signal}
            out, dt = self._timed_step()
            meter.record(out, cfg.batch_size * cfg.seq_len, dt)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(stage=self.stage(), **meter.postfix(out["lr"]))
            if self.step % 50 == 0:
                self.log(
                    f"step {self.step} {self.stage()} {meter.summary(out)} tokens {self.tokens:,} "
                    f"elapsed {self.elapsed / 60:.1f}m"
                )
                self.metrics["train_tokens_per_s"] = round(meter.tokens_per_s, 1)
            if self.stage() != stage:
                self.log(f"stage {stage} -> {self.stage()} at step {self.step}, {self.tokens:,} tokens")
                if cfg.export_dir:
                    self._eval_and_export(f"end of {stage} stage")
                    due.eval = due.export = self.elapsed
                stage = self.stage()
            self._keep_stable_state()
            self._periodic(due)
        if bar is not None:
            bar.close()
        self._eval()
        self.save_checkpoint()
        if cfg.export_dir:
            self.export(cfg.export_dir)
            self.log(f"exported {cfg.export_dir}")
        self.log(f"done: step {self.step}, {self.tokens:,} tokens, {self.elapsed / 60:.1f} min")
        return {"step": self.step, "tokens": self.tokens, "elapsed": self.elapsed, **self.metrics}

    def _keep_stable_state(self) -> None:
        """Once a wsd run reaches its decay, keep a checkpoint of the state at its peak rate (RUN/checkpoint-stable):
        `--resume-stable` with a longer budget continues from there, and its tokens add up."""
        if self.stable_saved or self.progress() < decay_start(self.cfg):
            return
        save_checkpoint(self.run / STABLE_CHECKPOINT, self.model, self.opt, self.meta(), self.np_rng, self.gen)
        self.stable_saved = True
        self.log(
            f"decay begins at step {self.step}, {self.tokens:,} tokens: state kept in {self.run / STABLE_CHECKPOINT} "
            "(continue the stable phase with --resume-stable and a longer budget)"
        )

    def _timed_step(self) -> tuple[dict[str, Any], float]:
        """One optimizer step, timed (the time budget counts step time only) and added to its stage's figures."""
        cfg = self.cfg
        t0 = time.perf_counter()
        out = self.train_step()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        self.elapsed += dt
        if self.tuner is not None:
            self.tuner.record(cfg.batch_size * cfg.seq_len, dt, self.log)
        st = self.stage_stats.setdefault(out["kind"], dict(steps=0, tokens=0, seconds=0.0))
        st["steps"] += 1
        st["tokens"] += cfg.batch_size * cfg.seq_len
        st["seconds"] += dt
        return out, dt

    def _periodic(self, due: Schedule) -> None:
        """Validation, checkpoint and export, each once its interval of step time has passed since the last."""
        cfg = self.cfg
        if self.elapsed - due.eval >= cfg.eval_every_minutes * 60:
            self._eval()
            due.eval = self.elapsed
        if self.elapsed - due.checkpoint >= cfg.checkpoint_every_minutes * 60:
            self.save_checkpoint()
            due.checkpoint = self.elapsed
        if cfg.export_dir and self.elapsed - due.export >= cfg.export_every_minutes * 60:
            self.export(cfg.export_dir)
            self.log(f"exported {cfg.export_dir}")
            due.export = self.elapsed

    def _eval(self) -> None:
        t = time.perf_counter()
        m = self.evaluate()
        self.metrics.update(m)
        self.metrics["tokens_seen"] = self.tokens
        self.history.append({"step": self.step, "tokens": self.tokens, "stage": self.stage(), **m})
        self.log(
            f"eval step {self.step}: "
            + ", ".join(f"{k} {v:.4f}" for k, v in m.items())
            + f" ({time.perf_counter() - t:.0f}s)"
        )

    def _eval_and_export(self, why: str) -> None:
        self._eval()
        self.save_checkpoint()
        self.export(self.cfg.export_dir)  # type: ignore[arg-type]
        self.log(f"exported {self.cfg.export_dir} ({why})")


class Schedule:
    """Step time (seconds) of the last validation, checkpoint and export."""

    def __init__(self, now: float) -> None:
        self.eval = self.checkpoint = self.export = now
