"""What templates show: formatted numbers and times, redacted documents, run cells.

Pure functions; the templates call them as filters (:data:`FILTERS`) and globals.

>>> fmt_num(0.66666), fmt_num(12345), fmt_num(None)
('0.667', '12,345', '–')
>>> redact({"store": "postgresql://u:pw@db/x", "headers": {"Authorization": "Bearer s"}})
{'store': 'postgresql://u:•••@db/x', 'headers': {'Authorization': '•••'}}
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import orjson

from rolltap.results.figures import fmt_ms
from rolltap.store import RunRow
from rolltap.version import __version__

__all__ = [
    "FILTERS",
    "GLOBALS",
    "fmt_num",
    "logprob_colour",
    "redact",
    "run_cells",
]

_HIDDEN = "•••"
_SECRET_KEY = re.compile(r"(key|token|secret|password|passwd|authorization|cookie)", re.I)
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")
UNFINISHED = ("pending", "running")


def fmt_num(value: Any, digits: int = 3) -> str:
    """A number for a table: ints with separators, floats to ``digits`` places."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:,.{digits}f}".rstrip("0").rstrip(".") if value else "0"
    return str(value)


def fmt_time(epoch: float | None) -> str:
    """Local date and time to the second."""
    if epoch is None:
        return "–"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 1:
        return fmt_ms(seconds * 1000)
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def redact(value: Any, key: str = "") -> Any:
    """``value`` with what may be a credential hidden: values under secret-sounding keys
    (``*_env`` names are kept: they name a variable, not its value), every header
    value, and URL passwords."""
    if isinstance(value, Mapping):
        if key.lower() == "headers":
            return {k: _HIDDEN for k in value}
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, key) for v in value]
    if key and _SECRET_KEY.search(key) and not key.lower().endswith("_env") and value:
        return _HIDDEN
    if isinstance(value, str):
        return _URL_PASSWORD.sub(rf"\g<1>{_HIDDEN}@", value)
    return value


def pretty_json(value: Any) -> str:
    """Indented JSON of ``value``, redacted."""
    return orjson.dumps(redact(value), option=orjson.OPT_INDENT_2, default=str).decode()


def logprob_colour(logprob: float | None) -> str:
    """A background for a sampled token: green when likely, through amber, to red."""
    if logprob is None:
        return "hsl(0, 0%, 85%)"
    p = math.exp(max(min(logprob, 0.0), -50.0))
    return f"hsl({120 * p:.0f}, 70%, 78%)"


def _reward_text(reward: Mapping[str, Any]) -> str:
    mean, ci = reward.get("mean"), reward.get("ci95")
    if mean is None:
        return "–"
    if ci and int(reward.get("n") or 0) > 1:
        return f"{fmt_num(mean)} ± {fmt_num((ci[1] - ci[0]) / 2)}"
    return fmt_num(mean)


def _pass_text(summary: Mapping[str, Any]) -> str:
    passes = summary.get("pass_at_k") or {}
    return ", ".join(f"{k} {fmt_num(v)}" for k, v in passes.items()) or "–"


def _config_value(config: Mapping[str, Any], name: str) -> str:
    run = config.get("run")
    if isinstance(run, Mapping) and run.get(name):
        return str(run[name])
    endpoint = config.get("endpoint")
    if isinstance(endpoint, Mapping) and endpoint.get(name):
        return str(endpoint[name])
    return "–"


def status_text(statuses: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in statuses.items()) or "none"


def run_cells(row: RunRow) -> dict[str, Any]:
    """One run as the Runs page and its live JSON show it."""
    summary, info = row.summary, row.info
    statuses: dict[str, int] = summary.get("statuses") or {}
    tokens = summary.get("tokens") or {}
    duration = (summary.get("duration_s") or {}).get("mean")
    return {
        "id": info.id,
        "name": info.name or info.id[:12],
        "created": fmt_time(info.created_at),
        "harness": _config_value(info.config, "harness"),
        "model": _config_value(info.config, "model"),
        "rollouts": fmt_num(summary.get("rollouts", info.n_sessions)),
        "statuses": status_text(statuses),
        # stored so by a later owner, or read so: the run's lease expired with them unfinished
        "interrupted": fmt_num(int(statuses.get("interrupted") or 0)),
        "reward": _reward_text(summary.get("reward") or {}),
        "pass": _pass_text(summary),
        "tokens": fmt_num(int(tokens.get("prompt") or 0) + int(tokens.get("completion") or 0)),
        "duration": fmt_duration(duration),
        "live": any(statuses.get(s) for s in UNFINISHED),
    }


def histogram_bars(
    hist: Mapping[str, Any], width: int = 300, height: int = 100
) -> list[dict[str, Any]]:
    """SVG rectangles (x, y, w, h, count, range label) of one binned histogram: its
    ``labels`` (fixed bins, see rolltap.store.rollup), else equal bins from lo to hi (the
    summaries stored before migration 0004)."""
    counts: list[int] = list(hist.get("counts") or [])
    if not counts:
        return []
    top = max(counts) or 1
    lo, hi = float(hist["lo"]), float(hist["hi"])
    step = (hi - lo) / len(counts) if hi > lo else 0.0
    labels = hist.get("labels") or [
        f"{fmt_num(lo + i * step)}–{fmt_num(lo + (i + 1) * step) if step else fmt_num(hi)}"
        for i in range(len(counts))
    ]
    bar = width / len(counts)
    out = []
    for i, count in enumerate(counts):
        h = height * count / top
        label = labels[i]
        out.append({"x": i * bar, "y": height - h, "w": max(bar - 1, 1), "h": h,
                    "count": count, "label": label})  # fmt: skip
    return out


def json_text(text: str) -> str:
    """JSON text (a tool call's arguments) indented when it parses, else as it came."""
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode()
    except orjson.JSONDecodeError:
        return text


def with_query(query: Mapping[str, Any], key: str, value: Any) -> str:
    """``query`` with ``key`` set to ``value`` (a page link), URL-encoded."""
    merged = {k: v for k, v in query.items() if k != key}
    if value not in ("", None):
        merged[key] = value
    return urlencode(merged)


def static(name: str) -> str:
    """The URL of a packaged asset, versioned so a new rolltap is not served stale ones."""
    return f"/static/{name}?v={__version__}"


FILTERS = {
    "num": fmt_num,
    "when": fmt_time,
    "duration": fmt_duration,
    "ms": functools.partial(fmt_ms, missing="–"),
    "pretty": pretty_json,
    "lpcolour": logprob_colour,
    "jsontext": json_text,
}
GLOBALS = {
    "histogram_bars": histogram_bars,
    "static": static,
    "status_text": status_text,
    "with_query": with_query,
}
