"""A harness as a separate process: the real OpenAI SDK, configured from the environment."""

from __future__ import annotations

import json
import os
import sys

import openai


def main() -> int:
    with open(os.environ["ROLLTAP_TASK_FILE"]) as f:
        task = json.load(f)
    if task.get("info", {}).get("exit"):
        print("giving up", file=sys.stderr)
        return int(task["info"]["exit"])
    client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL / OPENAI_API_KEY
    reply = client.chat.completions.create(
        model=os.environ["ROLLTAP_MODEL"],
        messages=[{"role": "user", "content": task["prompt"]}],
    )
    print("log line on stdout")
    print("log line on stderr", file=sys.stderr)
    with open(os.environ["ROLLTAP_RESULT_FILE"], "w") as f:
        f.write(reply.choices[0].message.content or "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
