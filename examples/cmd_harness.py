"""A `--cmd` harness with nothing but the standard library: one chat call, the answer saved.

    rolltap eval examples/patterns.jsonl --cmd "python3 examples/cmd_harness.py"

rolltap runs this once per rollout with the gateway's URL and the rollout's secret in
OPENAI_BASE_URL / OPENAI_API_KEY, the task as JSON in the file ROLLTAP_TASK_FILE names, and
a path for the answer in ROLLTAP_RESULT_FILE (without that file, stdout is the answer).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def main() -> int:
    with open(os.environ["ROLLTAP_TASK_FILE"]) as f:
        task = json.load(f)  # {"id", "prompt" | "messages", "answer"?, "info"?}
    messages = task.get("messages") or [{"role": "user", "content": task["prompt"]}]
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": os.environ["ROLLTAP_MODEL"], "messages": messages}).encode(),
        headers={
            "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        reply = json.load(response)
    answer = reply["choices"][0]["message"]["content"] or ""
    # stdout and stderr are kept in the rollout's log as harness_output events
    print(f"task {task['id']}: {len(messages)} message(s) sent", file=sys.stderr)
    with open(os.environ["ROLLTAP_RESULT_FILE"], "w") as f:
        f.write(answer)
    return 0  # non-zero: the rollout fails, its stderr's end in the error


if __name__ == "__main__":
    sys.exit(main())
