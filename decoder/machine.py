"""The machine a measurement ran on. Every benchmark, evaluation and training report records it, because a
timing means little without the CPU (or GPU) that produced it and how loaded that machine was."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import torch

CPUINFO = Path("/proc/cpuinfo")


def cpu_name(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (Linux's /proc/cpuinfo); else what `platform` knows, often only the architecture."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages; None where the OS has none (Windows)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def machine_info() -> dict[str, Any]:
    """What to record beside a measurement: CPU, core count, GPU if any, software versions, load at this moment."""
    return {
        "cpu": cpu_name(),
        "cpus": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_average": load_average(),
    }
