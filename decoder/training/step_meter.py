"""The train loop's running figures, for the progress bar and the log."""

from __future__ import annotations

import math
from typing import Any


class StepMeter:
    """The train loop's running figures: tokens/s over about the last minute of step time, and exponential
    moving averages of the losses (a single batch's loss is too noisy to read)."""

    WINDOW_S = 60.0
    LOSSES = ("loss", "ar", "masked", "certainty")

    def __init__(self) -> None:
        self.ema: dict[str, float] = {}
        self.tokens_per_s = 0.0
        self._tokens, self._seconds = 0, 0.0

    def record(self, out: dict[str, Any], tokens: int, seconds: float) -> None:
        self._tokens += tokens
        self._seconds += seconds
        for k in self.LOSSES:
            v = out[k]
            if not math.isnan(v):
                self.ema[k] = v if k not in self.ema else 0.95 * self.ema[k] + 0.05 * v
        self.tokens_per_s = self._tokens / max(self._seconds, 1e-9)
        if self._seconds > self.WINDOW_S:
            self._tokens, self._seconds = 0, 0.0

    def postfix(self, lr: float) -> dict[str, str]:
        """For the progress bar."""
        return {
            "loss": f"{self.ema.get('loss', 0):.3f}",
            "ar": f"{self.ema.get('ar', 0):.3f}",
            "masked": f"{self.ema.get('masked', float('nan')):.3f}",
            "tok_s": f"{self.tokens_per_s:.0f}",
            "lr": f"{lr:.1e}",
        }

    def summary(self, out: dict[str, Any]) -> str:
        """For the log, every 50 steps."""
        ema = self.ema
        return (
            f"loss {ema.get('loss', 0):.4f} ar {ema.get('ar', 0):.4f} masked {ema.get('masked', float('nan')):.4f} "
            + (f"certainty {ema['certainty']:.4f} " if "certainty" in ema else "")
            + f"lr {out['lr']:.2e} gnorm {out['grad_norm']:.2f} tok/s {self.tokens_per_s:.0f}"
        )
