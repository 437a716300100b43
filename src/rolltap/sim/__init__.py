"""rolltap's simulated upstream: a cheap, deterministic model server.

It speaks OpenAI chat completions, OpenAI Responses and Anthropic Messages, each on its
own route (see :class:`Simulator`), independently of rolltap's own dialect translators so
that tests of those translators are not circular; and completions over token ids of a toy
vocabulary (:mod:`rolltap.sim.vocab`), as vLLM and llama.cpp serve them, for token clients.
Used by tests and benchmarks for speed, load and faults::

    async with Simulator(SimConfig(seed=1, faults=("status=429@0.1",))) as sim:
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="k")
        claude = anthropic.AsyncAnthropic(base_url=sim.url, api_key="k")

Per request, ``x-sim-fault: SPEC`` injects one fault (see :func:`parse_fault`) and
``x-sim-gate: NAME`` holds the request at :meth:`Simulator.gate` ``(NAME)`` until opened.
"""

from rolltap.sim.config import FaultSpec, SimConfig, parse_fault
from rolltap.sim.server import Simulator
from rolltap.sim.stats import Gate, SimStats

__all__ = ["FaultSpec", "Gate", "SimConfig", "SimStats", "Simulator", "parse_fault"]
