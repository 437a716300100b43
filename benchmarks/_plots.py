"""matplotlib for the benchmarks' PNGs, headless; None (said once) without the bench extra."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plot")
        return None
    return plt


def save(fig: Any, path: Path) -> None:
    """Lay ``fig`` out and write it to ``path`` (its folder made), saying where."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    print(f"wrote {path}")
