"""The exception tree: every rolltap exception in it, drawn and documented as it is."""

from __future__ import annotations

import inspect
import sys
import textwrap
from pathlib import Path

import pytest

from rolltap import errors
from rolltap.cli.common import EXIT_FAILED, EXIT_USAGE, exit_code_of
from rolltap.errors_doc import children, group_of, load_all, markdown, meaning, tree, walk

DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
#: the boundaries (errors.py's docstring says what each is): a new one is deliberate
GROUPS = {
    "GatewayClosedError", "HarnessError", "LocalModelError", "PolicyError", "PoolError",
    "RequestError",
    "ServeError", "StoreError", "TokensError", "UpstreamError", "UsageError",
}  # fmt: skip
#: exceptions that never leave the module raising them, kept out of the tree on purpose
PRIVATE = {"rolltap.sim.handler._Refused", "rolltap.clients.wire._Expired"}


@pytest.fixture(scope="module", autouse=True)
def _everything_loaded() -> None:
    load_all()


def _family() -> list[type[errors.RolltapError]]:
    return [cls for _depth, cls in walk()]


def test_the_docstring_draws_the_real_tree() -> None:
    drawn = textwrap.indent(tree(), "    ")
    assert errors.__doc__ is not None
    assert f"::\n\n{drawn}\n\n" in errors.__doc__, (
        "src/rolltap/errors.py's drawing is stale: paste in the output of "
        "`python -m rolltap.errors_doc --tree`"
    )


def test_docs_errors_md_is_generated_from_the_tree() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(), (
        "docs/errors.md is stale: regenerate it with "
        "`PYTHONPATH=src python -m rolltap.errors_doc --markdown > docs/errors.md`"
    )


def test_every_exception_rolltap_defines_is_in_the_tree() -> None:
    family = set(_family())
    stray = []
    for name, module in list(sys.modules.items()):
        if name != "rolltap" and not name.startswith("rolltap."):
            continue
        for obj in vars(module).values():
            if not (inspect.isclass(obj) and issubclass(obj, BaseException)):
                continue
            if obj.__module__ != name or f"{name}.{obj.__qualname__}" in PRIVATE:
                continue
            if obj not in family:
                stray.append(f"{name}.{obj.__qualname__}")
    assert stray == [], f"not below RolltapError: {stray}"
    assert len(family) == len(_family()), "a class is in the tree twice"


def test_the_root_holds_only_the_boundary_groups() -> None:
    assert {cls.__name__ for cls in children(errors.RolltapError)} == GROUPS
    assert group_of(errors.MalformedJSONError) is errors.RequestError
    assert group_of(errors.WorkersLostError) is errors.ServeError
    assert group_of(errors.UsageError) is errors.UsageError


def test_codes_are_unique_statuses_http_and_exits_the_clis() -> None:
    own = [cls for cls in _family() if "code" in vars(cls)]
    codes = [cls.code for cls in own]
    assert len(codes) == len(set(codes)), codes
    for cls in _family():
        assert cls.code.isidentifier(), cls
        assert 400 <= cls.status < 600, cls
        usage = issubclass(cls, errors.UsageError)
        assert cls.exit_code == (EXIT_USAGE if usage else EXIT_FAILED), cls
        assert meaning(cls), f"{cls.__name__} has no docstring to document it by"


def test_request_errors_are_4xx_and_the_cli_exits_by_the_class() -> None:
    for _depth, cls in walk(errors.RequestError):
        assert 400 <= cls.status < 500, cls
    assert exit_code_of(errors.MissingExtraError("x")) == 2
    assert exit_code_of(errors.StoreBusyError("x")) == 1


def test_the_drawing_is_depth_first_by_name() -> None:
    assert tree(errors.UpstreamError).splitlines() == [
        "UpstreamError",
        "├── UpstreamAbortedError",
        "├── UpstreamBusyError",
        "├── UpstreamConnectionError",
        "├── UpstreamProtocolError",
        "│   └── UpstreamStreamError",
        "├── UpstreamStatusError",
        "└── UpstreamTimeoutError",
    ]


def test_meaning_is_the_docstrings_first_paragraph_in_markdown() -> None:
    assert meaning(errors.TokenizerMismatchError).startswith(
        "The local tokenizer of a token endpoint is not the server's: the server's `/tokenize`"
    )
    assert "(`tokenizer_check`)" not in meaning(errors.TokenizerMismatchError)
    assert "`rolltap.clients.tokenizer_check`" in meaning(errors.TokenizerMismatchError)
