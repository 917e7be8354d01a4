"""The CPU thread count of a training run, chosen by measurement while it runs (`--adaptive-threads`)."""

from __future__ import annotations

from collections.abc import Callable

import torch


class ThreadTuner:
    """Chooses the CPU thread count by measurement, again and again.

    On a shared machine (other jobs, `nice 19`) two OpenMP threads can run slower than one: a step waits at
    every parallel region for the thread the scheduler parked. So: run `window` steps at the current
    count, every `period` steps try the other counts for `window` steps each, keep the fastest."""

    def __init__(self, max_threads: int, window: int = 8, period: int = 120) -> None:
        self.options = list(range(1, max_threads + 1))
        self.window, self.period = window, period
        self.current = max_threads
        self.trial: list[int] = []
        self.rates: dict[int, float] = {}
        self.steps = self.acc_tokens = 0
        self.acc_time = 0.0
        torch.set_num_threads(self.current)

    def record(self, tokens: int, seconds: float, log: Callable[[str], None]) -> None:
        self.steps += 1
        if self.steps <= 2:  # first steps include one-off setup
            return
        self.acc_tokens += tokens
        self.acc_time += seconds
        if self.steps % self.window:
            return
        rate = self.acc_tokens / max(self.acc_time, 1e-9)
        self.acc_tokens, self.acc_time = 0, 0.0
        self.rates[torch.get_num_threads()] = rate
        if self.trial:
            torch.set_num_threads(self.trial.pop(0))
            return
        if (self.steps // self.window) % max(1, self.period // self.window) == 0 and len(self.options) > 1:
            self.trial = [n for n in self.options if n != self.current]
            torch.set_num_threads(self.trial.pop(0))
            return
        if torch.get_num_threads() != self.current or len(self.rates) == len(self.options):
            best = max(self.rates, key=self.rates.get)  # type: ignore[arg-type]
            if best != self.current:
                log(
                    f"threads {self.current} -> {best}: "
                    + ", ".join(f"{n}: {r:.0f} tok/s" for n, r in sorted(self.rates.items()))
                )
            self.current = best
            self.rates.clear()
            torch.set_num_threads(self.current)
