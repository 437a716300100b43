"""rolltap's simulated upstream: a cheap, deterministic model server.

It speaks OpenAI chat completions, OpenAI Responses and Anthropic Messages, each on its
own route (see :class:`Simulator`), independently of rolltap's own dialect translators so
that tests of those translators are not circular; and completions over token ids of a toy
vocabulary (:mod:`rolltap.sim.vocab`), as vLLM and llama.cpp serve them, for token clients.
Used by tests and benchmarks for speed, load and faults::

    async with Simulator(SimConfig(seed=1, faults=("status=429@0.1",))) as sim:
        client = openai.AsyncOpenAI(base_url=sim.base_url, api_key="k")
        claude = anthropic.AsyncAnthropic(base_url=sim.url, api_key="k")

With ``SimConfig(script=...)`` (``rolltap sim --script FILE``) the conversation routes say
scripted turns per session, text or tool calls, so a test can drive a real agent through
its tool loop (the format: :mod:`rolltap.sim.script`)::

    script = {"default": [
        {"tool_call": {"name": "Bash", "arguments": {"command": "echo hi > hello.txt"}}},
        {"text": "done"},
    ]}
    async with Simulator(SimConfig(script=script)) as sim: ...

Per request, ``x-sim-fault: SPEC`` injects one fault (see :func:`parse_fault`) and
``x-sim-gate: NAME`` holds the request at :meth:`Simulator.gate` ``(NAME)`` until opened.
"""

from rolltap.sim.config import FaultSpec, SimConfig, parse_fault
from rolltap.sim.script import Script, ScriptTurn, ToolCall, load_script, parse_script
from rolltap.sim.server import Simulator
from rolltap.sim.stats import Gate, SimStats

__all__ = [
    "FaultSpec",
    "Gate",
    "Script",
    "ScriptTurn",
    "SimConfig",
    "SimStats",
    "Simulator",
    "ToolCall",
    "load_script",
    "parse_fault",
    "parse_script",
]
