"""What `parafill train` runs: the whole configuration of a training run, recorded in its log and model card."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from decoder.machine import cpu_name


@dataclass
class TrainConfig:
    corpus: str
    run_dir: str
    # A second corpus (same tokenizer) whose train windows make up mix_rate of the document rows; explain rows and
    # validation stay the main corpus's.
    mix_corpus: str | None = None
    mix_rate: float = 0.0
    size: str = "5m"
    seq_len: int = 256
    batch_size: int = 16
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    # "cosine": warmup, then cosine to min_lr_ratio over the run. "wsd" (warmup-stable-decay): the peak rate until
    # the last decay_fraction of the run, then cosine down; RUN/checkpoint-stable keeps the state where the decay
    # began, so a later run continues the stable phase (resume_stable) instead of re-warming annealed weights.
    schedule: str = "cosine"
    decay_fraction: float = 0.2
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    max_steps: int | None = None
    time_budget_minutes: float | None = None
    ar_fraction: float = 0.55  # share of the run in the AR-only stage (0: joint from the start)
    block_sizes: tuple[int, ...] = (4, 8, 16, 32)
    fim_rate: float = 0.5
    explain_rate: float = 0.05
    eval_every_minutes: float = 10.0
    eval_windows: int = 64
    eval_batch: int = 16
    checkpoint_every_minutes: float = 10.0
    export_every_minutes: float = 20.0
    export_dir: str | None = None
    dtype: str = "auto"  # autocast dtype: bf16, fp32, or auto (bf16 where it is native: decoder/compute_dtype.py)
    compile: bool = False
    threads: int | None = None
    adaptive_threads: bool = False  # CPU: keep trying 1..threads and use whichever runs faster right now
    device: str = "cpu"
    seed: int = 0
    init_from: str | None = None
    # Grow the init_from model to this many layers before training (decoder/training/grow.py); the added
    # layers learn at grown_lr_scale times the rate of the others.
    grow_layers: int | None = None
    grown_lr_scale: float = 10.0
    distill_set: str | None = None  # folder from `parafill distill-set`: self-distillation rows for the joint stage
    distill_rate: float = 0.5  # share of joint-stage batches taken from the distill set
    # Certainty forcing on distill batches: weight of the entropy of right masked predictions (0: off)
    certainty_weight: float = 0.0
    resume: bool = False
    resume_stable: bool = False  # with resume: continue from RUN/checkpoint-stable (a wsd run before its decay)
    progress: bool = True
    hardware: str = field(default_factory=cpu_name)


def default_threads() -> int:
    return max(1, min(os.cpu_count() or 1, 2))
