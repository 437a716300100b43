"""The fault grammar and SimConfig."""

from __future__ import annotations

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolltap.errors import ConfigError
from rolltap.sim import FaultSpec, SimConfig, parse_fault


@pytest.mark.parametrize(
    ("spec", "kind", "arg", "prob"),
    [
        ("status=429", "status", 429.0, 1.0),
        ("status=503@0.25", "status", 503.0, 0.25),
        ("stall=2.5", "stall", 2.5, 1.0),
        ("stall-mid=0.1@1", "stall-mid", 0.1, 1.0),
        ("drop=3", "drop", 3.0, 1.0),
        ("drop=0@0.5", "drop", 0.0, 0.5),
        ("malformed", "malformed", None, 1.0),
        ("reset@0.01", "reset", None, 0.01),
        (" RESET ", "reset", None, 1.0),
    ],
)
def test_parse_fault_accepts_the_grammar(
    spec: str, kind: str, arg: float | None, prob: float
) -> None:
    fault = parse_fault(spec)
    assert (fault.kind, fault.arg, fault.prob) == (kind, arg, prob)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("", "unknown kind"),
        ("explode", "unknown kind 'explode'"),
        ("status", "needs an argument"),
        ("status=", "needs an argument"),
        ("status=abc", "not a number"),
        ("status=200", "400-599"),
        ("status=429.5", "whole number"),
        ("stall=-1", "must not be negative"),
        ("stall=nan", "not finite"),
        ("drop=1.5", "whole number"),
        ("malformed=1", "takes no argument"),
        ("reset=2", "takes no argument"),
        ("status=500@0", "probability must be in (0, 1]"),
        ("status=500@1.5", "probability must be in (0, 1]"),
        ("status=500@x", "probability 'x' is not a number"),
    ],
)
def test_parse_fault_rejects_bad_specs_clearly(spec: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_fault(spec)
    assert why in info.value.message
    assert repr(spec) in info.value.message
    assert "KIND[=ARG][@PROB]" in info.value.message


_SPECS = st.one_of(
    st.builds(lambda c: f"status={c}", st.integers(400, 599)),
    st.builds(lambda s: f"stall={s}", st.floats(0, 1e6, allow_nan=False)),
    st.builds(lambda s: f"stall-mid={s}", st.floats(0, 1e6, allow_nan=False)),
    st.builds(lambda n: f"drop={n}", st.integers(0, 10_000)),
    st.sampled_from(["malformed", "reset"]),
)


@given(spec=_SPECS, prob=st.none() | st.floats(0.001, 1.0))
def test_fault_spec_str_round_trips(spec: str, prob: float | None) -> None:
    text = spec if prob is None else f"{spec}@{prob}"
    fault = parse_fault(text)
    assert parse_fault(str(fault)) == fault


def test_sim_config_defaults_and_fault_strings() -> None:
    config = SimConfig()
    assert (config.seed, config.ttft_ms, config.tokens_per_s) == (0, 0, 0)
    assert (config.completion_tokens, config.faults, config.model) == (16, (), "sim-model")
    config = SimConfig(faults=("status=500@0.5", FaultSpec(kind="reset")))
    assert config.faults == (parse_fault("status=500@0.5"), parse_fault("reset"))


def test_sim_config_is_frozen_and_validated() -> None:
    config = SimConfig()
    with pytest.raises(pydantic.ValidationError):
        config.seed = 3  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        SimConfig(ttft_ms=-1)
    with pytest.raises(ConfigError):
        SimConfig(faults=("bogus",))
