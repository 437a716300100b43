"""A browser-style agent for benchmarks/memory.py, run as a ``--cmd`` harness.

Each turn adds a user message with a fresh ~``kb`` KB base64 "screenshot" and sends the
whole history, as a computer-use agent does (seed 004's churn). Plain ``http.client``:
the agent's own memory is not what the benchmark measures, but its CPU is shared.
"""

from __future__ import annotations

import base64
import http.client
import os
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import orjson


def _screenshot(kb: int) -> str:
    return "data:image/png;base64," + base64.b64encode(os.urandom(kb * 1024 * 3 // 4)).decode()


def main() -> int:
    task = orjson.loads(Path(os.environ["ROLLTAP_TASK_FILE"]).read_bytes())
    info = task.get("info") or {}
    turns, kb = int(info.get("turns", 45)), int(info.get("kb", 200))
    base = urllib.parse.urlsplit(os.environ["OPENAI_BASE_URL"])
    headers = {
        "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
        "Content-Type": "application/json",
    }
    conn = http.client.HTTPConnection(base.hostname or "127.0.0.1", base.port, timeout=600)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You drive a browser."}]
    reply = ""
    for turn in range(turns):
        content = [
            {"type": "text", "text": f"step {turn}: here is the page"},
            {"type": "image_url", "image_url": {"url": _screenshot(kb)}},
        ]
        messages.append({"role": "user", "content": content})
        body = orjson.dumps({"model": os.environ["ROLLTAP_MODEL"], "messages": messages,
                             "max_tokens": 16})  # fmt: skip
        conn.request("POST", base.path + "/chat/completions", body, headers)
        resp = conn.getresponse()
        data = orjson.loads(resp.read())
        if resp.status != 200:
            print(f"turn {turn}: HTTP {resp.status}: {data}", file=sys.stderr)
            return 1
        reply = data["choices"][0]["message"]["content"] or ""
        messages.append({"role": "assistant", "content": reply})
    Path(os.environ["ROLLTAP_RESULT_FILE"]).write_text(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
