"""Small statistics for benchmark reports: percentiles and the log-log fit of a latency curve."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 1]); nan for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass(frozen=True)
class PowerFit:
    """y = coefficient * x ** exponent, fitted by least squares on log y vs log x."""

    exponent: float
    coefficient: float
    r2: float

    def to_json(self) -> dict[str, float]:
        return {"exponent": round(self.exponent, 4), "coefficient": round(self.coefficient, 4), "r2": round(self.r2, 4)}


def loglog_fit(xs: list[float], ys: list[float]) -> PowerFit:
    """Exponent of a power law through (x, y): 1.0 is linear growth, below 1 sublinear."""
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pairs) < 2:
        return PowerFit(float("nan"), float("nan"), float("nan"))
    lx, ly = zip(*pairs, strict=True)
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    if sxx == 0:
        return PowerFit(float("nan"), float("nan"), float("nan"))
    slope = sum((x - mx) * (y - my) for x, y in pairs) / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ly)
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in pairs)
    r2 = 1.0 - ss_res / ss_tot if ss_tot else 1.0
    return PowerFit(slope, math.exp(intercept), r2)
