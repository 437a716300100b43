"""rolltap's simulated upstream: a cheap, deterministic OpenAI chat-completions server.

Used by tests and benchmarks for speed, load and faults::

    async with Simulator(SimConfig(seed=1, faults=("status=429@0.1",))) as sim:
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="k")

Per request, ``x-sim-fault: SPEC`` injects one fault (see :func:`parse_fault`) and
``x-sim-gate: NAME`` holds the request at :meth:`Simulator.gate` ``(NAME)`` until opened.
"""

from rolltap.sim.config import FaultSpec, SimConfig, parse_fault
from rolltap.sim.server import Simulator
from rolltap.sim.stats import Gate, SimStats

__all__ = ["FaultSpec", "Gate", "SimConfig", "SimStats", "Simulator", "parse_fault"]
