"""Helpers the simulator tests share: request bodies, SSE reading and ``rolltap sim`` run
in this process."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import typer
from typer.testing import CliRunner, Result

from rolltap.cli.sim_cmd import register
from rolltap.sim.vocab import VOCAB

USER: list[dict[str, Any]] = [{"role": "user", "content": "Say something."}]


def chat_body(**extra: Any) -> dict[str, Any]:
    """A minimal chat-completions request body."""
    return {"model": "m", "messages": USER, **extra}


async def read_events(resp: aiohttp.ClientResponse, into: list[bytes] | None = None) -> list[bytes]:
    """The ``data:`` payloads of an SSE response, in order, until the body ends.

    Pass ``into`` to keep the events that arrived before the body failed.
    """
    events = [] if into is None else into
    async for line in resp.content:
        if line.startswith(b"data: "):
            events.append(line[len(b"data: ") :].rstrip(b"\n"))
    return events


def json_events(events: list[bytes]) -> list[dict[str, Any]]:
    """Parse every event but ``[DONE]``."""
    return [orjson.loads(e) for e in events if e != b"[DONE]"]


def messages_body(**extra: Any) -> dict[str, Any]:
    """A minimal Anthropic Messages request body (the same conversation as :func:`chat_body`)."""
    return {"model": "m", "max_tokens": 100, "messages": USER, **extra}


def responses_body(**extra: Any) -> dict[str, Any]:
    """A minimal OpenAI Responses request body (the same conversation as :func:`chat_body`)."""
    return {"model": "m", "input": "Say something.", **extra}


async def read_named_events(
    resp: aiohttp.ClientResponse, into: list[tuple[str, bytes]] | None = None
) -> list[tuple[str, bytes]]:
    """``(event name, data)`` of every event of an SSE response, until the body ends.

    The name is ``""`` for an event without an ``event:`` line. Pass ``into`` to keep the
    events that arrived before the body failed.
    """
    events = [] if into is None else into
    name = ""
    async for line in resp.content:
        if line.startswith(b"event: "):
            name = line[len(b"event: ") :].strip().decode()
        elif line.startswith(b"data: "):
            events.append((name, line[len(b"data: ") :].rstrip(b"\n")))
            name = ""
    return events


def prompt_ids(text: str = "<|im_start|>user\nSay something.<|im_end|>\n") -> list[int]:
    """A token-id prompt in the simulator's vocabulary."""
    return VOCAB.encode(text)


def completions_body(**extra: Any) -> dict[str, Any]:
    """A minimal token-id ``/v1/completions`` request body."""
    return {"model": "m", "prompt": prompt_ids(), **extra}


def llamacpp_body(**extra: Any) -> dict[str, Any]:
    """A minimal llama.cpp ``/completion`` request body (the same prompt)."""
    return {"prompt": prompt_ids(), **extra}


def sim_cli(*args: str) -> Result:
    """``rolltap sim ARGS`` registered on a throwaway typer app, run in this process
    (200 columns wide, so that help text is not wrapped)."""
    app = typer.Typer()
    register(app)

    @app.command("noop")
    def noop() -> None:
        """Keeps typer from collapsing the app into the single `sim` command."""

    return CliRunner().invoke(app, ["sim", *args], env={"COLUMNS": "200"})
