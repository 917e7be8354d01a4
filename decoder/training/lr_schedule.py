"""The learning-rate schedule. Progress p in [0, 1] is the larger of step/max_steps and elapsed/time_budget, so a
run bounded by wall-clock time still anneals its rate to the end: after warmup, cosine over the whole run, or (wsd,
warmup-stable-decay) the peak rate until the last decay_fraction, then cosine down."""

from __future__ import annotations

import math

from decoder.training.config import TrainConfig

SCHEDULES = ("cosine", "wsd")


def decay_start(cfg: TrainConfig) -> float:
    """Progress at which the learning rate starts to fall: 0 for cosine, 1 - decay_fraction for wsd."""
    return 1.0 - cfg.decay_fraction if cfg.schedule == "wsd" else 0.0


def lr_at(cfg: TrainConfig, step: int, progress: float) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    start = decay_start(cfg)
    into_decay = max(0.0, min(1.0, progress) - start) / (1.0 - start)
    cos = 0.5 * (1 + math.cos(math.pi * into_decay))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cos)
