"""Agents benchmark: C concurrent Claude Code rollouts through the gateway, each a real tool loop.

    python benchmarks/agents.py [--rollouts 32] [--turns 3] [--repeat 3]
                                [--routes messages chat] [--out benchmarks/out/agents.png]

Each rollout is ``--harness claude-code`` (the real ``claude``, unmodified) against the
scripted simulator (``rolltap sim --script``, its own process): every rollout's calls get
the script's ``default`` turns (the gateway's ``X-Rolltap-Rollout`` header keeps each
rollout's place), ``--turns`` calls of Claude Code's ``Bash`` tool, each writing a file,
then "done"; the task's check sees the files. A route is the endpoint's dialect:
``messages`` relays Claude Code's calls, ``chat`` translates them to a chat upstream.

Every repeat runs, in this order, each in this process as ``rolltap eval`` does
(:func:`rolltap.evaluate`, a fresh SQLite store each):

- ``1 alone``: one Claude Code rollout, relayed, three times one after the other: the wall
  baseline (``wall / alone``, the median of the three);
- ``C × claude-code`` for each route;
- ``C × chat``: the built-in SDK ``chat`` harness over as many model calls (C rollouts,
  each as many turns as a Claude Code rollout made calls) against a simulator that says
  "done": the CPU baseline (``CPU / chat``).

Reported: wall (the run planned → its last result) and its ratio to one rollout alone;
each agent's peak RSS (its process tree summed: Claude Code and the shells its Bash tool
starts; median and max over the agents) and the most all agents held at once: their RSS
summed (shared pages counted in each) and their own memory (private pages summed, the
largest shared part once: within 1% of their PSS sum, see ``_agent_sampler.py``); this
process's peak RSS (gateway, harness side, store) and its growth in the run; and this
process's CPU per model call (gateway, the harness's side — for an agent: spawning it,
reading its output, recording each line; for ``chat``: the OpenAI SDK — and the store
writer; the sampler's own thread taken out) against the ``chat`` harness's in the same
repeat. The agents' own CPU per call (reaped children) is shown too. The summary gives
each figure's range over the repeats. Not CI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import psutil
from _agent_sampler import AgentSampler, is_agent
from _plots import pyplot
from _procs import cpu_seconds, free_port, rolltap_process

import rolltap
from rolltap.rollouts import Hooks, RunConfig

#: single rollouts run per repeat for the wall baseline (the median is kept)
ALONE = 3


def agent_script(turns: int) -> dict[str, Any]:
    """``turns`` Bash calls, each writing ``f<i>.txt``, then "done"."""
    calls = [{"tool_call": {"name": "Bash", "arguments": {
        "command": f"printf {i} > f{i}.txt", "description": f"write f{i}.txt"}}}
        for i in range(1, turns + 1)]  # fmt: skip
    return {"default": [*calls, {"text": "done"}]}


def agent_task(turns: int) -> dict[str, Any]:
    check = " && ".join(f'test "$(cat f{i}.txt)" = {i}' for i in range(1, turns + 1))
    return {"id": "files", "prompt": f"Write the files f1.txt … f{turns}.txt.", "check": check}


def chat_task(calls: int) -> dict[str, Any]:
    messages = [{"role": "user", "content": f"q{i}"} for i in range(calls)]
    return {"id": "chat", "messages": messages, "info": {"regex": "."}}


def _config(tasks: Path, store: Path, port: int, r: int, route: str | None) -> RunConfig:
    """A run of ``r`` rollouts of the one task in ``tasks``: Claude Code over ``route``
    (the upstream's dialect), or the ``chat`` harness when ``route`` is None."""
    endpoint: dict[str, Any] = {"base_url": f"http://127.0.0.1:{port}/v1", "model": "sim"}
    data: dict[str, Any] = {
        "tasks": str(tasks), "endpoint": "sim", "r": r, "c": r,
        "store": f"sqlite:///{store}", "limits": {"timeout_s": 900},
    }  # fmt: skip
    if route is None:
        data |= {"harness": "chat", "rewards": ["regex"]}
    else:
        endpoint["dialect"] = route
        # allowed_tools pre-approves Bash; the permission mode stays rolltap's default
        # (bypassPermissions, with IS_SANDBOX=1 as root: Claude Code's own rule)
        data["harness"] = {"kind": "claude-code", "allowed_tools": ["Bash"], "max_turns": 20}
    return RunConfig.model_validate({**data, "endpoints": {"sim": endpoint}})


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def wave(label: str, config: RunConfig) -> dict[str, Any]:
    """Run ``config``; its figures (see the module docstring). CPU counts from the run's
    start (its store open and rollouts planned) to its last result."""
    me = psutil.Process()
    marks: dict[str, tuple[float, float, float]] = {}

    def mark(name: str) -> None:
        # (time, this process's CPU less the sampler's, the reaped agents' CPU)
        cpu = cpu_seconds(me) - sampler.thread_cpu_s
        marks[name] = (time.perf_counter(), cpu, _children_cpu())

    hooks = Hooks(on_plan=lambda _run, _n: mark("plan"), on_result=lambda _res: mark("last"))
    with AgentSampler(is_agent("claude")) as sampler:
        result = await rolltap.evaluate(config, hooks=hooks)
    (t0, cpu0, kids0), (t1, cpu1, kids1) = marks["plan"], marks["last"]
    cpu, kids = cpu1 - cpu0, kids1 - kids0
    results = result.results
    calls = max(1, sum(r.calls.calls for r in results))
    agents = sampler.agent_peaks_mb()
    row = {
        "label": label, "rollouts": len(results), "calls": calls,
        "errors": sum(r.status != "completed" for r in results),
        "reward": statistics.fmean(r.reward or 0.0 for r in results),
        "wall_s": t1 - t0,
        "prompt_tokens_per_call": sum(r.calls.prompt_tokens for r in results) / calls,
        "agent_rss_median_mb": statistics.median(agents) if agents else None,
        "agent_rss_max_mb": max(agents) if agents else None,
        "agents_total_mb": sampler.agents_total_peak / 2**20,
        "agents_own_mb": sampler.agents_own_peak / 2**20,
        "rolltap_rss_mb": sampler.rolltap_peak / 2**20,
        "rolltap_growth_mb": (sampler.rolltap_peak - sampler.rolltap_start) / 2**20,
        "cpu_ms_per_call": 1000 * cpu / calls,
        "agent_cpu_ms_per_call": 1000 * kids / calls,
    }  # fmt: skip
    print(f"  {label}: {row['rollouts']} rollouts, {calls} calls, {row['errors']} errors, "
          f"wall {row['wall_s']:.1f} s", flush=True)  # fmt: skip
    return row


async def one_repeat(
    args: argparse.Namespace, ports: dict[str, int], tmp: Path, index: int
) -> list[dict[str, Any]]:
    """One repeat's rows: one agent alone, C agents per route, C chat rollouts."""
    tasks = tmp / "agent.jsonl"
    tasks.write_bytes(orjson.dumps(agent_task(args.turns)))

    def store(name: str) -> Path:
        return tmp / f"{index}-{name}.db"

    c = args.rollouts
    singles = []
    for k in range(ALONE):
        config = _config(tasks, store(f"alone-{k}"), ports["agent"], 1, "messages")
        singles.append(await wave("1 alone", config))
    # a single rollout's wall (1-2 s) moves with whatever else the machine runs: the median
    singles.sort(key=lambda r: r["wall_s"])
    rows = [singles[len(singles) // 2]]
    for route in args.routes:
        label = f"{c} × claude-code, {route}"
        rows.append(await wave(label, _config(tasks, store(route), ports["agent"], c, route)))
    # as many calls per rollout as the first route's agents made (Claude Code may make
    # more than turns + 1)
    per_rollout = max(1, round(rows[1]["calls"] / max(1, rows[1]["rollouts"])))
    chat = tmp / "chat.jsonl"
    chat.write_bytes(orjson.dumps(chat_task(per_rollout)))
    rows.append(await wave(f"{c} × chat", _config(chat, store("chat"), ports["chat"], c, None)))
    alone, base = rows[0], rows[-1]
    for row in rows:
        row["repeat"] = index
        row["wall/alone"] = row["wall_s"] / alone["wall_s"]
        row["cpu/chat"] = row["cpu_ms_per_call"] / base["cpu_ms_per_call"]
    return rows


async def warm_up(args: argparse.Namespace, ports: dict[str, int], tmp: Path) -> None:
    """One agent and one chat rollout, not measured: the first of each imports and
    builds what every later one reuses (the SDK, the harness, the store's schema)."""
    print("warm-up", flush=True)
    tasks, chat = tmp / "agent.jsonl", tmp / "chat.jsonl"
    tasks.write_bytes(orjson.dumps(agent_task(args.turns)))
    chat.write_bytes(orjson.dumps(chat_task(args.turns + 1)))
    await wave(
        "warm-up agent", _config(tasks, tmp / "warm-agent.db", ports["agent"], 1, "messages")
    )
    await wave("warm-up chat", _config(chat, tmp / "warm-chat.db", ports["chat"], 1, None))


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def print_rows(rows: list[dict[str, Any]]) -> None:
    print("| repeat | run | calls | errors | reward | wall s | wall / alone | agent peak RSS MB "
          "(median / max) | all agents RSS / est. own MB | rolltap RSS MB (growth) | sim "
          "prompt tok/call | rolltap CPU ms/call | / chat | agents' CPU ms/call |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['repeat'] + 1} | {r['label']} | {r['calls']} | {r['errors']} | "
            f"{r['reward']:.2f} | {r['wall_s']:.1f} | {r['wall/alone']:.2f} | "
            f"{_mb(r['agent_rss_median_mb'])} / {_mb(r['agent_rss_max_mb'])} | "
            f"{_mb(r['agents_total_mb'])} / {_mb(r['agents_own_mb'])} | {r['rolltap_rss_mb']:.0f} "
            f"(+{r['rolltap_growth_mb']:.0f}) | "
            f"{r['prompt_tokens_per_call']:.0f} | {r['cpu_ms_per_call']:.2f} | "
            f"{r['cpu/chat']:.2f} | {r['agent_cpu_ms_per_call']:.0f} |"
        )


def _range(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else (
        f"{format(low, fmt)}–{format(high, fmt)}")  # fmt: skip


_SUMMARY = [("wall s", "wall_s", ".1f"), ("wall / alone", "wall/alone", ".2f"),
            ("agent RSS median MB", "agent_rss_median_mb", ".0f"),
            ("agent RSS max MB", "agent_rss_max_mb", ".0f"),
            ("all agents RSS MB", "agents_total_mb", ".0f"),
            ("all agents own MB", "agents_own_mb", ".0f"),
            ("rolltap RSS MB", "rolltap_rss_mb", ".0f"),
            ("rolltap RSS growth MB", "rolltap_growth_mb", ".0f"),
            ("rolltap CPU ms/call", "cpu_ms_per_call", ".2f"), ("CPU / chat", "cpu/chat", ".2f"),
            ("agents' CPU ms/call", "agent_cpu_ms_per_call", ".0f")]  # fmt: skip


def print_summary(rows: list[dict[str, Any]]) -> None:
    """Each run's figures as ranges over the repeats."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    print("| run | " + " | ".join(name for name, _, _ in _SUMMARY) + " |")
    print("|---|" + "---|" * len(_SUMMARY))
    for label in labels:
        mine = [r for r in rows if r["label"] == label]
        cells = []
        for _, key, fmt in _SUMMARY:
            values = [r[key] for r in mine if r[key] is not None]
            cells.append(_range(values, fmt) if values else "-")
        print(f"| {label} | " + " | ".join(cells) + " |")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Per repeat: wall / alone, agent peak RSS, CPU / chat, one line per run."""
    plt = pyplot()
    if plt is None:
        return
    panels = [("wall / one rollout alone", "wall/alone"), ("agent peak RSS, MB (median)",
              "agent_rss_median_mb"), ("rolltap CPU per call / chat's", "cpu/chat")]  # fmt: skip
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 3.8))
    for label in dict.fromkeys(r["label"] for r in rows):
        mine = [r for r in rows if r["label"] == label]
        for ax, (_, key) in zip(axes, panels, strict=True):
            points = [(r["repeat"] + 1, r[key]) for r in mine if r[key] is not None]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=label)
    for ax, (title, _) in zip(axes, panels, strict=True):
        ax.set_title(title)
        ax.set_xlabel("repeat")
        ax.set_xticks(sorted({r["repeat"] + 1 for r in rows}))
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=32, help="concurrent agent rollouts")
    parser.add_argument("--turns", type=int, default=3, help="Bash tool turns per rollout")
    parser.add_argument("--repeat", type=int, default=3, help="repeats (ranges reported)")
    parser.add_argument(
        "--routes",
        nargs="+",
        choices=["messages", "chat"],
        default=["messages"],
        help="upstream dialects (messages: relay)",
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/agents.png"),
                        help="the plot; the rows go next to it as .json")  # fmt: skip
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        ports = {"agent": free_port(), "chat": free_port()}
        scripts = {"agent": agent_script(args.turns), "chat": {"default": []}}
        for name, port in ports.items():
            script = tmp / f"{name}-script.json"
            script.write_bytes(orjson.dumps(scripts[name]))
            # each upstream in its own process: its CPU is not this process's
            health = f"http://127.0.0.1:{port}/health"
            sim_args = ["sim", "--port", str(port), "--script", str(script)]
            stack.enter_context(rolltap_process(sim_args, health))
        await warm_up(args, ports, tmp)
        for index in range(args.repeat):
            print(f"repeat {index + 1}/{args.repeat}", flush=True)
            rows += await one_repeat(args, ports, tmp, index)
    print()
    print_rows(rows)
    print()
    print_summary(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    plot(rows, args.out)


if __name__ == "__main__":
    asyncio.run(main())
