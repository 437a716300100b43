"""Large request fields recorded once per rollout while unchanged (rolltap.gateway.kept_params):
what a reader rebuilds from the events is what was sent, call by call."""

from __future__ import annotations

import doctest
import random
from typing import Any

import orjson
import pytest

import rolltap.gateway.kept_params
from rolltap.gateway.kept_params import MIN_BYTES, KeptParams
from rolltap.http.json_body import EncodedMembers

TOOLS = [{"name": "Bash", "description": "runs a command " * 100}]
SYSTEM = "You are a coding agent. " * 60


def _rebuilt(recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call's fields as docs/events.md says to read them: ``params``, and for each
    name in ``params_as_before`` the value the last event recorded for it."""
    last: dict[str, Any] = {}
    out = []
    for event in recorded:
        before = {k: last[k] for k in event.get("params_as_before", [])}
        last.update(event["params"])
        out.append({**before, **event["params"]})
    return out


def test_the_doctests_hold() -> None:
    assert doctest.testmod(rolltap.gateway.kept_params).failed == 0


def test_a_large_field_is_recorded_once_while_unchanged_and_small_ones_always() -> None:
    kept = KeptParams()
    sent = {"model": "m", "max_tokens": 8, "system": SYSTEM, "tools": TOOLS, "meta": {"a": 1}}
    first, second = kept.fields(sent), kept.fields(sent)
    assert first == {"params": sent}
    assert second == {
        "params": {"model": "m", "max_tokens": 8, "meta": {"a": 1}},
        "params_as_before": ["system", "tools"],
    }
    changed = {**sent, "tools": [*TOOLS, {"name": "Read"}]}
    assert kept.fields(changed)["params_as_before"] == ["system"]
    assert kept.fields(changed)["params_as_before"] == ["system", "tools"]


def test_a_field_recorded_small_in_between_is_recorded_whole_when_it_grows_back() -> None:
    kept = KeptParams()
    calls = [{"system": SYSTEM}, {"system": "short"}, {"system": SYSTEM}, {}, {"system": SYSTEM}]
    recorded = [kept.fields(c) for c in calls]
    assert [r.get("params_as_before", []) for r in recorded] == [[], [], [], [], ["system"]]
    assert _rebuilt(recorded) == calls


@pytest.mark.parametrize("seed", range(10))
def test_what_is_rebuilt_is_what_was_sent(seed: int) -> None:
    rng = random.Random(seed)
    values = [SYSTEM, SYSTEM + "!", "short", TOOLS, [*TOOLS, 1], {"big": "x" * MIN_BYTES}, 7]
    kept, calls = KeptParams(), []
    for _ in range(40):
        call = {k: rng.choice(values) for k in ("system", "tools", "extra") if rng.random() < 0.8}
        calls.append(call)
    recorded = [kept.fields(c) for c in calls]
    assert _rebuilt(recorded) == calls
    assert any("params_as_before" in r for r in recorded)


def test_a_value_sent_with_its_keys_reordered_is_recorded_again() -> None:
    # rebuilt, a request is the one sent, key order and all (a tool schema's property
    # order reaches the model's prompt)
    kept = KeptParams()
    tools = [{"name": "Bash", "description": "runs " * 300, "input_schema": {"a": 1, "b": 2}}]
    reordered = [{"input_schema": {"b": 2, "a": 1}, "description": "runs " * 300, "name": "Bash"}]
    recorded = [kept.fields({"tools": t}) for t in (tools, reordered, reordered)]
    assert [r.get("params_as_before", []) for r in recorded] == [[], [], ["tools"]]
    assert [orjson.dumps(r["tools"]) for r in _rebuilt(recorded)] == [
        orjson.dumps(t) for t in (tools, reordered, reordered)
    ]


def test_a_relayed_bodys_written_members_give_the_same_records() -> None:
    body = {"model": "m", "system": SYSTEM, "tools": TOOLS}
    written, plain = KeptParams(), KeptParams()
    for _ in range(3):
        members = EncodedMembers.check(body)
        assert written.fields(body, members) == plain.fields(body)
