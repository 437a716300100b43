"""Capture what the real CLI agents send: ``python tests/agents/capture.py OUT_DIR``.

Starts a logging server on loopback that answers every model call with one short text
turn (in the route's dialect, streamed when asked), runs Claude Code and Codex CLI
headless against it for one turn, and writes each request they made (method, path,
headers with credentials redacted, JSON body) to ``OUT_DIR/<agent>.json``. The
fixtures in ``tests/agents/fixtures/`` were made this way; rerun it when the pinned
versions in ``.ci/run`` change.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from aiohttp import web

_SECRET_HEADERS = {"authorization", "x-api-key", "cookie"}


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def _messages_stream() -> bytes:
    msg: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 0},
    }
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": msg}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Hello"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def _messages_body() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }


def _responses_stream() -> bytes:
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
    }
    resp = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": "m",
        "output": [item],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 1,
            "total_tokens": 11,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    started = {**resp, "status": "in_progress", "output": [], "usage": None}
    part = {"type": "output_text", "text": "", "annotations": []}
    return _sse(
        [
            ("response.created", {"type": "response.created", "response": started}),
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**item, "status": "in_progress", "content": []},
                },
            ),
            (
                "response.content_part.added",
                {
                    "type": "response.content_part.added",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "part": part,
                },
            ),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "Hello",
                },
            ),
            (
                "response.output_text.done",
                {
                    "type": "response.output_text.done",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "text": "Hello",
                },
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": resp}),
        ]
    )


class Log:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        headers = {
            k.lower(): ("<redacted>" if k.lower() in _SECRET_HEADERS else v)
            for k, v in request.headers.items()
        }
        self.requests.append(
            {"method": request.method, "path": request.path_qs, "headers": headers, "body": body}
        )
        if request.method != "POST":
            return web.json_response({})
        stream = isinstance(body, dict) and body.get("stream")
        if request.path.endswith("/messages/count_tokens"):
            return web.json_response({"input_tokens": 10})
        if request.path.endswith("/messages"):
            if stream:
                return web.Response(body=_messages_stream(), content_type="text/event-stream")
            return web.json_response(_messages_body())
        if request.path.endswith("/responses"):
            return web.Response(body=_responses_stream(), content_type="text/event-stream")
        return web.json_response({"error": {"message": "not captured"}}, status=404)


async def _run(cmd: list[str], env: dict[str, str], cwd: str) -> int:
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    sys.stderr.write(out.decode("utf-8", "replace")[-2000:] + "\n")
    return proc.returncode or 0


async def main(out_dir: Path) -> None:
    log = Log()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", log.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as home:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": home,
            "ANTHROPIC_BASE_URL": base,
            "ANTHROPIC_API_KEY": "sk-capture",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        rc = await _run(
            ["claude", "-p", "Say hello in one word", "--output-format", "json"], env, home
        )
        _write(out_dir / "claude_code.json", log, rc)
        codex_home = Path(home) / ".codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model = "m"\nmodel_provider = "capture"\n\n[model_providers.capture]\n'
            f'name = "capture"\nbase_url = "{base}/v1"\nenv_key = "CAPTURE_KEY"\n'
            'wire_api = "responses"\n'
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": home,
            "CODEX_HOME": str(codex_home),
            "CAPTURE_KEY": "sk-capture",
        }
        rc = await _run(
            ["codex", "exec", "--skip-git-repo-check", "--json", "Say hello in one word"], env, home
        )
        _write(out_dir / "codex.json", log, rc)
    await runner.cleanup()


def _write(path: Path, log: Log, rc: int) -> None:
    path.write_text(json.dumps({"exit": rc, "requests": log.requests}, indent=1) + "\n")
    print(f"{path}: {len(log.requests)} requests, exit {rc}")
    log.requests = []


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/agents/fixtures")
    target.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(target))
