"""What recording costs a call: the gateway's CPU with each part of the record knocked out.

    python benchmarks/record_cost.py [--messages 2,400] [--calls 3000] [--repeat 3]
                                     [--stream] [--baseline-src DIR]

Copies ``src/`` once per variant to a temporary folder and knocks one part of what a
call records out of it (an anchored edit: a line the code no longer has stops the run,
naming it), then runs each variant's gateway in front of the simulator and calls it at
c = 1 (calls one after another, hot caches), a history of N messages each call (the
history sent once before, a new turn each call, as gateway_overhead.py does). Prints the
gateway's CPU per call (user + system over the calls, median and range over the
repeats, the variants alternated within each repeat), the bare relay's (on uvloop, as
the gateway) beside them, and what each knocked-out part cost: full rolltap minus the
variant. A measuring tool, not a mode: a variant's events are incomplete on purpose.
``--write-variant VARIANT DIR`` only writes that variant's ``src/`` to DIR, for another
benchmark's ``--baseline-src`` (what the gateway's throughput would be with nothing
recorded: ``--write-variant "nothing recorded" /tmp/bare-src``, then
``gateway_overhead.py --baseline-src /tmp/bare-src``). Not CI.

Variants: ``rolltap`` (as shipped); ``read whole`` (no relayed body read past its
prefix: every body parsed, checked and written whole, its conversation looked up with
its request event); and, each read whole, ``no index`` (the request event made without
the conversation index: no sorted dump, no hash, no prefix); ``no request event`` (none
written); ``no depth check`` (the body's nesting not checked: its rewrite then written
whole); ``no response event``; ``nothing recorded`` (all four); with ``--baseline-src
DIR`` (a checkout's ``src/``: the code before a change) ``baseline``, that code as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import aiohttp
from _history_load import Target, _turn, body, history
from _procs import SRC, bare_relay, baseline_src, cpu_seconds, gateway, simulator
from gateway_overhead import register

#: (file under src/rolltap, the code, what replaces it): one part knocked out
_Edit = tuple[str, str, str]
_INDEX: _Edit = (
    "gateway/call_events.py",
    "            found = conversations.find(conversation, dialect=self.harness.name, "
    "sent=written)\n"
    "        match = conversations.remember(found, self.harness.name)\n",
    "            found = conversations.find([])  # knocked out: no dump, no hash\n"
    "        match = found.match\n",
)
_REQUEST: _Edit = (
    "gateway/call_events.py",
    "            sent, self.pending = self.pending, None\n            self.record_request(sent)\n",
    "            sent, self.pending = self.pending, None\n"
    "            self.requested = True  # knocked out\n",
)
#: since stop 48 the depth check writes the members a rewritten body is joined from:
#: knocked out, the relay writes its body whole (orjson.dumps), as the bare relay would
#: have to, and the conversation is looked up without the bytes sent
_DEPTH: _Edit = (
    "gateway/relay_body.py",
    "    return EncodedMembers.check(body)\n",
    "    return None  # knocked out\n",
)
#: since stop 50 a relayed body is read past its known prefix
_WHOLE: _Edit = (
    "gateway/relay_splice.py",
    "    return not whole_needed and isinstance(upstream, RelayUpstream)"
    " and upstream.turns is None\n",
    "    return False  # knocked out\n",
)
_RESPONSE: _Edit = (
    "gateway/call_events.py",
    "        timing, current = self._moment() if self.ready is None else self.ready\n",
    "        timing, current = self._moment() if self.ready is None else self.ready\n"
    "        self.answered = {'status': status, 'timing': timing}  # knocked out\n"
    "        self.delivery.answered = True\n"
    "        return\n",
)
VARIANTS: dict[str, list[_Edit]] = {
    "rolltap": [],
    "read whole": [_WHOLE],
    "no index": [_WHOLE, _INDEX],
    "no request event": [_WHOLE, _REQUEST],
    "no depth check": [_WHOLE, _DEPTH],
    "no response event": [_WHOLE, _RESPONSE],
    "nothing recorded": [_WHOLE, _REQUEST, _DEPTH, _RESPONSE],
}


def knocked_out(src: Path, dest: Path, edits: list[_Edit]) -> Path:
    """``src`` (a ``src/`` folder) copied to ``dest`` with ``edits`` made."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for file, old, new in edits:
        path = dest / "rolltap" / file
        text = path.read_text()
        if text.count(old) != 1:
            sys.exit(f"{file}: no single place to knock out ({old!r}): the code moved")
        path.write_text(text.replace(old, new))
    return dest


