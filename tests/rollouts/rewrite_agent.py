"""A harness process that talks three turns, and with ``info.rewrite`` edits its first
message before the third (as a harness that summarizes or trims history does)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import openai


def main() -> int:
    with open(os.environ["ROLLTAP_TASK_FILE"]) as f:
        task = json.load(f)
    client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL / OPENAI_API_KEY
    model = os.environ["ROLLTAP_MODEL"]
    messages: list[Any] = [{"role": "user", "content": task["prompt"]}]
    for follow_up in ("go on", "more"):
        reply = client.chat.completions.create(model=model, messages=messages)
        messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                     {"role": "user", "content": follow_up}]  # fmt: skip
    if task.get("info", {}).get("rewrite"):
        messages[0] = {"role": "user", "content": task["prompt"] + " (edited)"}
    reply = client.chat.completions.create(model=model, messages=messages)
    with open(os.environ["ROLLTAP_RESULT_FILE"], "w") as f:
        f.write(reply.choices[0].message.content or "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
