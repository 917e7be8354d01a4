"""Run `parafill eval`'s rows in several processes.

A row is one task kind under one decoder configuration, over all its tasks. A job is a run of rows of one kind
that share their tasks: each task is prefilled once and decoded by each of the job's configurations in turn
(decoder/evaluation/runner.py run_configs), and jobs do not depend on each other. So N worker processes, each with
its own engine, take jobs from a queue, and the report is assembled in the order a one-process run would write it.
Each worker keeps the engine's own thread count (one for models under 50M parameters) unless that would
oversubscribe the cores. In fp32 a row comes out the same either way; its latencies do not, since the processes
share the machine.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import torch
from tqdm import tqdm

from decoder.engine import Engine
from decoder.evaluation.runner import DecodeConfig, run_configs
from decoder.evaluation.tasks import ExplainTask, InfillTask


@dataclass(frozen=True)
class RowJob:
    kind: str
    tasks: list[InfillTask] | list[ExplainTask]
    configs: tuple[DecodeConfig, ...]
    max_new_tokens: dict[str, int]
    token_healing: bool
    fallback_window: int
    defer_repeats: bool = False

    def run(self, engine: Engine, progress: bool = True) -> list[dict]:
        """The job's rows, one per configuration, in order."""
        return run_configs(
            engine,
            self.tasks,
            list(self.configs),
            self.max_new_tokens,
            self.token_healing,
            self.fallback_window,
            progress,
            self.defer_repeats,
        )


def split_configs(configs: list[DecodeConfig], parts: int) -> list[tuple[DecodeConfig, ...]]:
    """`configs` in at most `parts` runs of consecutive configurations, as equal in length as they go: one job
    each, so that every process has work and each task is prefilled once per job."""
    parts = max(1, min(parts, len(configs)))
    size, extra = divmod(len(configs), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(tuple(configs[start:end]))
        start = end
    return out


_worker_engine: Engine | None = None  # one per worker process, opened by _start_worker


def worker_threads(engine_threads: int, cores: int, processes: int) -> int:
    """The engine's choice, capped at this worker's share of the cores."""
    return max(1, min(engine_threads, cores // processes))


def _start_worker(open_engine: Callable[[], Engine], cores: int, processes: int) -> None:
    global _worker_engine
    _worker_engine = open_engine()  # sets the engine's thread count (decoder/engine.py)
    torch.set_num_threads(worker_threads(torch.get_num_threads(), cores, processes))


def _run_in_worker(job: RowJob) -> list[dict]:
    assert _worker_engine is not None, "worker started without an engine"
    return job.run(_worker_engine, progress=False)


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_rows(
    jobs: list[RowJob],
    processes: int,
    open_engine: Callable[[], Engine],
    on_row: Callable[[RowJob, dict], None] = lambda job, row: None,
) -> list[list[dict]]:
    """The rows of each of `jobs`, in their order, computed by `processes` workers (each opening its engine with
    the picklable `open_engine`; no more threads than cores). `on_row` sees each row as its job finishes. A
    worker's error is raised at once: the jobs still queued are cancelled."""
    # spawn, not fork: a forked child of a process whose OpenMP threads have run can hang in its first matmul.
    context = multiprocessing.get_context("spawn")
    rows: list[list[dict] | None] = [None] * len(jobs)
    initargs = (open_engine, available_cores(), processes)
    with ProcessPoolExecutor(processes, context, initializer=_start_worker, initargs=initargs) as pool:
        pending = {pool.submit(_run_in_worker, job): i for i, job in enumerate(jobs)}
        try:
            for done in tqdm(as_completed(pending), total=len(jobs), desc=f"jobs, {processes} processes", leave=False):
                i = pending[done]
                rows[i] = done.result()
                for row in rows[i]:
                    on_row(jobs[i], row)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return [job_rows for job_rows in rows if job_rows is not None]
