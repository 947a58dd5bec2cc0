"""Wall-clock timing that notices other processes on a small, shared machine.

On a 2-core box another process's burst doubles a measurement, so every sample also records how much CPU the
*rest* of the machine used while it ran (``/proc/stat`` busy time minus this process's own time). Samples taken
while others used more than ``quiet`` of the cores are retried; if the machine never quietens the fastest
samples are used and the result says so.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy() -> float | None:
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except OSError:
        return None
    return (sum(fields) - fields[3] - fields[4]) / _TICK  # all time minus idle and iowait, in seconds


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass(frozen=True)
class Timing:
    seconds: float  # median of the clean samples (or of the fastest ones when none was clean)
    samples: tuple[float, ...]
    clean: int  # how many samples ran while the rest of the machine was quiet
    foreign: float  # median share of the cores other processes used during the samples


def sample(fn: Callable[[], object]) -> tuple[float, float]:
    """One call: (wall seconds, share of all cores used by other processes meanwhile)."""
    cores = os.cpu_count() or 1
    b0, s0, t0 = _machine_busy(), _own_cpu(), time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    b1, s1 = _machine_busy(), _own_cpu()
    if b0 is None or b1 is None:
        return dt, 0.0
    return dt, max(0.0, ((b1 - b0) - (s1 - s0)) / (cores * dt))


def measure(fn: Callable[[], object], repeats: int = 3, max_tries: int = 10, quiet: float = 0.1,
            give_up: float | None = None) -> Timing:
    """Median wall time of ``repeats`` calls made while the rest of the machine was quiet.

    ``give_up``: stop at the first sample slower than this many seconds (a candidate clearly slower than the
    best one so far needs no precise figure)."""
    clean: list[float] = []
    every: list[tuple[float, float]] = []
    for _ in range(max(repeats, max_tries)):
        dt, foreign = sample(fn)
        every.append((dt, foreign))
        if foreign <= quiet:
            clean.append(dt)
        if len(clean) >= repeats or (give_up is not None and dt > give_up):
            break
    chosen = clean if clean else sorted(dt for dt, _ in every)[:repeats]
    return Timing(
        statistics.median(chosen),
        tuple(dt for dt, _ in every),
        len(clean),
        statistics.median(f for _, f in every),
    )


def alternate(fns: dict[str, Callable[[], object]], rounds: int = 3, quiet: float = 0.1) -> dict[str, Timing]:
    """Time several callables in turns (a, b, a, b, …) so that drifting load hits them alike."""
    per: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            per[name].append(sample(fn))
    out: dict[str, Timing] = {}
    for name, got in per.items():
        clean = [dt for dt, f in got if f <= quiet]
        chosen = clean if clean else sorted(dt for dt, _ in got)[: max(1, len(got) // 2)]
        out[name] = Timing(statistics.median(chosen), tuple(dt for dt, _ in got), len(clean),
                           statistics.median(f for _, f in got))
    return out
