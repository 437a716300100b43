"""A rollout's own directories for an agent: a working directory and a fresh home.

Each agent rollout gets, under one temporary root (``rolltap-agent-*`` in the system's
temporary directory), removed when the rollout ends:

* ``work/`` — the agent's working directory, holding the task's ``files``;
* ``home/`` — its ``HOME`` (and ``XDG_*`` directories): no user configuration,
  credentials, history or session files are read from the user's home, and nothing the
  agent writes there outlives the rollout;
* ``tmp/`` — its ``TMPDIR``.

The agent's environment is built from nothing (:func:`isolated_env`): only the locale,
``PATH`` and a few harmless variables are taken from rolltap's, so no credential or
configuration variable (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``CODEX_HOME``,
``CLAUDE_CONFIG_DIR``, proxies …) of the user leaks in.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Workspace", "isolated_env", "place_files", "workspace"]

#: what an agent's environment takes from rolltap's (nothing that configures or
#: authenticates anything); ``LC_*`` too
PASSED_THROUGH = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "SHELL", "USER", "LOGNAME")


@dataclass(frozen=True, slots=True)
class Workspace:
    """One rollout's directories (see the module docstring)."""

    root: Path

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"


def place_files(directory: Path, files: Mapping[str, str]) -> None:
    """Write each ``relative path -> content`` under ``directory`` (paths were checked
    when the task was loaded: relative, no ``..``). Blocking."""
    for relative, content in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def _create(files: Mapping[str, str]) -> Workspace:
    space = Workspace(Path(tempfile.mkdtemp(prefix="rolltap-agent-")))
    for directory in (space.work, space.home, space.tmp):
        directory.mkdir()
    place_files(space.work, files)
    return space


@asynccontextmanager
async def workspace(files: Mapping[str, str]) -> AsyncIterator[Workspace]:
    """A fresh :class:`Workspace` with ``files`` in its working directory, removed on the
    way out (disk work runs off the event loop)."""
    space = await asyncio.to_thread(_create, files)
    try:
        yield space
    finally:
        # an agent may leave read-only files (a module cache): remove what can be
        await asyncio.to_thread(shutil.rmtree, space.root, True)


def isolated_env(space: Workspace, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for a process of the rollout: ``PATH`` and the locale from rolltap's,
    ``HOME``, ``XDG_*`` and ``TMPDIR`` in the workspace, then ``extra``."""
    env = {k: v for k, v in os.environ.items() if k in PASSED_THROUGH or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    home = str(space.home)
    env.update(
        HOME=home,
        TMPDIR=str(space.tmp),
        XDG_CONFIG_HOME=os.path.join(home, ".config"),
        XDG_CACHE_HOME=os.path.join(home, ".cache"),
        XDG_DATA_HOME=os.path.join(home, ".local", "share"),
        XDG_STATE_HOME=os.path.join(home, ".local", "state"),
    )
    env.update(extra or {})
    return env
