"""An eval set's file: several runs under one id (``rolltap eval-set SET.toml``).

::

    name = "nightly"
    mode = "sequential"          # or "parallel": every run at once
    c = 32                       # rollouts at once, shared by the runs in parallel
    retries = 2                  # retry passes of each run's failed rollouts
    retry_backoff_s = 5.0        # before pass k: retry_backoff_s * 2**(k-1) seconds
    store = "sqlite:///rolltap.db"

    [defaults]                   # under every run (a run's own keys win)
    harness = "chat"
    endpoint = "http://127.0.0.1:8000/v1"

    [[runs]]                     # a run config, as `rolltap eval --config` reads one
    name = "patterns-prefix"
    tasks = "patterns.jsonl"     # relative to this file
    rewards = ["prefix"]

A run's ``store`` is the set's; its ``name`` defaults to ``SET#K`` (K from 1). Every run
is checked before anything is stored.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "set.toml"
>>> text = 'name = "s"\\n[[runs]]\\ntasks = "t.jsonl"\\n[[runs]]\\ntasks = "u.jsonl"\\nr = 2'
>>> _ = path.write_text(text)
>>> config, runs = load_eval_set(path)
>>> [(run.name, run.r, run.set_index) for run in runs]
[('s#1', 1, 0), ('s#2', 2, 1)]
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rolltap.errors import ConfigError
from rolltap.results.attempts import check_codes
from rolltap.rollouts.config import RunConfig, describe_errors, read_toml

__all__ = ["EvalSetConfig", "load_eval_set", "run_configs", "set_doc", "set_from_doc"]

#: run-config keys a set decides for all its runs
_THE_SETS = ("store", "set_id", "set_index")


class EvalSetConfig(BaseModel):
    """An eval set (see the module docs): its runs, how they run, how often failed
    rollouts are retried. Stored with the set, so ``--resume SET`` needs no file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = None
    mode: Literal["sequential", "parallel"] = "sequential"
    #: rollouts at once: each run's ``c`` when sequential; in parallel, one pool of
    #: places shared by the runs, so the set never has more in flight
    c: int | None = Field(default=None, gt=0)
    retries: int = Field(default=0, ge=0)
    retry_backoff_s: float = Field(default=5.0, ge=0)
    #: the error codes a retry pass reruns (None: every failed rollout)
    retry_codes: list[str] | None = None
    store: str | None = None
    defaults: dict[str, Any] = Field(default_factory=dict)
    runs: list[dict[str, Any]] = Field(min_length=1)

    @field_validator("retry_codes")
    @classmethod
    def _known_codes(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else check_codes(value)

    def label(self, index: int) -> str:
        """The default name of run ``index`` (0-based)."""
        return f"{self.name or 'set'}#{index + 1}"


def _explain(exc: ValidationError, known: Iterable[str]) -> str:
    """:func:`describe_errors`, and for a top-level key nobody knows the known ones near it
    (a typo in a set file is the likeliest mistake in it)."""
    said, names = describe_errors(exc), list(known)
    for error in exc.errors():
        if error["type"] != "extra_forbidden" or len(error["loc"]) != 1:
            continue
        key = str(error["loc"][0])
        near = difflib.get_close_matches(key, names, n=1)
        if near:
            said += f"; {key}: did you mean {near[0]!r}?"
    return said


def _run(config: EvalSetConfig, index: int, base: Path | None, where: str) -> RunConfig:
    entry = {**config.defaults, **config.runs[index]}
    said = entry.get("name")
    what = f"{where}: runs[{index}]" + (f" ({said})" if isinstance(said, str) else "")
    for key in _THE_SETS:
        if key in entry:
            raise ConfigError(f"{what}: {key!r} is the set's, not a run's (set it at the top)")
    tasks = entry.get("tasks")
    if base is not None and isinstance(tasks, str) and not Path(tasks).is_absolute():
        entry["tasks"] = str(base / tasks)
    entry.setdefault("name", config.label(index))
    try:
        return RunConfig.model_validate({**entry, "store": config.store, "set_index": index})
    except ValidationError as exc:
        raise ConfigError(f"{what}: {_explain(exc, RunConfig.model_fields)}") from exc


def run_configs(
    config: EvalSetConfig, base: Path | None = None, where: str = "eval set"
) -> list[RunConfig]:
    """Each run's config: ``defaults`` under it, the set's store, a relative ``tasks``
    resolved against ``base``; a ConfigError names the run and the key."""
    return [_run(config, index, base, where) for index in range(len(config.runs))]


def _validate(data: dict[str, Any], where: str) -> EvalSetConfig:
    try:
        return EvalSetConfig.model_validate(data)
    except ValidationError as exc:
        problems = _explain(exc, EvalSetConfig.model_fields)
        raise ConfigError(f"invalid eval set ({where}): {problems}") from exc


def load_eval_set(
    path: str | Path, overrides: dict[str, Any] | None = None
) -> tuple[EvalSetConfig, list[RunConfig]]:
    """Read and check an eval set file (``overrides``: flags over its fields)."""
    file = Path(path)
    data = read_toml(file, "eval set")
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    config = _validate(data, str(file))
    return config, run_configs(config, file.parent, str(file))


def set_doc(config: EvalSetConfig, runs: list[RunConfig]) -> dict[str, Any]:
    """What the store keeps of a set: its fields and each run's whole config."""
    return {"set": config.model_dump(mode="json"),
            "runs": [run.model_dump(mode="json") for run in runs]}  # fmt: skip


def set_from_doc(
    doc: dict[str, Any], overrides: dict[str, Any] | None = None
) -> tuple[EvalSetConfig, list[RunConfig]]:
    """A stored set back (:func:`set_doc`), ``overrides`` over its fields."""
    data = {**doc.get("set", {}), **{k: v for k, v in (overrides or {}).items() if v is not None}}
    config = _validate(data, "stored")
    try:
        runs = [RunConfig.model_validate(run) for run in doc.get("runs", [])]
    except ValidationError as exc:
        raise ConfigError(f"stored eval set: {describe_errors(exc)}") from exc
    return config, [run.model_copy(update={"store": config.store}) for run in runs]
