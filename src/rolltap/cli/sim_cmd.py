"""``rolltap sim``: run the simulated upstream (OpenAI and Anthropic APIs) until Ctrl-C;
``--script FILE`` makes it say scripted turns (:mod:`rolltap.sim.script`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from rolltap.errors import ConfigError
from rolltap.proc.loop import run as run_loop
from rolltap.sim import SimConfig, Simulator, load_script, parse_fault

__all__ = ["register", "run_sim"]

# One string per paragraph: the help renderer wraps paragraphs itself.
_HELP = "\n\n".join(
    [
        "Run the simulated model server (for load and fault tests).",
        "It answers, stream and not, with tool calls, deterministically for a seed:"
        " POST /v1/chat/completions (OpenAI chat completions), POST /v1/responses (OpenAI"
        " Responses), POST /v1/messages and POST /v1/messages/count_tokens (Anthropic"
        " Messages), plus GET /v1/models and GET /health. It prints its OpenAI base URL"
        " (…/v1) on start; point the Anthropic SDK at the same URL without /v1.",
        "Faults: --fault KIND\\[=ARG]\\[@PROB], repeatable. PROB is in (0, 1], default 1, drawn"
        " from a RNG seeded by --seed. Kinds:",
        "* status=CODE: answer HTTP CODE (400-599) with the route's error body"
        " (429 and 503 add Retry-After: 1)",
        "* stall=SECONDS: wait before sending the response headers",
        "* stall-mid=SECONDS: stream: wait after the first chunk (non-stream: before the body)",
        "* drop=N: stream: close the connection after N chunks (non-stream: after the headers)",
        "* malformed: a 200 body that is not JSON (stream: a bad event after the first chunk)",
        "* reset: reset the TCP connection before any response",
        "Examples: --fault status=429@0.1 --fault stall=30@0.01 --fault drop=3@0.05"
        " --fault malformed@0.02 --fault reset@0.01",
        "Per request, the header x-sim-fault: SPEC injects one fault instead of --fault, and"
        " x-sim-gate: NAME holds the request at a gate.",
        "Prefix cache: --prefix-cache-blocks N keeps an LRU of N blocks of"
        " --prefix-block-tokens prompt tokens (the simulator's own tokens); the time to first"
        " token is --ttft-ms plus --prefill-ms-per-token for each prompt token not cached."
        " GET /stats reports hit and missed tokens, and requests per X-Rolltap-Rollout,"
        " X-Session-ID and X-SMG-Routing-Key value.",
        "Script: --script FILE answers the chat, Messages and Responses routes (stream and"
        " not, each dialect's tool-call framing) with scripted turns instead, to drive a real"
        " agent through its tool loop. FILE is JSON:"
        ' {"default": \\[TURN, …], "sessions": {"ID": \\[TURN, …]}} (a bare list of turns is'
        ' the default). A TURN is {"text": "…"}, {"tool_call": CALL}, {"tool_calls":'
        ' \\[CALL, …]}, or text with calls (the text first); a CALL is {"name": "Bash",'
        ' "arguments": {"command": "echo hi > hello.txt"}}, any tool name, declared or not.',
        "A call's session is its X-Rolltap-Rollout header (the gateway sends it), else its"
        " X-Session-ID, else one shared session; the n-th call of a session gets turn n of"
        " its sessions entry, or of default (each session counts its own calls); a session"
        " with neither gets generated answers. After the last turn every call is answered"
        ' with the text "done", so an agent\'s loop ends. A call answered with a fault keeps'
        " its turn for the retry. The file is checked at start: a bad entry is one error"
        " naming it. GET /stats counts the turns used per session (script_turns).",
        "Weights, as an RL trainer's inference engine has them: --policy-version V starts"
        " with that weight version; answers report it (SGLang's /generate in"
        ' meta_info.weight_version, the OpenAI routes in "metadata": {"weight_version": V}).'
        " GET /get_weight_version reads it; POST /update_weight_version"
        ' {"new_version": V, "abort_all_requests": false} sets it (with abort_all_requests,'
        " every generation in flight is answered at once with what it generated so far,"
        " finish reason abort). vLLM's POST /pause?mode=abort|wait|keep, POST /resume and GET"
        ' /is_paused, and SGLang\'s POST /pause_generation {"mode": "abort"|"retract"'
        '|"in_place"} and POST /continue_generation pause the engine: new requests wait for'
        " the resume; abort answers what is in flight at once, wait returns once nothing is,"
        " keep (retract, in_place) freezes it until the resume. GET /stats counts aborts,"
        " updates and pauses.",
    ]
)


async def run_sim(
    config: SimConfig,
    host: str,
    port: int,
    *,
    on_ready: Callable[[Simulator], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``config`` on ``host:port`` until ``stop`` is set (or the task is cancelled)."""
    async with Simulator(config, host=host, port=port) as sim:
        if on_ready is not None:
            on_ready(sim)
        await (stop or asyncio.Event()).wait()


