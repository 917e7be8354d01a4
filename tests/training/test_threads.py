"""ThreadTuner: the thread count follows whichever count measured faster, and follows it again when the load
changes. The step times are given (a shared machine's speed cannot be set up in a test); the thread counts it
sets are torch's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch

from decoder.training.threads import ThreadTuner

TOKENS = 4096
# With window=2 and period=8 a trial of the other count runs at steps 9-10, 17-18, ...; tests read the state
# between trials.


@pytest.fixture(autouse=True)
def keep_torch_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def run_steps(tuner: ThreadTuner, steps: int, seconds_at: Callable[[int], float], log: list[str]) -> None:
    """`steps` steps, each taking seconds_at(the thread count it ran with)."""
    for _ in range(steps):
        tuner.record(TOKENS, seconds_at(torch.get_num_threads()), log.append)


def test_switches_to_one_thread_when_one_runs_faster() -> None:
    tuner, log = ThreadTuner(max_threads=2, window=2, period=8), []
    run_steps(tuner, 12, lambda threads: 1.0 if threads == 1 else 2.0, log)
    assert tuner.current == 1
    assert torch.get_num_threads() == 1
    assert log and log[0].startswith("threads 2 -> 1:")


def test_keeps_every_thread_when_that_runs_faster() -> None:
    tuner, log = ThreadTuner(max_threads=2, window=2, period=8), []
    run_steps(tuner, 12, lambda threads: 2.0 / threads, log)
    assert tuner.current == 2
    assert torch.get_num_threads() == 2  # the trial of one thread ended and the faster count came back
    assert log == []
    assert tuner.trial == []


def test_goes_back_when_the_load_changes() -> None:
    tuner, log = ThreadTuner(max_threads=2, window=2, period=8), []
    run_steps(tuner, 12, lambda threads: 1.0 if threads == 1 else 2.0, log)  # another job holds a core
    assert tuner.current == 1
    run_steps(tuner, 10, lambda threads: 2.0 / threads, log)  # the other job has ended
    assert tuner.current == 2
    assert log[-1].startswith("threads 1 -> 2:")
