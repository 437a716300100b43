"""Sampling a process's RSS (and open files) over time, trends, and plots."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from _plots import pyplot

__all__ = ["OUT", "Churn", "Sampler", "Series", "measure_churn", "plot_series", "slope"]

OUT = Path(__file__).parent / "out"
MB = 1024 * 1024


@dataclass
class Series:
    """(seconds since start, RSS bytes, open files) samples of one process."""

    label: str
    t: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    files: list[int] = field(default_factory=list)

    def since(self, t0: float) -> list[int]:
        return [r for t, r in zip(self.t, self.rss, strict=True) if t >= t0]

    def recent(self, seconds: float) -> float:
        """Median RSS (bytes) over the last ``seconds``."""
        last = self.t[-1]
        return statistics.median(self.since(last - seconds))


class Sampler:
    """Samples one pid every ``period`` seconds on a thread (the measured loop is not ours)."""

    def __init__(self, pid: int, label: str, period: float = 0.1) -> None:
        self.proc = psutil.Process(pid)
        self.series = Series(label)
        self.period = period
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rss = self.proc.memory_info().rss
                files = self.proc.num_fds()
            except psutil.NoSuchProcess:
                return
            self.series.t.append(self.now())
            self.series.rss.append(rss)
            self.series.files.append(files)
            self._stop.wait(self.period)


def slope(values: Sequence[float]) -> float:
    """Least-squares slope per step (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    xs = range(len(values))
    mx, my = statistics.fmean(xs), statistics.fmean(values)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, values, strict=True)) / den


def plot_series(series: Sequence[Series], path: Path, title: str) -> None:
    """RSS (MB) over time, one line per series; skipped without matplotlib."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for s in series:
        ax.plot(s.t, [r / MB for r in s.rss], label=s.label, linewidth=1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds")
    ax.set_ylabel("worker RSS, MB")
    ax.set_title(title)
    ax.legend()
    ax.grid(True, alpha=0.3)
    OUT.mkdir(exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"\nplot: {path}")


@dataclass
class Churn:
    """RSS (MB) of one process across waves: after the warm-up, and each wave's peak and
    resting level (read after ``rest`` seconds idle, the trims' cadence)."""

    baseline: float = 0.0
    wave_peaks: list[float] = field(default_factory=list)
    resting: list[float] = field(default_factory=list)


async def measure_churn(
    sampler: Sampler,
    warm_up: Callable[[], Awaitable[None]],
    wave: Callable[[], Awaitable[None]],
    *,
    waves: int,
    rest: float,
    label: str,
) -> Churn:
    """Run ``warm_up`` then ``waves`` × ``wave`` while ``sampler`` samples; the readings."""
    out = Churn()
    await warm_up()
    await asyncio.sleep(rest)  # idle for the trims: nothing to wait on but time
    out.baseline = sampler.series.recent(1.0) / MB
    for index in range(waves):
        start = sampler.now()
        await wave()
        await asyncio.sleep(rest)
        out.wave_peaks.append(max(sampler.series.since(start)) / MB)
        out.resting.append(sampler.series.recent(1.0) / MB)
        print(f"  {label}: wave {index + 1}: peak {out.wave_peaks[-1]:.0f} MB, "
              f"resting {out.resting[-1]:.0f} MB", flush=True)  # fmt: skip
    return out