def _print_ready(sim: Simulator) -> None:
    typer.echo(f"rolltap sim serving {sim.base_url}  (Ctrl-C to stop)")


def sim(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port to bind (0 picks a free one).", min=0, max=65535)
    ] = 8000,
    seed: Annotated[int, typer.Option(help="Seed for answers and fault draws.")] = 0,
    ttft_ms: Annotated[float, typer.Option(help="Delay before the first byte, ms.", min=0)] = 0.0,
    tokens_per_s: Annotated[float, typer.Option(help="Token pace; 0 = unlimited.", min=0)] = 0.0,
    completion_tokens: Annotated[
        int, typer.Option(help="Completion length in tokens (max_tokens caps it).", min=0)
    ] = 16,
    fault: Annotated[
        list[str] | None,
        typer.Option(help="Inject a fault, KIND\\[=ARG]\\[@PROB]; repeatable (see above)."),
    ] = None,
    model: Annotated[str, typer.Option(help="Model name listed by /v1/models.")] = "sim-model",
    prefill_ms_per_token: Annotated[
        float, typer.Option(help="First-token delay per uncached prompt token, ms.", min=0)
    ] = 0.0,
    prefix_cache_blocks: Annotated[
        int, typer.Option(help="Prefix cache size in blocks; 0 = no cache.", min=0)
    ] = 0,
    prefix_block_tokens: Annotated[
        int, typer.Option(help="Prompt tokens per prefix-cache block.", min=1)
    ] = 16,
    script: Annotated[
        Path | None,
        typer.Option(help="Scripted turns per session, a JSON file (see above).", dir_okay=False),
    ] = None,
    policy_version: Annotated[
        str | None, typer.Option(help="The weight version to start with (see above).")
    ] = None,
) -> None:
    """Run the simulator in the foreground."""
    try:
        faults = tuple(parse_fault(spec) for spec in fault or ())
    except ConfigError as exc:
        raise typer.BadParameter(exc.message, param_hint="--fault") from None
    # A bad script is a ConfigError naming its entry: one line, exit 2, before serving.
    loaded = load_script(script) if script is not None else None
    config = SimConfig(
        seed=seed,
        ttft_ms=ttft_ms,
        tokens_per_s=tokens_per_s,
        completion_tokens=completion_tokens,
        faults=faults,
        model=model,
        prefill_ms_per_token=prefill_ms_per_token,
        prefix_cache_blocks=prefix_cache_blocks,
        prefix_block_tokens=prefix_block_tokens,
        script=loaded,
        policy_version=policy_version,
    )
    try:
        run_loop(run_sim(config, host, port, on_ready=_print_ready))
    except KeyboardInterrupt:
        typer.echo("rolltap sim stopped")


def register(app: typer.Typer) -> None:
    """Add the ``sim`` command to ``app``."""
    app.command("sim", help=_HELP)(sim)
