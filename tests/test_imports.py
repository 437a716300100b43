"""Importing a part loads that part: the package resolves its public names lazily."""

from __future__ import annotations

import importlib
import subprocess
import sys

import orjson

import rolltap

HEAVY = ("sqlalchemy", "aiohttp")


def _loaded_after(statement: str) -> dict[str, list[str]]:
    """The heavy libraries and the rolltap modules a fresh interpreter holds after it."""
    code = (
        f"import sys, orjson\n{statement}\n"
        "top = {m.split('.')[0] for m in sys.modules}\n"
        f"heavy = sorted(top & {set(HEAVY)!r})\n"
        "ours = sorted(m for m in sys.modules if m.split('.')[0] == 'rolltap')\n"
        "sys.stdout.buffer.write(orjson.dumps({'heavy': heavy, 'rolltap': ours}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=60)
    loaded: dict[str, list[str]] = orjson.loads(out.stdout)
    return loaded


def test_the_canonical_model_loads_neither_sqlalchemy_nor_aiohttp() -> None:
    loaded = _loaded_after("import rolltap.dialects.canonical")
    assert loaded["heavy"] == []
    assert loaded["rolltap"] == ["rolltap", "rolltap.dialects", "rolltap.dialects.canonical"]


def test_importing_the_package_loads_no_part_until_a_name_is_used() -> None:
    assert _loaded_after("import rolltap") == {"heavy": [], "rolltap": ["rolltap"]}
    used = _loaded_after("import rolltap; rolltap.Gateway")
    # the gateway's own aiohttp; since the event model left the store (rolltap.events),
    # the gateway no longer loads SQLAlchemy
    assert used["heavy"] == ["aiohttp"]
    assert "rolltap.gateway.gateway" in used["rolltap"]


def test_every_public_name_is_the_object_its_part_defines() -> None:
    for name in rolltap.__all__:
        if name == "__version__":
            continue
        value = getattr(rolltap, name)
        module = importlib.import_module(value.__module__)
        assert getattr(module, value.__name__) is value, name
