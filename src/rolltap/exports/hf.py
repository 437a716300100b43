"""``rolltap sessions export --format hf``: a Hugging Face dataset, written in chunks.

The directory has the layout ``datasets.Dataset.save_to_disk`` writes: Arrow IPC stream
shards ``data-00000-of-000NN.arrow``, ``dataset_info.json`` (the features) and
``state.json``, so ``datasets.load_from_disk(DIR)`` opens it memory-mapped, with no copy
into a cache. Rows (one per rollout, :func:`rolltap.exports.hf_rows.rollout_row`) are
encoded in batches and a new shard starts past a size, so memory holds one batch and one
rollout's events whatever the run's size. The directory appears complete or not at all:
it is written beside ``DIR`` and renamed into place. Schema: ``docs/datasets-export.md``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from rolltap.errors import MissingExtraError
from rolltap.exports.hf_rows import drifted, rollout_row
from rolltap.exports.jsonl import iter_sessions
from rolltap.exports.token_drift import OnDrift
from rolltap.store import RunInfo, StoreValidationError, fetch_run, iter_event_rows, row_event

__all__ = [
    "DEFAULT_SHARD_BYTES",
    "SCHEMA_VERSION",
    "HfExport",
    "export_hf",
    "features",
    "require_hf",
]

#: version of the columns (docs/datasets-export.md); major bumped on incompatible changes
SCHEMA_VERSION = "1.1.0"
#: a new shard starts once the current one holds this many bytes
DEFAULT_SHARD_BYTES = 256 << 20
_BATCH_ROWS = 64
_EXAMPLES = 10  # warnings named in the report; the rest only counted
#: what a dataset does with a drifted rollout: its segments (split), or left out (drop)
_ON_DRIFT: tuple[OnDrift, ...] = ("split", "drop")


def require_hf() -> None:
    """:class:`MissingExtraError` unless the ``hf`` extra (``datasets``, pyarrow) is installed."""
    _datasets()


def _datasets() -> Any:
    """The ``datasets`` module (with pyarrow), or :class:`MissingExtraError`."""
    try:
        import datasets
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError.for_extra("hf", "datasets") from exc
    return datasets


def features() -> Any:
    """The export's ``datasets.Features``: every column typed, so a shard of nulls
    has the same schema as any other (docs/datasets-export.md)."""
    ds = _datasets()
    string, i64, f64 = ds.Value("string"), ds.Value("int64"), ds.Value("float64")
    tool_call = {"id": string, "type": string, "function": {"name": string, "arguments": string}}
    message = {"role": string, "content": string, "reasoning_content": string,
               "tool_calls": [tool_call], "tool_call_id": string, "name": string}  # fmt: skip
    span = {"version": string, "start": i64, "end": i64}
    sequence = {"prompt_ids": [i64], "completion_ids": [i64], "logprobs": [f64],
                "loss_mask": [ds.Value("int8")], "policy_versions": [span]}  # fmt: skip
    call = {"model": string, "dialect": string, "upstream_dialect": string,
            "stream": ds.Value("bool"), "status": i64, "finish_reason": string,
            "error_code": string, "prompt_tokens": i64, "completion_tokens": i64,
            "ttfc_ms": f64, "total_ms": f64}  # fmt: skip
    return ds.Features({
        "run_id": string, "run_name": string, "session_id": string, "task_id": string,
        "sample": i64, "task": string, "messages": [message], "answer": string,
        "reward": f64, "reward_components": [{"name": string, "value": f64}],
        "status": string, "error": string, "error_code": string, "limit": string,
        "usage": {"prompt_tokens": i64, "completion_tokens": i64, "total_tokens": i64},
        "calls": [call],
        "timing": {"created_at": f64, "updated_at": f64, "duration_s": f64, "model_ms": f64},
        "metadata": {"user": string, "forked_from": string, "fork_at": i64, "n_events": i64,
                     "warnings": [string]},
        **sequence,
        "segments": [sequence],
        "continued": i64,
    })  # fmt: skip


@dataclass(slots=True)
class HfExport:
    """What :func:`export_hf` wrote."""

    exported: int = 0
    #: rollouts that had token records (the others' token columns are null)
    with_tokens: int = 0
    shards: int = 0
    #: rollouts with ``metadata.warnings``, and the first few warnings as ``session: text``
    warned: int = 0
    warnings: list[str] = field(default_factory=list)
    #: rollouts with a drifted turn that ``on_drift="drop"`` left out
    dropped: list[str] = field(default_factory=list)

    def report(self) -> list[str]:
        """The lines the CLI prints to stderr."""
        lines = [f"exported {self.exported} rollout(s) ({self.with_tokens} with token records) "
                 f"in {self.shards} shard(s)"]  # fmt: skip
        if self.dropped:
            lines.append(f"{len(self.dropped)} rollout(s) with token drift (left out; "
                         "--on-drift drop)")  # fmt: skip
        if self.warned:
            lines.append(f"{self.warned} rollout(s) with warnings (metadata.warnings):")
            lines += [f"  {w}" for w in self.warnings]
        return lines


class _Shards:
    """Arrow stream files in ``directory``; a new one once the current passes ``max_bytes``."""

    def __init__(self, directory: Path, schema: Any, max_bytes: int) -> None:
        import pyarrow as pa

        self._pa, self._dir, self._schema, self._max = pa, directory, schema, max_bytes
        self.paths: list[Path] = []
        self.nbytes = 0
        self._sink: Any = None
        self._writer: Any = None

    def write(self, rows: list[dict[str, Any]]) -> None:
        if self._writer is None:
            self._open()
        self._writer.write_batch(self._pa.RecordBatch.from_pylist(rows, schema=self._schema))
        if self._sink.tell() >= self._max:
            self._close()

    def close(self) -> None:
        if not self.paths:
            self._open()  # no rows: one empty shard, so the dataset still has its schema
        self._close()

    def _open(self) -> None:
        self.paths.append(self._dir / f"shard-{len(self.paths):05d}.part")
        self._sink = self._pa.OSFile(str(self.paths[-1]), "wb")
        self._writer = self._pa.ipc.new_stream(self._sink, self._schema)

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self.nbytes += self._sink.tell()
            self._sink.close()
        self._writer = self._sink = None


def _target(dest: Path) -> None:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise StoreValidationError(f"{dest} exists and is not an empty directory")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreValidationError(f"cannot create {dest.parent}: {exc.strerror}") from exc


def _publish(work: Path, target: Path) -> None:
    if target.exists():
        target.rmdir()  # empty, checked before writing; rename needs the name free
    os.replace(work, target)


def _finish(directory: Path, shards: _Shards, feats: Any) -> int:
    """Name the shards as ``save_to_disk`` does and write the two JSON files beside them."""
    ds = _datasets()
    total = len(shards.paths)
    names = [f"data-{i:05d}-of-{total:05d}.arrow" for i in range(total)]
    for path, name in zip(shards.paths, names, strict=True):
        path.rename(directory / name)
    state: dict[str, Any] = {
        "_data_files": [{"filename": name} for name in names],
        "_fingerprint": secrets.token_hex(8),  # an export is new data: never a cache hit
        "_format_columns": None, "_format_kwargs": {}, "_format_type": None,
        "_output_all_columns": False, "_split": None,
    }  # fmt: skip
    (directory / "state.json").write_bytes(orjson.dumps(state, option=orjson.OPT_INDENT_2))
    info = ds.DatasetInfo(
        description=f"rolltap rollouts, one row per rollout (schema {SCHEMA_VERSION}, "
        "docs/datasets-export.md)", features=feats, dataset_name="rolltap",
        version=SCHEMA_VERSION, dataset_size=shards.nbytes,
    )  # fmt: skip
    info.write_to_directory(str(directory))
    return total


async def export_hf(
    conn: AsyncConnection,
    dest: str | Path,
    *,
    run: str | None,
    session: str | None,
    max_shard_bytes: int = DEFAULT_SHARD_BYTES,
    batch_rows: int = _BATCH_ROWS,
    on_drift: OnDrift = "split",
) -> HfExport:
    """Write the sessions (all, ``run``'s, or just ``session``) as a dataset directory
    ``dest`` (absent or empty) that ``datasets.load_from_disk(dest)`` opens; with
    ``on_drift="drop"`` the rollouts with a drifted turn are left out (``dropped``). A
    dataset of no rows is still one: its schema in one empty shard.

    Raises :class:`MissingExtraError` without ``datasets``/``pyarrow`` (the ``hf`` extra),
    :class:`StoreValidationError` when ``dest`` is a file or a non-empty directory, or for
    ``on_drift="keep"`` (one sequence with its drift marked: the tokens format's alone).
    """
    if on_drift not in _ON_DRIFT:
        raise StoreValidationError(
            f"on_drift must be one of {', '.join(_ON_DRIFT)} for a dataset (keep: the "
            "tokens format only)"
        )
    feats = features()
    target = Path(dest)
    _target(target)
    if run is not None:
        await fetch_run(conn, run)  # StoreNotFoundError for an unknown run
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        result = await _write(
            conn, work, feats, run, session, on_drift, max_shard_bytes, batch_rows
        )
        _publish(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)  # no half-written dataset is left behind
        raise
    return result


async def _write(
    conn: AsyncConnection, work: Path, feats: Any, run: str | None, session: str | None,
    on_drift: OnDrift, max_shard_bytes: int, batch_rows: int,
) -> HfExport:  # fmt: skip
    result = HfExport()
    shards = _Shards(work, feats.arrow_schema, max_shard_bytes)
    runs: dict[str, RunInfo] = {}
    batch: list[dict[str, Any]] = []
    async for info in iter_sessions(conn, run, session):
        events = [row_event(*row) async for row in iter_event_rows(conn, info)]
        if on_drift == "drop" and drifted(events):
            result.dropped.append(info.id)
            continue
        if info.run_id not in runs:
            runs[info.run_id] = await fetch_run(conn, info.run_id)
        row = rollout_row(info, runs[info.run_id], events)
        _count(result, row)
        batch.append(row)
        if len(batch) >= batch_rows:
            shards.write(batch)
            batch = []
    if batch:
        shards.write(batch)
    shards.close()
    result.shards = _finish(work, shards, feats)
    return result


def _count(result: HfExport, row: dict[str, Any]) -> None:
    result.exported += 1
    result.with_tokens += row["segments"] is not None
    warnings = row["metadata"]["warnings"]
    if warnings:
        result.warned += 1
        room = _EXAMPLES - len(result.warnings)
        result.warnings += [f"{row['session_id']}: {w}" for w in warnings[: max(room, 0)]]