async def _calls(target: Target, n: int, calls: int, stream: bool) -> None:
    async with aiohttp.ClientSession() as http:
        base = history(n - 2 if n > 2 else 2)

        async def call(messages: list[dict[str, object]], stream: bool) -> None:
            data = body(messages, target, stream=stream)
            url = target.url + "/chat/completions"
            async with http.post(url, data=data, headers=target.headers) as resp:
                await resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"{target.name}: HTTP {resp.status}")

        await call(base, False)  # the history sent once, as a rollout would have
        for i in range(calls):
            await call(base + _turn(100_000 + i, "new") if n > 2 else history(2, f"s{i}"), stream)


async def _target(name: str, url: str) -> Target:
    if name == "relay":
        return Target("relay", url + "/v1", "k")
    async with aiohttp.ClientSession() as http:
        return (await register(http, url, 1, name))[0]


def measure(name: str, src: Path | None, sim: str, n: int, args: argparse.Namespace) -> float:
    """CPU microseconds per call of one fresh process: ``src``'s gateway, or the relay."""
    with ExitStack() as stack:
        if src is None:
            url, proc = stack.enter_context(bare_relay(sim, "uvloop"))
        else:
            url, proc = stack.enter_context(gateway(sim, src=src))
        target = asyncio.run(_target(name, url))
        asyncio.run(_calls(target, n, 50, args.stream))  # warm up
        before = cpu_seconds(proc)
        calls: int = args.calls
        asyncio.run(_calls(target, n, calls, args.stream))
        return (cpu_seconds(proc) - before) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", default="2,400")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stream", action="store_true", help="every call streamed")
    parser.add_argument("--baseline-src", help="a src/ folder measured beside this one")
    parser.add_argument(
        "--write-variant", nargs=2, metavar=("VARIANT", "DIR"),
        help="only write VARIANT's src/ to DIR (a new folder), e.g. to give it to "
        "gateway_overhead.py --baseline-src, and exit",
    )  # fmt: skip
    args = parser.parse_args()
    if args.write_variant:
        name, dest = args.write_variant
        if name not in VARIANTS:
            parser.error(f"--write-variant {name!r}: one of {', '.join(map(repr, VARIANTS))}")
        if Path(dest).exists():
            parser.error(f"--write-variant: {dest} exists (give a new folder)")
        print(knocked_out(SRC, Path(dest), VARIANTS[name]))
        return
    base = baseline_src(parser, args.baseline_src)
    here = SRC
    with tempfile.TemporaryDirectory() as tmp, simulator(16) as sim:
        srcs: dict[str, Path | None] = {"relay": None}
        for i, (name, edits) in enumerate(VARIANTS.items()):
            srcs[name] = knocked_out(here, Path(tmp) / f"v{i}", edits)
        if base is not None:
            srcs["baseline"] = knocked_out(base, Path(tmp) / "base", [])
        for n in (int(m) for m in args.messages.split(",")):
            cpu: dict[str, list[float]] = {name: [] for name in srcs}
            for r in range(args.repeat):
                names = list(srcs)
                for k in range(len(names)):  # who goes first rotates
                    name = names[(r + k) % len(names)]
                    cpu[name].append(measure(name, srcs[name], sim, n, args))
            _print(n, cpu, args.stream)


def _print(n: int, cpu: dict[str, list[float]], stream: bool) -> None:
    full = statistics.median(cpu["rolltap"])
    kind = "streamed" if stream else "non-streaming"
    print(f"\n{n} messages, {kind}: gateway CPU per call, µs (median, range)")
    print("| | CPU per call | range | rolltap minus this | over the relay |\n|---|---|---|---|---|")
    relay = statistics.median(cpu["relay"])
    for name, values in cpu.items():
        mid = statistics.median(values)
        cost = "" if name in ("relay", "rolltap", "baseline") else f"{full - mid:+.0f}"
        print(f"| {name} | {mid:.0f} | {min(values):.0f}–{max(values):.0f} | {cost} "
              f"| {mid / relay:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
