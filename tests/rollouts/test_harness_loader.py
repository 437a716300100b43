"""Built-in harnesses are imported when named: a ``chat`` run never pays for Anthropic's SDK.

Each check runs in a fresh interpreter, since this one has imported them all already.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError
from rolltap.rollouts import Hooks, RunConfig
from rolltap.rollouts.harness_loader import builtin_harness_names, load_harness
from rolltap.serve.config import ServeConfig
from rolltap.serve.supervisor.eval_driver import EvalDriver

_MODULES = ("rolltap.rollouts.builtin", "rolltap.rollouts.builtin_messages", "anthropic", "openai")


def imported_after(code: str) -> dict[str, bool]:
    """Which of the harness modules and SDKs a fresh interpreter holds after ``code``."""
    probe = f"{code}\nimport sys\nprint(*[int(m in sys.modules) for m in {_MODULES!r}])"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    return dict(zip(_MODULES, map(bool, map(int, out)), strict=True))


def test_naming_the_builtins_imports_none_of_them() -> None:
    code = "from rolltap.rollouts.harness_loader import builtin_harness_names as b; b()"
    assert not any(imported_after(code).values())


def test_a_chat_harness_loads_the_openai_sdk_only() -> None:
    code = "from rolltap.rollouts import load_harness; load_harness('chat')"
    assert imported_after(code) == {
        "rolltap.rollouts.builtin": True, "rolltap.rollouts.builtin_messages": False,
        "anthropic": False, "openai": True,
    }  # fmt: skip
    code = "from rolltap.rollouts import load_harness; load_harness('messages-tool-agent')"
    assert imported_after(code)["anthropic"]


def test_a_worker_preloads_what_it_is_told() -> None:
    preload = "from rolltap.rollouts.harness_loader import preload_harnesses as p; "
    chat = imported_after(preload + "p(['chat'])")
    assert chat["anthropic"] is False
    assert chat["openai"] is True
    assert all(imported_after(preload + "p(None)").values())  # a service: every built-in
    assert not any(imported_after(preload + "p([])").values())


def test_every_builtin_still_loads_and_a_typo_lists_them() -> None:
    for name in sorted(builtin_harness_names() - {"claude-code", "codex"}):
        assert callable(load_harness(name))
    with pytest.raises(ConfigError, match="unknown harness 'caht': use one of chat, claude-code"):
        load_harness("caht")


def test_a_services_preloads_must_be_builtins() -> None:
    endpoints = [{"base_url": "http://127.0.0.1:1/v1", "model": "m"}]
    config = ServeConfig.build({"endpoints": endpoints, "preload_harnesses": ["chat"]}, source="t")
    assert config.preload_harnesses == ["chat"]
    with pytest.raises(ConfigError, match=r"'caht' not built in \(the built-ins: chat, "):
        ServeConfig.build({"endpoints": endpoints, "preload_harnesses": ["caht"]}, source="t")


@pytest.mark.parametrize(
    ("harness", "preloaded"), [("chat", ["chat"]), ("tests.x:harness", []), (None, [])]
)
def test_an_eval_on_workers_preloads_its_own_harness(
    harness: str | None, preloaded: list[str]
) -> None:
    fields = {"harness": harness} if harness else {"cmd": "true"}
    config = RunConfig.model_validate(fields).placed({"workers": 2})
    endpoint = EndpointConfig(base_url="http://127.0.0.1:1/v1", model="m")
    assert EvalDriver(config, Hooks())._serve_config(endpoint).preload_harnesses == preloaded
