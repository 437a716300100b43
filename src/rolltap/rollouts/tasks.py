"""Task sets: JSONL (one JSON object a line) or Parquet (needs ``pyarrow``).

Each task has a ``prompt`` (a string) or ``messages`` (OpenAI chat messages), an
optional ``answer``, an optional ``info`` object, and an ``id`` (default: its 1-based
line or row number, as a string). For harnesses that work in a directory (the agent
kinds ``claude-code`` and ``codex``, and ``--cmd``) a task may also carry ``files``
(``{"relative/path": "content"}``, placed in the rollout's fresh working directory),
``check`` (a shell command run there after the harness exits: exit 0 scores 1.0, see
:mod:`rolltap.rollouts.agent_check`), ``check_timeout_s`` (default 60) and ``harness``
(agent flags over the run's ``[harness]`` table, see :class:`AgentOptions`).

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
>>> _ = path.write_text('{"prompt": "1, 2,", "answer": "3"}\\n')
>>> load_tasks(path)[0].id
'1'
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from rolltap.errors import ConfigError
from rolltap.rollouts.agent_options import AgentOptions, options_from

__all__ = ["Task", "load_tasks", "task_from_dict"]


@dataclass(frozen=True, slots=True)
class Task:
    """One task: what the harness is asked, and what the rewards compare against."""

    id: str
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    answer: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    #: files to place in the rollout's working directory: relative path -> content
    files: dict[str, str] = field(default_factory=dict)
    #: a shell command run in the working directory once the harness exits (reward)
    check: str | None = None
    check_timeout_s: float | None = None
    #: agent flags over the run's ``[harness]`` table
    harness: AgentOptions | None = None

    def chat_messages(self) -> list[dict[str, Any]]:
        """The task as chat messages: ``messages`` as given, else one user ``prompt``."""
        if self.messages is not None:
            return [dict(m) for m in self.messages]
        return [{"role": "user", "content": self.prompt or ""}]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (stored in each session's task)."""
        out: dict[str, Any] = {"id": self.id}
        if self.prompt is not None:
            out["prompt"] = self.prompt
        if self.messages is not None:
            out["messages"] = self.messages
        if self.answer is not None:
            out["answer"] = self.answer
        if self.info:
            out["info"] = self.info
        if self.files:
            out["files"] = self.files
        if self.check is not None:
            out["check"] = self.check
        if self.check_timeout_s is not None:
            out["check_timeout_s"] = self.check_timeout_s
        if self.harness is not None:
            out["harness"] = self.harness.model_dump(exclude_defaults=True)
        return out


def task_from_dict(row: Mapping[str, Any], default_id: str) -> Task:
    """Validate one row; raises ``ValueError`` naming the problem."""
    prompt, messages = row.get("prompt"), row.get("messages")
    if prompt is None and messages is None:
        raise ValueError("a task needs 'prompt' or 'messages'")
    if prompt is not None and not isinstance(prompt, str):
        raise ValueError("'prompt' must be a string")
    if messages is not None and not (
        isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
    ):
        raise ValueError("'messages' must be a list of objects")
    info = row.get("info") or {}
    if not isinstance(info, dict):
        raise ValueError("'info' must be an object")
    answer = row.get("answer")
    raw_id = row.get("id", default_id)
    check, check_timeout = row.get("check"), row.get("check_timeout_s")
    if check is not None and not (isinstance(check, str) and check.strip()):
        raise ValueError("'check' must be a non-empty string (a shell command)")
    if check_timeout is not None and not _positive(check_timeout):
        raise ValueError("'check_timeout_s' must be a positive number")
    return Task(
        id=str(raw_id),
        prompt=prompt,
        messages=messages,
        answer=None if answer is None else str(answer),
        info=info,
        files=_files(row.get("files")),
        check=check,
        check_timeout_s=None if check_timeout is None else float(check_timeout),
        harness=options_from(row.get("harness"), "harness"),
    )


def _positive(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and value > 0


def _files(value: object) -> dict[str, str]:
    """``files`` checked: each path relative, inside the working directory, its content a
    string (so a task can never write outside the rollout's directory)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("'files' must be an object: relative path -> content")
    for path, content in value.items():
        parts = PurePosixPath(path).parts
        bad = not parts or "\0" in path or path.startswith("/") or path.endswith("/")
        if bad or ".." in parts:
            raise ValueError(f"'files': {path!r} must be a relative path inside the directory")
        if not isinstance(content, str):
            raise ValueError(f"'files': the content of {path!r} must be a string")
    return dict(value)


def _jsonl_rows(path: Path) -> Iterable[tuple[int, Any]]:
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read tasks file {path}: {exc.strerror}") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number}: invalid JSON: {exc}") from exc


def _parquet_rows(path: Path) -> Iterable[tuple[int, Any]]:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise ConfigError(f"{path}: reading Parquet needs pyarrow: pip install pyarrow") from exc
    try:
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read Parquet tasks file {path}: {exc}") from exc
    # Columns are shared by every row, so a row without a field reads it as null:
    # a null column means "absent", as a missing key does in JSONL.
    return enumerate(({k: v for k, v in row.items() if v is not None} for row in rows), start=1)


def load_tasks(
    path: str | Path, *, n: int | None = None, shuffle: bool = False, seed: int = 0
) -> list[Task]:
    """Load tasks; ``shuffle`` (seeded) first, then keep the first ``n``.

    Raises :class:`~rolltap.errors.ConfigError` naming the file and line of a bad row,
    or a duplicate id.
    """
    file = Path(path)
    rows = _parquet_rows(file) if file.suffix == ".parquet" else _jsonl_rows(file)
    tasks: list[Task] = []
    seen: set[str] = set()
    for number, row in rows:
        if not isinstance(row, dict):
            raise ConfigError(f"{file}:{number}: a task must be a JSON object")
        try:
            task = task_from_dict(row, str(number))
        except ValueError as exc:
            raise ConfigError(f"{file}:{number}: {exc}") from exc
        if task.id in seen:
            raise ConfigError(f"{file}:{number}: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise ConfigError(f"{file}: no tasks")
    if shuffle:
        random.Random(seed).shuffle(tasks)
    return tasks if n is None else tasks[:n]
