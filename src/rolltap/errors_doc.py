"""The exception tree drawn, and ``docs/errors.md`` written, from the classes themselves.

``python -m rolltap.errors_doc --tree`` draws the tree that :mod:`rolltap.errors`'s
docstring shows; ``python -m rolltap.errors_doc --markdown > docs/errors.md`` writes the
error reference. Both first import every rolltap module (:func:`load_all`), so each
exception is in the tree wherever it is defined; ``tests/test_errors.py`` checks that the
docstring and the doc are what these print.

>>> from rolltap.errors import PoolError
>>> print(tree(PoolError))
PoolError
├── ModelPoolClosedError
├── ModelPoolFullError
└── PoolCloseError
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
from collections.abc import Iterator, Sequence

import rolltap
from rolltap.errors import RolltapError, UpstreamStatusError

__all__ = ["children", "group_of", "load_all", "markdown", "meaning", "tree", "walk"]

Family = type[RolltapError]

_INTRO = """\
# Errors

Every error rolltap raises derives from `rolltap.RolltapError` and carries a stable
`code` (it never changes meaning), the HTTP status the gateway or `rolltap serve`
answers with, and the exit status of a command it ends. On HTTP routes the error comes
in the route's dialect: OpenAI shape `{"error": {"message", "type", "code", "param"?}}`
on chat and Responses routes, Anthropic shape `{"type": "error", "error": {"type",
"message", "code"}}` on Messages routes; an error after a stream has started comes
in-band, in the stream's own error event. On the command line it is one line on
stderr, `error [code] message`, sometimes followed by one `hint: …` line.

Framing errors that aiohttp's own HTTP parser answers before rolltap sees a request (a
request line or header over 8190 bytes, more than 128 headers, broken chunking, a
contradictory `Content-Length`) are a plain-text `400` without a code.

This page is generated from `src/rolltap/errors.py` and the classes' docstrings:
`python -m rolltap.errors_doc --markdown > docs/errors.md`.
"""

_EXITS = """\
## Exit codes

| command | exit | when |
|---|---|---|
| every command | 2 | a usage error or configuration mistake: `UsageError` and below (exit 2 in the table above) |
| every command | 1 | any other error (exit 1 in the table above) |
| `eval` | 0 | at least one rollout ended `completed` or `limit_reached` and no store commit failed |
| `eval` | 1 | no rollout completed (`error [run_failed] no rollout completed (upstream_unreachable × 8)`), or a store commit failed |
| `eval` | 130 / 143 | stopped by SIGINT (Ctrl-C) / SIGTERM: rollouts in flight end `cancelled`, the store is flushed; finish with `--resume RUN` |
| `gateway`, `serve`, `local-model` | 0 | stopped by SIGINT or SIGTERM after a clean drain |
| `gateway`, `serve` | 1 | the drain timed out (`drain_timeout`) or a store commit failed |
| every command | 128 + N | a second signal N during shutdown: stopped at once |
"""  # noqa: E501


#: modules that are scripts, not imports: ``python -m`` entries and Alembic's migrations
_SCRIPTS = re.compile(r"\.__main__$|^rolltap\.store\.migrations\.")


def load_all() -> None:
    """Import every rolltap module (but scripts), so every exception class exists."""
    for info in pkgutil.walk_packages(rolltap.__path__, "rolltap."):
        if not _SCRIPTS.search(info.name):
            importlib.import_module(info.name)


def children(cls: Family) -> list[Family]:
    """``cls``'s direct subclasses that rolltap defines (not a test's), by name."""
    ours = (kid for kid in cls.__subclasses__() if kid.__module__.startswith("rolltap."))
    return sorted(ours, key=lambda kid: kid.__name__)


def walk(root: Family = RolltapError, depth: int = 0) -> Iterator[tuple[int, Family]]:
    """``(depth, class)`` for ``root`` and every class below it, depth first."""
    yield depth, root
    for kid in children(root):
        yield from walk(kid, depth + 1)


def tree(root: Family = RolltapError) -> str:
    """The hierarchy under ``root`` drawn with box-drawing lines, one class a line."""
    lines = [root.__name__]

    def draw(cls: Family, prefix: str) -> None:
        kids = children(cls)
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            lines.append(f"{prefix}{'└── ' if last else '├── '}{kid.__name__}")
            draw(kid, prefix + ("    " if last else "│   "))

    draw(root, "")
    return "\n".join(lines)


def group_of(cls: Family) -> Family:
    """The boundary group ``cls`` belongs to: its ancestor just below ``RolltapError``."""
    for base in reversed(cls.__mro__):
        if RolltapError in base.__bases__:
            return base
    return cls


def meaning(cls: Family) -> str:
    """The first paragraph of ``cls``'s own docstring, as one line of Markdown."""
    text = (cls.__dict__.get("__doc__") or "").strip().split("\n\n")[0]
    text = re.sub(r":\w+:`~(?:[\w.]*\.)?(\w+)`", r"`\1`", " ".join(text.split()))
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


def _row(cls: Family) -> str:
    name = f"`{cls.__name__}`"
    if cls.__module__ != "rolltap.errors":
        name += f" (`{cls.__module__}`)"
    status = "the upstream's" if issubclass(cls, UpstreamStatusError) else str(cls.status)
    retry = "yes" if cls.retryable else ""
    cells = [f"`{cls.code}`", status, str(cls.exit_code), retry, name,
             f"`{group_of(cls).__name__}`", meaning(cls)]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def markdown() -> str:
    """``docs/errors.md``: the tree, then every class's code, status, exit and meaning."""
    rows = [_row(cls) for _depth, cls in walk() if cls is not RolltapError]
    return "\n".join([
        _INTRO,
        "## The tree\n",
        "Grouped by the boundary an error comes from; catch a group to catch all below it.\n",
        "```text", tree(), "```\n",
        "## Every error\n",
        "A class without a code of its own answers with its parent's. `retryable`: the same",
        "request may succeed later (the answer carries `Retry-After` when rolltap knows when).\n",
        "| code | HTTP | exit | retryable | exception | group | what it means |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        _EXITS,
    ])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """``--tree`` or ``--markdown`` to stdout."""
    parser = argparse.ArgumentParser(prog="python -m rolltap.errors_doc")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--tree", action="store_true", help="draw the exception tree")
    what.add_argument("--markdown", action="store_true", help="write docs/errors.md")
    args = parser.parse_args(argv)
    load_all()
    sys.stdout.write(tree() + "\n" if args.tree else markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
